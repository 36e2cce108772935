"""The Redis Streams event store: one stream's messages shared by every app instance.

Each slot stream is a Redis stream ``{prefix}{id}:events`` whose entry ids are
``0-<sequence>``, so ``Last-Event-ID`` maps directly onto ``XREAD`` positions. Entries
are added with ``XADD … MAXLEN ~ max_events`` and the keys expire ``ttl`` seconds after
the last message (``EXPIRE`` on every append). Readers follow with ``XREAD BLOCK``. A
reader's presence is a key with a short expiry (``SET … PX``). A ``meta`` key marks
that the stream exists and holds its producer's instance id, or ``finished`` once its
terminal message is stored. An instance's lease is a key ``{prefix}producer:{id}``
with a short expiry; a reader that finds it gone ends the stream with a Lua script
that appends ``producer_lost`` atomically (only if the stream is still unfinished
and the lease still absent, with the next id), so a producer that was only slow
then fails its next ``XADD`` (its id is no longer new) and stops.

Every command is bounded in time (connecting: :data:`CONNECT_TIMEOUT_S`; a reply:
:data:`REPLY_TIMEOUT_S` beyond an ``XREAD`` block); a refused or broken connection
and a reply that does not come in time become :class:`~._store.StoreUnavailable`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Iterator, Mapping
from typing import Any, Final

import redis.asyncio as aioredis
from redis.exceptions import ClusterDownError, OutOfMemoryError, ReadOnlyError, ResponseError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from ._store import (
    EventStore,
    StoredEvent,
    StoreUnavailable,
    beyond_event,
    expired_event,
    gap_event,
    lost_message,
)

__all__ = ["RedisEventStore"]

_FINISHED = "finished"
#: A stream created without a producer: no lease is checked.
_UNLEASED = "-"

#: Seconds to connect to Redis (clients made by :meth:`RedisEventStore.from_url`).
CONNECT_TIMEOUT_S: Final = 2.0
#: Seconds a reply may take, beyond the ``XREAD`` block time.
REPLY_TIMEOUT_S: Final = 5.0

# Appends the terminal ARGV[1] with the next id, unless the stream has ended.
# KEYS: meta, events; ARGV: data, maxlen, ttl ms. Returns the new id or 0.
_APPEND_TERMINAL = """
local last = redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', 1)
local n = 0
if #last > 0 then n = tonumber(string.match(last[1][1], '%-(%d+)$')) end
redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[2], '0-' .. (n + 1), 'e', 'error', 'd', ARGV[1])
redis.call('SET', KEYS[1], 'finished', 'PX', ARGV[3])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
return n + 1
"""
_END = (
    """
local meta = redis.call('GET', KEYS[1])
if (not meta) or meta == 'finished' then return 0 end
"""
    + _APPEND_TERMINAL
)
# KEYS: meta, events, lease; ARGV: data, maxlen, ttl ms, producer.
_END_LOST = (
    """
