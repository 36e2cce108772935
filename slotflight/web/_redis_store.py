"""The Redis Streams event store: one stream's messages shared by every app instance.

Each slot stream is a Redis stream ``{prefix}{id}:events`` whose entry ids are
``0-<sequence>``, so ``Last-Event-ID`` maps directly onto ``XREAD`` positions. Entries
are added by a Lua script, atomically with their bounds: it keeps a ``tally`` hash (the
last id, and the bytes of the entries kept), drops the oldest entries while more than
``max_events`` are kept or they hold more than ``max_stream_bytes`` (reading only those
it drops, then ``XTRIM … MINID``), and renews the keys' expiry, ``ttl`` seconds after
the last message. Readers follow with ``XREAD BLOCK``. A reader's presence is a key
with a short expiry (``SET … PX``). A ``meta`` key marks
that the stream exists and holds its producer's instance id, or ``finished`` once its
terminal message is stored. An instance's lease is a key ``{prefix}producer:{id}``
with a short expiry; a reader that finds it gone ends the stream with a Lua script
that appends ``producer_lost`` atomically (only if the stream is still unfinished
and the lease still absent, with the next id), so a producer that was only slow
then fails its next append (its id is no longer new) and stops.

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

from ._memory_store import DEFAULT_MAX_STREAM_BYTES
from ._store import (
    EventStore,
    StoredEvent,
    StoreUnavailable,
    StreamTail,
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

# Shared by the scripts below. KEYS: meta, events, tally (a hash: ``last``, the last
# message's id; ``bytes``, what the kept messages' fields hold).
_KEEP = """
local function last_id()
  local last = redis.call('HGET', KEYS[3], 'last')
  if last then return tonumber(last) end
  local top = redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', 1)
  if #top == 0 then return 0 end
  return tonumber(string.match(top[1][1], '%-(%d+)$'))
end

local function size(fields)
  local n = 0
  for i = 1, #fields, 2 do
    if fields[i] == 'e' or fields[i] == 'd' then n = n + #fields[i + 1] end
  end
  return n
end

-- Appends message id, then drops the oldest messages while more than maxlen are kept
-- or they hold more than maxbytes (never the last one), reading only those it drops.
local function keep(id, event, data, maxlen, maxbytes, ttl, terminal)
  redis.call('XADD', KEYS[2], '0-' .. id, 'e', event, 'd', data)
  local held = tonumber(redis.call('HGET', KEYS[3], 'bytes') or '0') + #event + #data
  local count = redis.call('XLEN', KEYS[2])
  local cursor, dropped, step = '-', nil, 1
  while count > 1 and (count > maxlen or held > maxbytes) do
    local want = math.min(math.max(count - maxlen, step), 256)
    local batch = redis.call('XRANGE', KEYS[2], cursor, '+', 'COUNT', want)
    for _, entry in ipairs(batch) do
      if count == 1 or (count <= maxlen and held <= maxbytes) then break end
      held = held - size(entry[2])
      count = count - 1
      dropped = entry[1]
    end
    cursor = '(' .. dropped
    step = math.min(step * 2, 64)
  end
  if dropped then
    local n = tonumber(string.match(dropped, '%-(%d+)$'))
    redis.call('XTRIM', KEYS[2], 'MINID', '0-' .. (n + 1))
  end
  redis.call('HSET', KEYS[3], 'last', id, 'bytes', held)
  redis.call('PEXPIRE', KEYS[3], ttl)
  redis.call('PEXPIRE', KEYS[2], ttl)
  if terminal then
    redis.call('SET', KEYS[1], 'finished', 'PX', ttl)
  else
    redis.call('PEXPIRE', KEYS[1], ttl)
  end
end
"""
# ARGV: id, event, data, maxlen, maxbytes, ttl ms, terminal (1 or 0). Returns 1, or 0
# when the id is not above the last one (a producer found lost cannot go on).
_APPEND = (
    _KEEP
    + """
if tonumber(ARGV[1]) <= last_id() then return 0 end
keep(ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6], ARGV[7] == '1')
return 1
"""
)
# Appends the terminal ARGV[1] with the next id. ARGV: data, maxlen, maxbytes, ttl ms.
# Returns the new id.
_APPEND_TERMINAL = """
local n = last_id() + 1
keep(n, 'error', ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4], true)
return n
"""
# Unless the stream has ended. Returns the new id or 0.
_END = (
    _KEEP
    + """
local meta = redis.call('GET', KEYS[1])
if (not meta) or meta == 'finished' then return 0 end
"""
    + _APPEND_TERMINAL
)
# KEYS: meta, events, tally, lease; ARGV: data, maxlen, maxbytes, ttl ms, producer.
_END_LOST = (
    _KEEP
    + """
