"""A deadline for blocking reads, kept by one thread per stream.

The sync stream bounds each wait for a chunk with the HTTP read timeout, but that timer
restarts with every byte: a server that sends only SSE comment lines (keep-alives)
never lets it fire, while the ``openai`` client reads past them without returning. A
:class:`Watchdog` holds the deadline of the wait in progress; when it passes, the
watchdog's thread calls ``on_expire`` (which closes the response, so that the blocked
read returns) and the wait counts as timed out. Arming a wait only moves the deadline
(a lock and a notify): the thread is started once, at the first bounded wait.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable

__all__ = ["Watchdog"]


class Watchdog:
    """``arm(seconds)`` before a blocking wait, ``disarm()`` after it; :attr:`expired`
    tells whether the deadline passed (until :meth:`reset`). ``close()`` ends the thread."""

    def __init__(self, on_expire: Callable[[], None]) -> None:
        self._on_expire = on_expire
        self._lock = threading.Condition()
        self._deadline: float | None = None
        self._thread: threading.Thread | None = None
        self._closed = False
        self.expired = False

    def arm(self, seconds: float) -> None:
        with self._lock:
            self._deadline = time.monotonic() + seconds
            if self._thread is None and not self._closed:
                self._thread = threading.Thread(
                    target=self._watch, name="slotflight-read-deadline", daemon=True
                )
                self._thread.start()
            self._lock.notify()

    def disarm(self) -> None:
        with self._lock:
            self._deadline = None

    def reset(self) -> None:
        """A new response: the last one's expiry no longer counts."""
        with self._lock:
            self._deadline = None
            self.expired = False

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._deadline = None
            self._lock.notify()

    def _watch(self) -> None:
        while True:
            with self._lock:
                while not self._closed:
                    deadline = self._deadline
                    if deadline is None:
                        self._lock.wait()
                        continue
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self._lock.wait(left)
                if self._closed:
                    return
                self._deadline = None
                self.expired = True
            with contextlib.suppress(Exception):  # a response that already failed
                self._on_expire()
