"""The in-process event store: bounded in streams, messages and bytes per stream, and time.

A finished stream is packed: its messages become zlib-compressed JSON documents of
:data:`PACKED_BLOCK` messages each (compressed on a worker thread), unpacked again one
block at a time, and only from the block holding the first message a resuming reader
asks for. The messages of one stream repeat their envelope (type, slot, path …)
message after message, so a finished stream keeps about one to two bytes per byte of
model output instead of one Python object per message, and a reader costs what it
reads, not the whole stream.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
import zlib
from collections import deque
from collections.abc import AsyncGenerator, Iterator, Sequence
from typing import Final

from ._store import (
    IDLE_CHECK_S,
    EventStore,
    EventStoreFull,
    StoredEvent,
    StreamTail,
    beyond_event,
    expired_event,
    gap_event,
    lost_message,
)

__all__ = ["DEFAULT_MAX_STREAM_BYTES", "PACKED_BLOCK", "MemoryEventStore"]

#: Messages per packed block of a finished stream.
PACKED_BLOCK: Final = 256

#: The bytes of messages one stream keeps by default: a patch-mode stream of a pass at
#: the assembler's 16 MiB bound, snapshots included, fits; a ``full``-mode stream,
#: whose every message carries the whole object, keeps only its last messages.
DEFAULT_MAX_STREAM_BYTES: Final = 32 * 2**20


def _size(event: StoredEvent) -> int:
    """The memory a message's text takes (O(1): ``sys.getsizeof`` of a ``str``)."""
    return sys.getsizeof(event.data) + sys.getsizeof(event.event)


def _pack(events: Sequence[StoredEvent]) -> list[bytes]:
    blocks = []
    for start in range(0, len(events), PACKED_BLOCK):
        rows = [[e.id, e.event, e.data] for e in events[start : start + PACKED_BLOCK]]
        blocks.append(zlib.compress(json.dumps(rows, separators=(",", ":")).encode(), 6))
    return blocks


def _unpack(block: bytes) -> list[StoredEvent]:
    return [StoredEvent(*row) for row in json.loads(zlib.decompress(block))]


class _Stream:
    __slots__ = (
        "changed",
        "check",
        "checks",
        "events",
        "expires_at",
        "finished",
        "last_id",
        "max_bytes",
        "nbytes",
        "packed",
        "producer",
        "watched_until",
    )

    def __init__(self, max_events: int, max_bytes: int, expires_at: float, producer: str) -> None:
        self.events: deque[StoredEvent] = deque(maxlen=max_events)
        self.max_bytes = max_bytes
        self.nbytes = 0  # of the messages in ``events`` (see :func:`_size`), or packed
        self.producer = producer
        self.packed: tuple[int, list[bytes]] | None = None  # (first id, blocks) once finished
        self.last_id = 0
        self.finished = False
        self.expires_at = expires_at
        self.watched_until = 0.0
        self.changed = asyncio.Event()
        self.check: asyncio.TimerHandle | None = None
        self.checks = 0  # how many times the idle check fired

    def arm_check(self) -> None:
        """Wake the stream's readers in :data:`IDLE_CHECK_S` (one timer per stream, not
        per wait), so that those that got nothing for that long check the producer's
        lease."""
        if self.check is None:
            self.check = asyncio.get_running_loop().call_later(IDLE_CHECK_S, self._checked)

    def _checked(self) -> None:
        self.check = None
        self.checks += 1
        self.notify()

    def keep(self, event: StoredEvent) -> None:
        """Add ``event``, then drop the oldest messages while they hold more than
        ``max_bytes`` (the last one is always kept)."""
        events = self.events
        if len(events) == events.maxlen:
            self.nbytes -= _size(events[0])  # the deque drops it on append
        events.append(event)
        self.nbytes += _size(event)
        while self.nbytes > self.max_bytes and len(events) > 1:
            self.nbytes -= _size(events.popleft())

    def first_id(self) -> int:
        """The id of the first message retained."""
        if self.packed is not None:
            return self.packed[0]
        return self.last_id - len(self.events) + 1

    def after(self, after: int) -> Iterator[StoredEvent]:
        """The retained messages after id ``after`` (at least :meth:`first_id` - 1): of
        a packed stream unpacked block by block from the one holding ``after + 1``."""
        if self.packed is None:
            # Indexed from the right: cheap for readers that keep up.
            events = self.events
            return iter([events[-k] for k in range(self.last_id - after, 0, -1)])
        first, blocks = self.packed
        return self._unpacked(blocks, after + 1 - first)

    @staticmethod
    def _unpacked(blocks: list[bytes], offset: int) -> Iterator[StoredEvent]:
        block, skip = divmod(offset, PACKED_BLOCK)
        for packed in blocks[block:]:
            yield from _unpack(packed)[skip:]
            skip = 0

    def notify(self) -> None:
        changed, self.changed = self.changed, asyncio.Event()
        changed.set()


