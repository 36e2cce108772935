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

Every stream's last message is ``done`` or ``error``:

- the instance renews a lease in the store every :data:`HEARTBEAT_S` seconds; when it
  dies, readers elsewhere end its streams with ``producer_lost`` once the lease
  (:data:`LEASE_S`) lapsed (see ``_store``);
- :meth:`StreamHub.drain` (on SIGTERM, and when the app shuts down) refuses new
  streams, gives running ones up to ``drain_s`` seconds to finish, then ends the rest
  with ``shutting_down``; readers of streams produced elsewhere then get an id-less
  ``shutting_down`` notice (the stream goes on there: resume it with
  ``Last-Event-ID`` on another instance).
- a producer that fails (the store cannot be reached, or anything else) closes its
  slot stream, which closes the upstream request, and ends the stream with ``error``
  (``store_unavailable`` or ``internal_error``); while the store cannot take that
  message, the lease renewal tries again every :data:`HEARTBEAT_S` seconds. A reader
  whose store fails ends with that ``error`` at once (no id: resume once the store is
  back).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections import Counter
from collections.abc import AsyncGenerator, AsyncIterable, Coroutine
from typing import Any, Final

import anyio

from .._errors import SlotflightError
from ..assemble.events import Event
from ._encode import (
    DEFAULT_COALESCE_MS,
    StateMode,
    WireEvent,
    close_source,
    encode_events,
    error_message,
)
from ._store import EventStore, EventStoreFull, StoredEvent, StoreUnavailable

__all__ = ["HEARTBEAT_S", "LEASE_S", "ShuttingDown", "StreamHub"]

_logger = logging.getLogger("slotflight.web")

#: How often attached readers renew their presence, in seconds.
TOUCH_INTERVAL_S: Final = 0.5
#: How often a producer checks for readers once none is attached here, in seconds.
WATCH_INTERVAL_S: Final = 0.1
#: How often the instance renews its producer lease, in seconds.
HEARTBEAT_S: Final = 1.0
#: How long a lease lasts without renewal: an event loop stalled longer than this is
#: taken for a dead instance.
LEASE_S: Final = 5.0

_STOPPED_HERE = error_message(
    "shutting_down", "the instance producing this stream stopped before it finished"
)
_STOPPING = error_message(
    "shutting_down",
    "this instance is stopping; the stream goes on: resume it with Last-Event-ID",
)


class ShuttingDown(SlotflightError):
    """The instance is draining before it stops; it starts no new stream."""

    code = "shutting_down"


