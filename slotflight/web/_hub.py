"""Producers and readers of stored streams: what the gateway runs per slot stream.

:meth:`StreamHub.start` registers a stream in the event store and produces it in a
background task: each message of the slot stream is appended with the next sequence
number. :meth:`StreamHub.follow` reads a stream from the store (from any instance
sharing it) and says, while it reads, that someone is watching.

A producer keeps running while its stream is watched, so that a client whose
connection dropped can reconnect with ``Last-Event-ID`` and continue live. Once no
reader has been attached for ``resume_grace_s`` seconds, the producer is cancelled,
which closes the upstream model request; its stream then ends with an ``error``
message (``abandoned``) for whoever comes back.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from collections.abc import AsyncGenerator, AsyncIterable
from typing import Final

from ..assemble.events import Event
from ._encode import (
    DEFAULT_COALESCE_MS,
    StateMode,
    WireEvent,
    close_source,
    encode_events,
    error_message,
)
from ._store import EventStore, EventStoreFull, StoredEvent

__all__ = ["StreamHub"]

_logger = logging.getLogger("slotflight.web")

#: How often attached readers renew their presence, in seconds.
TOUCH_INTERVAL_S: Final = 0.5
#: How often a producer checks for readers once none is attached here, in seconds.
WATCH_INTERVAL_S: Final = 0.1


class StreamHub:
    """The running producers of one app instance and the readers attached to it."""

    def __init__(
        self,
        store: EventStore,
        *,
        resume_grace_s: float = 5.0,
        max_active: int = 1000,
    ) -> None:
        if resume_grace_s < 0:
            raise ValueError(f"resume_grace_s must be >= 0, got {resume_grace_s!r}")
        if max_active < 1:
            raise ValueError(f"max_active must be >= 1, got {max_active!r}")
        self.store = store
        self.resume_grace_s = resume_grace_s
        self.max_active = max_active
        self._producers: dict[str, asyncio.Task[None]] = {}
        self._readers: Counter[str] = Counter()
        self._watchers: set[asyncio.Task[None]] = set()

    @property
    def active(self) -> int:
        """How many producers run in this instance."""
        return len(self._producers)

    @property
    def presence_s(self) -> float:
        """How long one touch counts a stream as watched."""
        return self.resume_grace_s + TOUCH_INTERVAL_S

    async def start(
        self,
        stream_id: str,
        source: AsyncIterable[Event],
        *,
        state_mode: StateMode = "patch",
        coalesce_ms: float = DEFAULT_COALESCE_MS,
    ) -> None:
        """Register ``stream_id`` and produce ``source`` into the store in the
        background. Raises :class:`EventStoreFull` (the source is
        then closed unread)."""
        try:
            if len(self._producers) >= self.max_active:
                raise EventStoreFull(f"{self.max_active} streams are running; try again later")
            await self.store.create(stream_id)
            await self.store.touch(stream_id, self.presence_s)
        except BaseException:
            await close_source(source)
            raise
        wires = encode_events(source, state_mode=state_mode, coalesce_ms=coalesce_ms)
        task = asyncio.create_task(self._produce(stream_id, wires), name=f"slot-stream-{stream_id}")
        self._producers[stream_id] = task
        watcher = asyncio.create_task(
            self._watch(stream_id, task), name=f"slot-stream-watch-{stream_id}"
        )
        self._watchers.add(watcher)
        watcher.add_done_callback(self._watchers.discard)

    async def _produce(self, stream_id: str, wires: AsyncGenerator[WireEvent, None]) -> None:
        sequence = 0
        try:
            async with contextlib.aclosing(wires):
                async for wire in wires:
                    sequence += 1
                    event = StoredEvent(sequence, wire.event, wire.data)
                    await self.store.append(stream_id, event)
        except asyncio.CancelledError:
            notice = error_message("abandoned", "no client was reading the stream")
            try:  # the cancellation was delivered: awaiting here still runs
                await self.store.append(
                    stream_id, StoredEvent(sequence + 1, notice.event, notice.data)
                )
            except Exception:
                _logger.warning("storing the end of slot stream %s failed", stream_id)
            raise
        except Exception:
            _logger.exception("storing slot stream %s failed", stream_id)
        finally:
            self._producers.pop(stream_id, None)

    async def _watch(self, stream_id: str, producer: asyncio.Task[None]) -> None:
        """Cancel ``producer`` once nobody has watched its stream for the grace time."""
        try:
            while not producer.done():
                await asyncio.sleep(WATCH_INTERVAL_S)
                if self._readers[stream_id] or producer.done():
                    continue
                if not await self.store.watched(stream_id):
                    producer.cancel()
                    return
        except Exception:
            _logger.exception("watching slot stream %s failed", stream_id)

    async def follow(self, stream_id: str, after: int = 0) -> AsyncGenerator[StoredEvent, None]:
        """The stream's messages after id ``after``, from the store, while counting this
        reader as attached."""
        self._readers[stream_id] += 1
        toucher = asyncio.create_task(self._touch(stream_id))
        events = self.store.follow(stream_id, after)
        try:
            async with contextlib.aclosing(events):
                async for event in events:
                    yield event
        finally:
            toucher.cancel()
            self._readers[stream_id] -= 1
            if self._readers[stream_id] <= 0:
                del self._readers[stream_id]

    async def _touch(self, stream_id: str) -> None:
        while True:
            try:
                await self.store.touch(stream_id, self.presence_s)
            except Exception:
                _logger.warning("renewing the presence on stream %s failed", stream_id)
            await asyncio.sleep(TOUCH_INTERVAL_S)

    async def aclose(self) -> None:
        """Cancel every producer (their upstream requests close) and wait for them."""
        tasks = [*self._producers.values(), *self._watchers]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)