class MemoryEventStore(EventStore):
    """Keeps streams in this process (the default store of one instance).

    Bounds: at most ``max_streams`` streams (when full, the oldest finished stream is
    dropped; with every stream still running, :meth:`create` raises
    :class:`EventStoreFull`), the last ``max_events`` messages of each stream, and of
    those only the last that hold at most ``max_stream_bytes`` (the last message is
    always kept): the count alone does not bound memory when every message carries the
    whole object (``state_mode="full"``). A reader behind what is kept gets
    ``resume_gap``. A stream is dropped ``ttl`` seconds after its last message.
    """

    def __init__(
        self,
        *,
        max_streams: int = 1000,
        max_events: int = 10_000,
        max_stream_bytes: int = DEFAULT_MAX_STREAM_BYTES,
        ttl: float = 600.0,
    ) -> None:
        if max_streams < 1 or max_events < 1 or max_stream_bytes < 1 or ttl <= 0:
            raise ValueError(
                "max_streams, max_events and max_stream_bytes must be >= 1 and ttl > 0"
            )
        self.max_streams = max_streams
        self.max_events = max_events
        self.max_stream_bytes = max_stream_bytes
        self.ttl = ttl
        self._streams: dict[str, _Stream] = {}
        self._leases: dict[str, float] = {}

    def __len__(self) -> int:
        return len(self._streams)

    def _purge(self) -> None:
        now = time.monotonic()
        for stream_id in [k for k, s in self._streams.items() if s.expires_at <= now]:
            self._drop(stream_id)

    def _drop(self, stream_id: str) -> None:
        stream = self._streams.pop(stream_id, None)
        if stream is not None:
            stream.notify()  # readers waiting on it see it gone

    def _get(self, stream_id: str) -> _Stream | None:
        stream = self._streams.get(stream_id)
        if stream is not None and stream.expires_at <= time.monotonic():
            self._drop(stream_id)
            return None
        return stream

    async def create(self, stream_id: str, producer: str = "") -> None:
        self._purge()
        if stream_id in self._streams:
            raise ValueError(f"stream {stream_id!r} exists already")
        if len(self._streams) >= self.max_streams:
            oldest = next((k for k, s in self._streams.items() if s.finished), None)
            if oldest is None:
                raise EventStoreFull(f"{self.max_streams} streams are running; try again later")
            self._drop(oldest)
        self._streams[stream_id] = _Stream(
            self.max_events, self.max_stream_bytes, time.monotonic() + self.ttl, producer
        )

    async def append(self, stream_id: str, event: StoredEvent) -> None:
        stream = self._get(stream_id)
        if stream is None:
            return  # expired or evicted: nobody can read it any more
        if event.id is not None and event.id <= stream.last_id:
            # like Redis Streams: ids only grow (a producer found lost cannot go on)
            raise ValueError(f"message {event.id} of stream {stream_id!r} is not new")
        self._append(stream, event)
        if event.terminal:
            await self._pack(stream)

    async def _pack(self, stream: _Stream) -> None:
        events = list(stream.events)
        if not events:
            return
        first = stream.last_id - len(events) + 1
        packed = await asyncio.to_thread(_pack, events)
        if stream.last_id == events[-1].id:  # nothing came after it meanwhile
            stream.packed = (first, packed)
            stream.events.clear()
            stream.nbytes = sum(map(len, packed))

    def _append(self, stream: _Stream, event: StoredEvent) -> None:
        if event.id is not None:
            stream.last_id = event.id
        stream.keep(event)
        stream.finished = stream.finished or event.terminal
        stream.expires_at = time.monotonic() + self.ttl
        stream.notify()

    async def end(self, stream_id: str, data: str) -> bool:
        stream = self._get(stream_id)
        if stream is None or stream.finished:
            return False
        self._append(stream, StoredEvent(stream.last_id + 1, "error", data))
        await self._pack(stream)
        return True

    async def exists(self, stream_id: str) -> bool:
        return self._get(stream_id) is not None

    def stream_bytes(self, stream_id: str) -> int:
        """The bytes the stream's retained messages hold (packed, once it finished):
        what ``max_stream_bytes`` bounds; 0 when the stream is not retained."""
        stream = self._get(stream_id)
        return 0 if stream is None else stream.nbytes

    async def last_id(self, stream_id: str) -> int | None:
        stream = self._get(stream_id)
        return None if stream is None else stream.last_id

    async def tail(self, stream_id: str) -> StreamTail | None:
        stream = self._get(stream_id)
        return None if stream is None else StreamTail(stream.last_id, stream.finished)

    async def heartbeat(self, producer: str, seconds: float) -> None:
        self._leases[producer] = time.monotonic() + seconds

    def _lost(self, stream: _Stream) -> None:
        """End ``stream`` with ``producer_lost`` when its producer's lease lapsed."""
        if stream.finished or not stream.producer:
            return
        if self._leases.get(stream.producer, 0.0) > time.monotonic():
            return
        self._append(stream, StoredEvent(stream.last_id + 1, "error", lost_message()))

    async def touch(self, stream_id: str, seconds: float) -> None:
        stream = self._get(stream_id)
        if stream is not None:
            stream.watched_until = max(stream.watched_until, time.monotonic() + seconds)

    async def watched(self, stream_id: str) -> bool:
        stream = self._get(stream_id)
        return stream is not None and stream.watched_until > time.monotonic()

    async def follow(
        self,
        stream_id: str,
        after: int = 0,
        stop: asyncio.Event | None = None,
        *,
        checked: bool = False,  # the check below costs nothing here
    ) -> AsyncGenerator[StoredEvent, None]:
        quiet_since = time.monotonic()  # when this reader last got a message
        while True:
            stream = self._get(stream_id)
            if stream is None:
                yield expired_event()
                return
            changed = stream.changed
            count = stream.last_id - after
            if count < 0:  # only on the first pass: ``after`` never passes ``last_id``
                yield beyond_event(after, stream.last_id)
                return
            if count > 0:
                first = stream.first_id()
                if after + 1 < first:
                    yield gap_event(after, first)
                    return
                for event in stream.after(after):
                    yield event
                    if event.terminal:
                        return
                    after = event.id or after
                quiet_since = time.monotonic()
                continue
            if stream.finished or (stop is not None and stop.is_set()):
                return
            wait = stream.expires_at - time.monotonic()
            if wait < IDLE_CHECK_S:  # it expires first: wake then
                try:
                    async with asyncio.timeout(max(wait, 0.0)):
                        await changed.wait()
                except TimeoutError:  # expiry and the lease are checked next
                    self._lost(stream)
                continue
            checks = stream.checks
            stream.arm_check()
            await changed.wait()
            if stream.checks != checks and time.monotonic() - quiet_since >= IDLE_CHECK_S:
                self._lost(stream)  # nothing came for a while: check the lease