if redis.call('GET', KEYS[1]) ~= ARGV[4] then return 0 end
if redis.call('EXISTS', KEYS[3]) == 1 then return 0 end
"""
    + _APPEND_TERMINAL
)


#: Replies with which a Redis that answers refuses to take commands for now: out of
#: memory, a read-only replica after a failover, a failed disk save, too few replicas,
#: loading or busy with a script, a cluster slot without its master.
_REFUSALS: Final = (OutOfMemoryError, ReadOnlyError, ClusterDownError)
_REFUSAL_CODES: Final = ("MISCONF", "NOREPLICAS", "LOADING", "BUSY", "TRYAGAIN", "MASTERDOWN")


@contextlib.contextmanager
def _reachable() -> Iterator[None]:
    """Turn a failure to reach Redis (a refused or broken connection, no reply in
    time), or a reply refusing commands for now (:data:`_REFUSALS`), into
    :class:`StoreUnavailable`; other errors Redis answers with are not that."""
    try:
        yield
    except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
        raise StoreUnavailable(f"the Redis store cannot be reached ({type(exc).__name__})") from exc
    except ResponseError as exc:
        if isinstance(exc, _REFUSALS):
            code = type(exc).__name__
        else:  # in a pipeline: "Command # 1 (...) of pipeline caused error: MISCONF ..."
            code = str(exc).rpartition("caused error: ")[2].partition(" ")[0]
            if code not in _REFUSAL_CODES:
                raise
        raise StoreUnavailable(f"the Redis store refuses commands ({code})") from exc


def _text(value: Any) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def _sequence(entry_id: Any) -> int:
    return int(_text(entry_id).partition("-")[2])


class RedisEventStore(EventStore):
    """Streams kept in Redis (``redis.asyncio``), for several app instances.

    ``client`` is used as given and closed by :meth:`aclose` only when the store made
    it (:meth:`from_url`); it must speak RESP2 (redis-py's default). ``block_ms`` bounds each ``XREAD BLOCK``; between blocks the
    reader checks that the stream still exists.
    """

    def __init__(
        self,
        client: aioredis.Redis,
        *,
        prefix: str = "slotflight:",
        max_events: int = 10_000,
        ttl: float = 600.0,
        block_ms: int = 1000,
        owns_client: bool = False,
    ) -> None:
        if max_events < 1 or ttl <= 0 or block_ms < 1:
            raise ValueError("max_events and block_ms must be >= 1 and ttl > 0")
        self.client = client
        self.prefix = prefix
        self.max_events = max_events
        self.ttl_ms = max(int(ttl * 1000), 1)
        self.block_ms = block_ms
        self._owns_client = owns_client
        self._end = client.register_script(_END)
        self._end_lost = client.register_script(_END_LOST)

    @classmethod
    def from_url(cls, url: str, **options: Any) -> RedisEventStore:
        """A store with its own client for ``url`` (``redis://host:port/db``), whose
        commands time out (:data:`CONNECT_TIMEOUT_S`, :data:`REPLY_TIMEOUT_S`)."""
        block_s = int(options.get("block_ms", 1000)) / 1000
        client = aioredis.Redis.from_url(
            url,
            socket_connect_timeout=CONNECT_TIMEOUT_S,
            socket_timeout=block_s + REPLY_TIMEOUT_S,
        )
        return cls(client, owns_client=True, **options)

    def _events_key(self, stream_id: str) -> str:
        return f"{self.prefix}{stream_id}:events"

    def _meta_key(self, stream_id: str) -> str:
        return f"{self.prefix}{stream_id}:meta"

    def _readers_key(self, stream_id: str) -> str:
        return f"{self.prefix}{stream_id}:readers"

    def _lease_key(self, producer: str) -> str:
        return f"{self.prefix}producer:{producer}"

    async def create(self, stream_id: str, producer: str = "") -> None:
        if producer in ("", _FINISHED, _UNLEASED):
            producer = _UNLEASED
        with _reachable():
            created = await self.client.set(
                self._meta_key(stream_id), producer, px=self.ttl_ms, nx=True
            )
        if not created:
            raise ValueError(f"stream {stream_id!r} exists already")

    async def append(self, stream_id: str, event: StoredEvent) -> None:
        if event.id is None:
            raise ValueError("stored messages need an id")
        key = self._events_key(stream_id)
        with _reachable():
            async with self.client.pipeline(transaction=False) as pipe:
                pipe.xadd(
                    key,
                    {"e": event.event, "d": event.data},
                    id=f"0-{event.id}",
                    maxlen=self.max_events,
                    approximate=True,
                )
                pipe.pexpire(key, self.ttl_ms)
                if event.terminal:
                    pipe.set(self._meta_key(stream_id), _FINISHED, px=self.ttl_ms)
                else:
                    pipe.pexpire(self._meta_key(stream_id), self.ttl_ms)
                try:
                    await pipe.execute()
                except ResponseError as exc:
                    if "equal or smaller" not in str(exc):  # XADD: not above the last id
                        raise
                    raise ValueError(
                        f"message {event.id} of stream {stream_id!r} is not new"
                    ) from exc

    async def end(self, stream_id: str, data: str) -> bool:
        with _reachable():
            added = await self._end(
                keys=[self._meta_key(stream_id), self._events_key(stream_id)],
                args=[data, self.max_events, self.ttl_ms],
            )
        return bool(added)

    async def exists(self, stream_id: str) -> bool:
        with _reachable():
            return bool(await self.client.exists(self._meta_key(stream_id)))

    async def last_id(self, stream_id: str) -> int | None:
        with _reachable():
            async with self.client.pipeline(transaction=False) as pipe:
                pipe.exists(self._meta_key(stream_id))
                pipe.xrevrange(self._events_key(stream_id), count=1)
                retained, last = await pipe.execute()
        if not retained:
            return None
        return _sequence(last[0][0]) if last else 0

    async def heartbeat(self, producer: str, seconds: float) -> None:
        with _reachable():
            await self.client.set(self._lease_key(producer), b"1", px=max(int(seconds * 1000), 1))

    async def touch(self, stream_id: str, seconds: float) -> None:
        with _reachable():
            await self.client.set(
                self._readers_key(stream_id), b"1", px=max(int(seconds * 1000), 1)
            )

    async def watched(self, stream_id: str) -> bool:
        with _reachable():
            return bool(await self.client.exists(self._readers_key(stream_id)))

    async def ping(self) -> None:
        """A small write (a key that expires in a second): a Redis that answers but
        refuses writes (out of memory, a read-only replica) cannot take streams."""
        with _reachable():
            await self.client.set(f"{self.prefix}ping", b"1", px=1000)

    async def follow(
        self, stream_id: str, after: int = 0, stop: asyncio.Event | None = None
    ) -> AsyncGenerator[StoredEvent, None]:
        key = self._events_key(stream_id)
        if after > 0:
            last = await self.last_id(stream_id)
            if last is None:
                yield expired_event()
                return
            if after > last:  # ids only grow: never again, once checked here
                yield beyond_event(after, last)
                return
        finished = False  # the stream was seen finished: read what is left, without waiting
        while True:
            block = None if finished else self.block_ms
            with _reachable():
                reply = await self.client.xread({key: f"0-{after}"}, count=256, block=block)
            entries = _entries(reply)
            if not entries:
                if finished or (stop is not None and stop.is_set()):
                    return  # nothing comes after the terminal message
                with _reachable():
                    meta = await self.client.get(self._meta_key(stream_id))
                if meta is None:
                    yield expired_event()
                    return
                producer = _text(meta)
                if producer == _FINISHED:
                    # The terminal message may have been stored after the read above.
                    finished = True
                    continue
                if producer != _UNLEASED:
                    with _reachable():
                        await self._end_lost(
                            keys=[self._meta_key(stream_id), key, self._lease_key(producer)],
                            args=[lost_message(), self.max_events, self.ttl_ms, producer],
                        )
                continue
            first = _sequence(entries[0][0])
            if first != after + 1:
                yield gap_event(after, first)
                return
            for entry_id, fields in entries:
                event = StoredEvent(_sequence(entry_id), _field(fields, "e"), _field(fields, "d"))
                yield event
                if event.terminal:
                    return
                after = event.id or after

    async def aclose(self) -> None:
        if self._owns_client:
            await self.client.aclose()


def _entries(reply: Any) -> list[tuple[Any, Mapping[Any, Any]]]:
    """The entries of a one-stream ``XREAD`` reply (RESP2, redis-py's default)."""
    return list(reply[0][1]) if reply else []


def _field(fields: Mapping[Any, Any], name: str) -> str:
    """A field of an entry, whether the client decodes responses or not."""
    value = fields.get(name.encode()) if name.encode() in fields else fields.get(name)
    return _text(value)
