"""CPU-heavy work off the event loop: a bounded pool of worker threads.

Some work an async program hands to slotflight costs what its input chooses: closing a
large value runs its validation and slot checks (the async stream feeds such chunks
here: see :mod:`.feed_placement`), and the gateway compiles a client's schema and builds
its prompt and grammar. Run on the event loop, one such step stalls everything else the
loop serves. :class:`Workers` runs it on at most ``threads`` daemon threads (created
when first needed), lets at most ``queued`` more jobs wait, and gives each job
``timeout_s`` seconds from its submission:

- a job that finds ``threads + queued`` jobs in the pool is refused at once
  (:class:`WorkRefused`, ``busy``);
- a job still waiting when its time is up is dropped unrun (``busy``);
- a job still running when its time is up is abandoned (``timeout``): Python cannot
  stop a thread, so it runs on to its end and keeps its thread until then, and the
  pool's bounds count it meanwhile.

With ``timeout_s=None`` jobs have no deadline (the stream steps); a caller that leaves
drops a job still waiting, as always. A job runs in a copy of the caller's context
(:mod:`contextvars`), as ``asyncio.to_thread`` runs one.

The threads are daemons: a process that stops does not wait for an abandoned job. A
child process forked from one whose pool had started threads starts its own (a fork
copies none of them: without this, its first job waited forever).
Threads share the interpreter lock, so the pool bounds how much work runs at once; it
does not make that work faster. What it buys is that the event loop keeps its turn.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import functools
import os
import queue
import threading
from collections.abc import Callable
from typing import Any, Literal, TypeVar

__all__ = ["WorkRefused", "Workers"]

T = TypeVar("T")

_Job = tuple["concurrent.futures.Future[Any]", Callable[[], Any]]


class WorkRefused(Exception):
    """The pool did not finish a job: ``reason`` is ``busy`` (full, or the job waited
    past its deadline) or ``timeout`` (it ran past its deadline and was abandoned)."""

    def __init__(self, reason: Literal["busy", "timeout"], message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


class Workers:
    """At most ``threads`` jobs running and ``queued`` waiting; ``timeout_s`` each
    (``None``: no deadline)."""

    def __init__(self, *, threads: int, queued: int, timeout_s: float | None, name: str) -> None:
        if threads < 1 or queued < 0 or (timeout_s is not None and timeout_s <= 0):
            raise ValueError("threads must be >= 1, queued >= 0 and timeout_s > 0 or None")
        self.threads = threads
        self.queued = queued
        self.timeout_s = timeout_s
        self._name = name
        self._closed = False
        self._start_afresh()

    def _start_afresh(self) -> None:
        """No threads, no jobs: at creation, and in a child process forked from this
        one (its threads, and whatever held the lock, did not come along)."""
        self._pid = os.getpid()
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._in_pool = 0  # jobs submitted and not yet finished or dropped
        self._started: list[threading.Thread] = []

    @property
    def in_pool(self) -> int:
        """Jobs running or waiting now (abandoned ones included until they end)."""
        with self._lock:
            return self._in_pool

    async def run(self, function: Callable[[], T], *, finish_when_left: bool = False) -> T:
        """``function()`` on a worker thread; its result or exception.

        A caller cancelled while its job waits drops the job. With ``finish_when_left``,
        a caller cancelled while its job runs waits for it to end before the
        cancellation goes on (the job touches what the caller may read next: a stream's
        state); without, it leaves at once.

        Raises :class:`WorkRefused` when the pool is full or the deadline passes (the
        pool being full is raised before the job is queued: it has not run).
        """
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        if self._pid != os.getpid():  # a forked child: the parent's threads are not here
            self._start_afresh()
        with self._lock:
            if self._closed:
                raise RuntimeError("the worker pool is closed")
            if self._in_pool >= self.threads + self.queued:
                raise WorkRefused("busy", f"{self._in_pool} jobs are waiting; try again later")
            self._in_pool += 1
            if len(self._started) < min(self._in_pool, self.threads):
                self._start_thread()
        future.add_done_callback(self._finished)
        self._jobs.put((future, functools.partial(contextvars.copy_context().run, function)))
        waiting = asyncio.wrap_future(future)
        if self.timeout_s is None:  # no deadline, so no timer per job
            try:
                return await waiting
            except asyncio.CancelledError:
                await _left(future, finish_when_left)
                raise
        try:
            async with asyncio.timeout(self.timeout_s):
                return await asyncio.shield(waiting)
        except TimeoutError:
            if future.cancel():  # still waiting: it will not run
                raise WorkRefused(
                    "busy", f"no worker was free within {self.timeout_s:g} s; try again later"
                ) from None
            raise WorkRefused(
                "timeout", f"the work took longer than {self.timeout_s:g} s"
            ) from None
        except asyncio.CancelledError:
            await _left(future, finish_when_left)
            raise
        finally:
            # An abandoned job's result is not wanted: read it so it is not logged.
            waiting.add_done_callback(_discard)

    def _finished(self, future: concurrent.futures.Future[Any]) -> None:
        with self._lock:
            self._in_pool -= 1

    def _start_thread(self) -> None:
        thread = threading.Thread(
            target=self._work,
            name=f"slotflight-{self._name}-{len(self._started)}",
            daemon=True,
        )
        self._started.append(thread)
        thread.start()

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            future, function = job
            if not future.set_running_or_notify_cancel():
                continue  # dropped while it waited
            try:
                result = function()
            except BaseException as exc:
                future.set_exception(exc)
            else:
                future.set_result(result)

    def close(self) -> None:
        """Refuse new jobs; the threads end once the jobs before them are done."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            threads = len(self._started)
        for _ in range(threads):
            self._jobs.put(None)


async def _left(future: concurrent.futures.Future[Any], finish: bool) -> None:
    """The caller was cancelled: a job still waiting is dropped; a running one, with
    ``finish``, is waited for to its end, whatever cancels the wait meanwhile (the
    caller raises its cancellation afterwards). Its outcome is not wanted."""
    if future.cancel() or not finish:
        return
    done = asyncio.wrap_future(future)
    done.add_done_callback(_discard)
    while not done.done():
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.shield(done)


def _discard(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()