class StreamHub:
    """The running producers of one app instance and the readers attached to it."""

    def __init__(
        self,
        store: EventStore,
        *,
        resume_grace_s: float = 5.0,
        max_active: int = 1000,
        drain_s: float = 10.0,
    ) -> None:
        if resume_grace_s < 0 or drain_s < 0:
            raise ValueError("resume_grace_s and drain_s must be >= 0")
        if max_active < 1:
            raise ValueError(f"max_active must be >= 1, got {max_active!r}")
        self.store = store
        self.resume_grace_s = resume_grace_s
        self.max_active = max_active
        self.drain_s = drain_s
        self.instance = uuid.uuid4().hex
        self._producers: dict[str, asyncio.Task[None]] = {}
        self._stop_codes: dict[str, str] = {}
        self._unended: dict[str, str] = {}  # failed streams whose last message is not stored
        self._readers: Counter[str] = Counter()
        self._left: dict[str, asyncio.Event] = {}  # per watched stream: its last reader left
        self._tasks: set[asyncio.Task[None]] = set()
        self._heartbeat: asyncio.Task[None] | None = None
        self._first_lease: asyncio.Future[None] | None = None
        self._starting = 0  # starts waiting for the store, counted against max_active
        self._draining: asyncio.Task[None] | None = None
        self._stopped = asyncio.Event()
        self._shutdown_signal: anyio.Event | None = None

    @property
    def active(self) -> int:
        """How many producers run in this instance."""
        return len(self._producers)

    @property
    def draining(self) -> bool:
        return self._draining is not None

    @property
    def presence_s(self) -> float:
        """How long one touch counts a stream as watched."""
        return self.resume_grace_s + TOUCH_INTERVAL_S

    def shutdown_signal(self) -> anyio.Event:
        """The event sse-starlette sets on its responses when the server stops (SIGTERM):
        it starts :meth:`drain`. One per hub; created on first use (in the loop)."""
        if self._shutdown_signal is None:
            self._shutdown_signal = anyio.Event()
            self._spawn(self._drain_on(self._shutdown_signal), "slot-stream-shutdown")
        return self._shutdown_signal

    def _spawn(self, coroutine: Coroutine[Any, Any, None], name: str) -> None:
        task = asyncio.create_task(coroutine, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _drain_on(self, signal: anyio.Event) -> None:
        await signal.wait()
        await self.drain()

    async def start(
        self,
        stream_id: str,
        source: AsyncIterable[Event],
        *,
        state_mode: StateMode = "patch",
        coalesce_ms: float = DEFAULT_COALESCE_MS,
    ) -> None:
        """Register ``stream_id`` and produce ``source`` into the store in the
        background. Raises :class:`EventStoreFull` or :class:`ShuttingDown` (the
        source is then closed unread).

        A start holds its place among ``max_active`` from its first check, and is
        checked against a drain again once the store has answered, so concurrent
        starts neither exceed the bound nor slip past a drain that began meanwhile."""
        try:
            if self.draining:
                raise ShuttingDown("this instance is stopping; try another one")
            if len(self._producers) + self._starting >= self.max_active:
                raise EventStoreFull(f"{self.max_active} streams are running; try again later")
            self._starting += 1
            try:
                await self._leased()
                await self.store.create(stream_id, self.instance)
                await self.store.touch(stream_id, self.presence_s)
                if self.draining:  # a drain began while the store answered
                    await self._end(stream_id, _STOPPED_HERE.data)
                    raise ShuttingDown("this instance is stopping; try another one")
            finally:
                self._starting -= 1
        except BaseException:
            await close_source(source)
            raise
        wires = encode_events(source, state_mode=state_mode, coalesce_ms=coalesce_ms)
        task = asyncio.create_task(self._produce(stream_id, wires), name=f"slot-stream-{stream_id}")
        self._producers[stream_id] = task
        self._spawn(self._watch(stream_id, task), f"slot-stream-watch-{stream_id}")

    async def _leased(self) -> None:
        """Store the instance's first lease and start :meth:`_beat`, which renews it:
        once, however many starts wait for it (a failed first lease is tried again by
        the next start), and never once a drain began (:meth:`aclose` stops the beat)."""
        if self._heartbeat is not None:
            return
        if self._first_lease is None:
            self._first_lease = asyncio.ensure_future(self.store.heartbeat(self.instance, LEASE_S))
        lease = self._first_lease
        try:
            await asyncio.shield(lease)
        except BaseException:
            if lease.done() and self._first_lease is lease:
                self._first_lease = None
            raise
        if self._heartbeat is None and not self.draining:
            self._heartbeat = asyncio.create_task(self._beat(), name="slot-stream-lease")

    async def _beat(self) -> None:
        while True:
            await asyncio.sleep(HEARTBEAT_S)
            try:
                await self.store.heartbeat(self.instance, LEASE_S)
            except Exception:
                _logger.warning("renewing the producer lease failed")
                continue
            for stream_id, data in list(self._unended.items()):
                await self._end(stream_id, data)

    async def _produce(self, stream_id: str, wires: AsyncGenerator[WireEvent, None]) -> None:
        sequence = 0
        try:
            async with contextlib.aclosing(wires):
                async for wire in wires:
                    sequence += 1
                    event = StoredEvent(sequence, wire.event, wire.data)
                    await self.store.append(stream_id, event)
        except asyncio.CancelledError:
            code = self._stop_codes.pop(stream_id, "abandoned")
            notice = (
                _STOPPED_HERE
                if code == "shutting_down"
                else error_message("abandoned", "no client was reading the stream")
            )
            # The cancellation was delivered. A second one (a drain while the watcher's
            # is handled) must not lose the last message: the store gets it regardless.
            await asyncio.shield(self._end(stream_id, notice.data))
            raise
        except StoreUnavailable as exc:
            _logger.warning("slot stream %s stopped: %s", stream_id, exc.message)
            await self._end(stream_id, error_message(exc.code, exc.message).data)
        except Exception:
            _logger.exception("producing slot stream %s failed", stream_id)
            failure = error_message("internal_error", "producing the stream failed")
            await self._end(stream_id, failure.data)
        finally:
            self._producers.pop(stream_id, None)

    async def _end(self, stream_id: str, data: str) -> None:
        """Store ``data`` as the stream's last message (unless it has one); while the
        store cannot take it, keep it for the next lease renewal."""
        try:
            await self.store.end(stream_id, data)
        except Exception:
            _logger.warning("storing the end of slot stream %s failed", stream_id)
            self._unended[stream_id] = data
            while len(self._unended) > self.max_active:
                del self._unended[next(iter(self._unended))]
        else:
            self._unended.pop(stream_id, None)

    async def _watch(self, stream_id: str, producer: asyncio.Task[None]) -> None:
        """Cancel ``producer`` once nobody has watched its stream for the grace time.

        While a reader is attached here it waits for the last one to leave (or the
        producer to end) instead of polling; then it asks the store every
        :data:`WATCH_INTERVAL_S` (readers elsewhere count too)."""
        left = asyncio.Event()
        self._left[stream_id] = left
        producer.add_done_callback(lambda _: left.set())
        try:
            while not producer.done():
                if self._readers[stream_id]:
                    left.clear()
                    await left.wait()
                    continue
                await asyncio.sleep(WATCH_INTERVAL_S)
                if self._readers[stream_id] or producer.done():
                    continue
                if not await self.store.watched(stream_id):
                    producer.cancel()
                    return
        except Exception:
            _logger.exception("watching slot stream %s failed", stream_id)
        finally:
            self._left.pop(stream_id, None)

    async def follow(
        self, stream_id: str, after: int = 0, *, checked: bool = False
    ) -> AsyncGenerator[StoredEvent, None]:
        """The stream's messages after id ``after``, from the store, while counting this
        reader as attached (``checked``: ``after`` was found at most the stream's last
        id, see :meth:`EventStore.follow`). After a drain, a stream produced elsewhere
        ends here with an id-less ``shutting_down`` notice; when the store fails, with
        an id-less ``error`` (``store_unavailable``, else ``internal_error``)."""
        self._readers[stream_id] += 1
        toucher = asyncio.create_task(self._touch(stream_id))
        events = (  # passed only when set: stores written before it take no ``checked``
            self.store.follow(stream_id, after, self._stopped, checked=True)
            if checked
            else self.store.follow(stream_id, after, self._stopped)
        )
        ended = False
        failure: WireEvent | None = None
        try:
            try:
                async with contextlib.aclosing(events):
                    async for event in events:
                        ended = event.terminal
                        yield event
            except StoreUnavailable as exc:
                failure = error_message(exc.code, exc.message)
            except Exception:
                _logger.exception("reading slot stream %s failed", stream_id)
                failure = error_message("internal_error", "reading the stream failed")
            if failure is not None:
                yield StoredEvent(None, failure.event, failure.data)
            elif not ended and self._stopped.is_set():
                yield StoredEvent(None, _STOPPING.event, _STOPPING.data)
        finally:
            toucher.cancel()
            self._readers[stream_id] -= 1
            if self._readers[stream_id] <= 0:
                del self._readers[stream_id]
                left = self._left.get(stream_id)
                if left is not None:
                    left.set()

    async def _touch(self, stream_id: str) -> None:
        while True:
            try:
                await self.store.touch(stream_id, self.presence_s)
            except Exception:
                _logger.warning("renewing the presence on stream %s failed", stream_id)
            await asyncio.sleep(TOUCH_INTERVAL_S)

    async def drain(self, timeout: float | None = None) -> None:
        """Stop: refuse new streams, let running ones finish for ``timeout`` seconds
        (default ``drain_s``), end the rest with ``shutting_down``, then release the
        readers of streams produced elsewhere. Idempotent; concurrent calls wait for
        the first."""
        if self._draining is None:
            self._draining = asyncio.ensure_future(
                self._drain(self.drain_s if timeout is None else timeout)
            )
        await asyncio.shield(self._draining)

    async def _drain(self, timeout: float) -> None:
        running = list(self._producers.items())
        if running and timeout > 0:
            _logger.info("draining %d slot streams (up to %g s)", len(running), timeout)
            await asyncio.wait([task for _, task in running], timeout=timeout)
        for stream_id, task in running:
            if not task.done() and not task.cancelling():  # else it is ending already
                self._stop_codes[stream_id] = "shutting_down"
                task.cancel()
        if running:
            await asyncio.wait([task for _, task in running])
        self._stopped.set()

    async def aclose(self) -> None:
        """Drain at once (unless a drain runs: then wait for it), stop the lease and
        the watchers."""
        await self.drain(0 if self._draining is None else None)
        tasks = [*self._tasks]
        if self._heartbeat is not None:
            tasks.append(self._heartbeat)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)
