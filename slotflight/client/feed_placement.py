"""Where an async stream feeds a chunk: on the event loop, or on a worker thread.

Feeding a model chunk to the assembler costs O(chunk), except when the chunk closes a
value: the value is then validated and its slot checks run, O(value), and the
near-copy search of ``repeat`` and ``list_repeat`` compares it with up to 256 earlier
texts per word; a custom check costs what it costs. A model may write values of up to
``max_frame_chars`` (1 MiB): closing one such value on the event loop held it for most
of a second (16 list items of 100,000 distinct words each: 0.8 s for one item),
stalling everything else the loop serves (the gateway's other streams and
``/health``; an application's own requests).

So :class:`FeedPlacement` sends a chunk to a worker thread
(:class:`~.workers.Workers`)

- once the value it belongs to has reached :data:`OFFLOAD_CHARS` characters (counted
  from where the last value closed), until a chunk closes it;
- for the rest of the stream, once one feed used more than :data:`COSTLY_STEP_S` of
  CPU (``time.thread_time``, wherever it ran): a smaller value may cost as much when
  many earlier texts share its words, or when a custom check is slow.

Every other chunk is fed on the event loop. A hop to a thread and back costs 15-45 µs
of CPU, most chunks cost a few µs to feed, and the close of a value of 9,000
characters of the load benchmark about 2 ms: feeding on a worker every chunk of a
value past 4,096 characters made the gateway need 10-22 % more CPU per upstream chunk
there (``benchmarks/sse_load.py --parts gateway-cost``). The stream awaits each feed
before it reads the next chunk, so its events keep their order and its state is
changed by one thread at a time. Reading the state (``stream.state``, ``completed()``
…) while a worker feeds the stream waits for that feed to end; so does a stream
cancelled meanwhile, before the cancellation goes on, and a stream closed meanwhile
ends with :class:`~slotflight.StreamClosed` at its next read. When the pool is full,
the chunk is fed on the event loop.

The end of a pass (the whole-object validation, the follow-up request) stays on the
event loop: it is O(object) once per pass. The sync stream feeds every chunk on its
own thread.
"""

from __future__ import annotations

import threading
import time
from typing import Final

from ..assemble.events import Event, SlotComplete, SlotFailed, SlotRejected
from .core import chunk_text
from .flow import Feed
from .workers import Workers, WorkRefused

__all__ = ["COSTLY_STEP_S", "OFFLOAD_CHARS", "FeedPlacement", "default_workers"]

#: Characters of an open value from which its chunks are fed on a worker thread.
OFFLOAD_CHARS: Final = 16_384
#: CPU seconds of one feed past which all of a stream's chunks are fed on a worker.
COSTLY_STEP_S: Final = 0.005

#: Events that close a value (and ran its checks).
_CLOSING: Final = (SlotComplete, SlotFailed, SlotRejected)

#: Threads of the pool that async streams share when none is given.
_DEFAULT_THREADS: Final = 4
#: Feeds that may wait for one of them; a feed refused is run on the event loop.
_DEFAULT_QUEUED: Final = 64

_default: Workers | None = None


def default_workers() -> Workers:
    """The pool the async streams of this process share (made when first needed; its
    threads are daemons, started when first used)."""
    global _default
    if _default is None:
        _default = Workers(
            threads=_DEFAULT_THREADS, queued=_DEFAULT_QUEUED, timeout_s=None, name="feed"
        )
    return _default


class FeedPlacement:
    """One stream's feeds, each on the event loop or on ``workers`` (see the module
    docs). Not shared between streams."""

    __slots__ = ("_costly", "_open_chars", "_workers", "lock")

    def __init__(self, workers: Workers) -> None:
        self._workers = workers
        self._open_chars = 0  # characters fed since a value last closed
        self._costly = False  # a feed used more than COSTLY_STEP_S of CPU
        #: Held by a feed on a worker: what reads the stream's state from another
        #: thread (the event loop's) takes it, and so sees the state before or after
        #: that feed, never during it.
        self.lock = threading.Lock()

    async def feed(self, command: Feed) -> list[Event]:
        """The events of ``command``'s chunk, fed where this stream's feeds go now."""
        chars = len(chunk_text(command.chunk))
        self._open_chars += chars
        if self._costly or self._open_chars >= OFFLOAD_CHARS:
            try:
                events, cpu = await self._workers.run(
                    lambda: self._locked(command), finish_when_left=True
                )
            except WorkRefused:  # the pool is full (the chunk was not fed): feed it here
                events, cpu = _timed(command)
        else:
            events, cpu = _timed(command)
        if cpu > COSTLY_STEP_S:
            self._costly = True
        if any(isinstance(event, _CLOSING) for event in events):
            # What follows the close in this chunk may open the next value.
            self._open_chars = chars
        return events

    def _locked(self, command: Feed) -> tuple[list[Event], float]:
        with self.lock:
            return _timed(command)

    def pass_over(self) -> None:
        """The pass ended: the next one starts outside any value."""
        self._open_chars = 0


def _timed(command: Feed) -> tuple[list[Event], float]:
    started = time.thread_time()
    events = command.feed()
    return events, time.thread_time() - started
