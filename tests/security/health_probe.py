"""Asserting that a server keeps answering while it is under attack."""

from __future__ import annotations

import threading
import time
from types import TracebackType
from typing import Self

import httpx

#: How long one health check may take on a busy two-core machine; a liveness bound,
#: not a performance figure (the benchmarks measure those).
HEALTH_BOUND_S = 2.0


class HealthProbe:
    """Polls ``url`` every ``interval`` seconds on a thread while the ``with`` block runs.

    On exit it asserts that every poll answered within :data:`HEALTH_BOUND_S` with a
    status in ``statuses`` (200; a server that reports a failed dependency may answer
    503 and still be alive) and that at least one poll ran.
    """

    def __init__(self, url: str, interval: float = 0.2, statuses: tuple[int, ...] = (200,)) -> None:
        self.url = url
        self.interval = interval
        self.statuses = statuses
        self.latencies: list[float] = []
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        with httpx.Client(timeout=HEALTH_BOUND_S) as client:
            while True:
                started = time.monotonic()
                try:
                    status = client.get(self.url).status_code
                    if status not in self.statuses:
                        self.failures.append(f"status {status}")
                except httpx.HTTPError as exc:
                    self.failures.append(f"{type(exc).__name__}: {exc}")
                self.latencies.append(time.monotonic() - started)
                if self._stop.wait(self.interval):
                    return

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join()
        if exc_type is None:
            assert not self.failures, f"/health failed during the attack: {self.failures}"
            assert self.latencies, "/health was never polled"
            slowest = max(self.latencies)
            assert slowest < HEALTH_BOUND_S, f"/health took {slowest:.2f}s"