if redis.call('GET', KEYS[1]) ~= ARGV[5] then return 0 end
if redis.call('EXISTS', KEYS[4]) == 1 then return 0 end
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

    Bounds, as :class:`~._memory_store.MemoryEventStore`'s: of each stream the last
    ``max_events`` messages, and of those only the last that hold at most
    ``max_stream_bytes`` (the bytes of their event names and data; the last message is
    always kept), so a stream whose every message carries the whole object
    (``state_mode="full"``) cannot grow without bound. A reader behind what is kept gets
    ``resume_gap``.
    """

    def __init__(
        self,
        client: aioredis.Redis,
        *,
        prefix: str = "slotflight:",
        max_events: int = 10_000,
        max_stream_bytes: int = DEFAULT_MAX_STREAM_BYTES,
        ttl: float = 600.0,
        block_ms: int = 1000,
        owns_client: bool = False,
    ) -> None:
        if max_events < 1 or max_stream_bytes < 1 or ttl <= 0 or block_ms < 1:
            raise ValueError("max_events, max_stream_bytes and block_ms must be >= 1 and ttl > 0")
        self.client = client
        self.prefix = prefix
        self.max_events = max_events
        self.max_stream_bytes = max_stream_bytes
        self.ttl_ms = max(int(ttl * 1000), 1)
        self.block_ms = block_ms
        self._owns_client = owns_client
        self._append = client.register_script(_APPEND)
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

    def _tally_key(self, stream_id: str) -> str:
        return f"{self.prefix}{stream_id}:tally"

    def _keys(self, stream_id: str) -> list[str]:
        """The keys the scripts take: meta, events, tally."""
        return [
            self._meta_key(stream_id),
            self._events_key(stream_id),
            self._tally_key(stream_id),
        ]

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
        with _reachable():
            added = await self._append(
                keys=self._keys(stream_id),
                args=[
                    event.id,
                    event.event,
                    event.data,
                    self.max_events,
                    self.max_stream_bytes,
                    self.ttl_ms,
                    1 if event.terminal else 0,
                ],
            )
        if not added:  # like XADD: ids only grow (a producer found lost cannot go on)
            raise ValueError(f"message {event.id} of stream {stream_id!r} is not new")

    async def end(self, stream_id: str, data: str) -> bool:
        with _reachable():
            added = await self._end(
                keys=self._keys(stream_id),
                args=[data, self.max_events, self.max_stream_bytes, self.ttl_ms],
            )
        return bool(added)

    async def exists(self, stream_id: str) -> bool:
        with _reachable():
            return bool(await self.client.exists(self._meta_key(stream_id)))

    async def last_id(self, stream_id: str) -> int | None:
        tail = await self.tail(stream_id)
        return None if tail is None else tail.last

    async def tail(self, stream_id: str) -> StreamTail | None:
        """One round trip (the meta key says whether the stream is retained and
        finished, the tally holds the last id), reading no message, in a transaction:
        no message is stored between the two reads; a stream with no tally yet (no
        message) is read from its events."""
        with _reachable():
            async with self.client.pipeline(transaction=True) as pipe:
                pipe.get(self._meta_key(stream_id))
                pipe.hget(self._tally_key(stream_id), "last")
                meta, last = await pipe.execute()
            if meta is None:
                return None
            finished = _text(meta) == _FINISHED
            if last is not None:
                return StreamTail(int(last), finished)
            top = await self.client.xrevrange(self._events_key(stream_id), count=1)
        return StreamTail(_sequence(top[0][0]) if top else 0, finished)

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
        self,
        stream_id: str,
        after: int = 0,
        stop: asyncio.Event | None = None,
        *,
        checked: bool = False,
    ) -> AsyncGenerator[StoredEvent, None]:
        key = self._events_key(stream_id)
        finished = False  # the stream was seen finished: read what is left, without waiting
        if after > 0 and not checked:
            tail = await self.tail(stream_id)
            if tail is None:
                yield expired_event()
                return
            if after > tail.last:  # ids only grow: never again, once checked here
                yield beyond_event(after, tail.last)
                return
            if tail.finished and after == tail.last:
                return  # it read the terminal message: nothing follows, no wait
            finished = tail.finished
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
                            keys=[*self._keys(stream_id), self._lease_key(producer)],
                            args=[
                                lost_message(),
                                self.max_events,
                                self.max_stream_bytes,
                                self.ttl_ms,
                                producer,
                            ],
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
