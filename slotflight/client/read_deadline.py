"""``asyncio.timeout`` for the many short waits of one task, with one timer for many.

A stream waits for each chunk under the idle timeout. ``asyncio.timeout`` arms and
cancels an event-loop timer per wait, which costs more CPU than reading the chunk.
:class:`ReadDeadline` keeps one timer per stream: each wait only moves the deadline,
and when the timer fires before the deadline it re-arms itself at the deadline. When
the deadline has passed during a wait, the waiting task is cancelled and the wait
raises :class:`TimeoutError`, as under ``asyncio.timeout`` (whose cancellation
bookkeeping it follows, so an outer cancellation is never taken for a timeout).
"""

from __future__ import annotations

import asyncio
from types import TracebackType

__all__ = ["ReadDeadline"]


class ReadDeadline:
    """Reusable: ``with deadline.within(seconds): await ...`` once per wait, one wait
    at a time, always from the same event loop (``None``: no limit)."""

    __slots__ = ("_cancelling", "_deadline", "_expired", "_handle", "_loop", "_task", "_when")

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._handle: asyncio.TimerHandle | None = None
        self._when = 0.0  # loop time the timer is armed for
        self._deadline: float | None = None  # of the wait in progress
        self._task: asyncio.Task[object] | None = None
        self._cancelling = 0
        self._expired = False

    def within(self, seconds: float | None) -> ReadDeadline:
        """Bound the next wait (the ``with`` block) to ``seconds`` from now."""
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        self._deadline = None if seconds is None else loop.time() + seconds
        return self

    def expired(self) -> bool:
        """Whether the last wait ran out of time."""
        return self._expired

    def __enter__(self) -> ReadDeadline:
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("ReadDeadline must be used inside a task")
        self._task = task
        self._cancelling = task.cancelling()
        self._expired = False
        deadline = self._deadline
        if deadline is not None and (self._handle is None or self._when > deadline):
            if self._handle is not None:
                self._handle.cancel()
            self._arm(deadline)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        task, self._task = self._task, None
        self._deadline = None
        if (
            self._expired
            and task is not None
            and exc_type is asyncio.CancelledError
            and task.uncancel() <= self._cancelling
        ):
            raise TimeoutError from exc

    def close(self) -> None:
        """Cancel the timer (the stream is over)."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _arm(self, when: float) -> None:
        assert self._loop is not None
        self._when = when
        self._handle = self._loop.call_at(when, self._fire)

    def _fire(self) -> None:
        self._handle = None
        deadline, task = self._deadline, self._task
        if deadline is None or task is None or self._expired:
            return  # no wait in progress: the next one arms the timer again
        if deadline > self._when:
            self._arm(deadline)  # waits since the timer was armed moved the deadline
            return
        self._expired = True
        task.cancel()
