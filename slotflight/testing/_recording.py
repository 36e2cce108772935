"""What the server received and what it did with it, shared safely between threads.

The server thread writes; test threads read consistent snapshots and wait on a condition
variable for the recording to reach a state (a disconnect seen, a stream finished).
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ._reply import Reply

__all__ = ["RecordedRequest", "Recorder"]


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the server saw and answered it, frozen at the time it was read.

    Times are ``time.monotonic()`` values. ``status`` is ``None`` until the response
    starts. For streaming responses ``bytes_sent`` counts response body bytes written
    (the SSE text), ``content_sent`` the assistant content delivered so far.

    ``completed``: the response ended normally (for a stream, after ``data: [DONE]``).
    ``dropped``: the server cut the connection on purpose (``drop_after_bytes``).
    ``stalled``: the server stopped sending on purpose (``stall_after_bytes``).
    ``disconnected``: the client went away before the response was complete.
    ``finished``: the server is done with the request, whatever the outcome.
    """

    index: int
    method: str
    path: str
    headers: Mapping[str, str]
    raw_body: bytes
    body: Any
    received_at: float
    stream: bool = False
    reply: Reply | None = None
    status: int | None = None
    bytes_sent: int = 0
    content_sent: str = ""
    completed: bool = False
    dropped: bool = False
    stalled: bool = False
    disconnected: bool = False
    disconnected_at: float | None = None
    finished: bool = False
    finished_at: float | None = None
    error: str | None = None


class Recorder:
    """Thread-safe, bounded list of :class:`RecordedRequest`, oldest dropped first."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"the recording limit must be >= 1, got {limit}")
        self._condition = threading.Condition()
        self._items: deque[RecordedRequest] = deque(maxlen=limit)
        self._next_index = 0

    def open(
        self, *, method: str, path: str, headers: Mapping[str, str], raw_body: bytes, body: Any
    ) -> int:
        """Record a new request and return its index."""
        with self._condition:
            index = self._next_index
            self._next_index += 1
            self._items.append(
                RecordedRequest(
                    index=index,
                    method=method,
                    path=path,
                    headers=dict(headers),
                    raw_body=raw_body,
                    body=body,
                    received_at=time.monotonic(),
                )
            )
            self._condition.notify_all()
            return index

    def update(self, index: int, **changes: Any) -> None:
        """Replace fields of request ``index`` (ignored once it fell out of the bound)."""
        with self._condition:
            position = index - (self._next_index - len(self._items))
            if position < 0:
                return
            item = self._items[position]
            if changes.get("disconnected") and not item.disconnected:
                changes.setdefault("disconnected_at", time.monotonic())
            if changes.get("finished") and not item.finished:
                changes.setdefault("finished_at", time.monotonic())
            self._items[position] = dataclasses.replace(item, **changes)
            self._condition.notify_all()

    def get(self, index: int) -> RecordedRequest | None:
        """Request ``index``; ``None`` when not received yet or no longer kept."""
        with self._condition:
            position = index - (self._next_index - len(self._items))
            return self._items[position] if 0 <= position < len(self._items) else None

    def snapshot(self) -> list[RecordedRequest]:
        with self._condition:
            return list(self._items)

    def wait_for(
        self, predicate: Callable[[list[RecordedRequest]], bool], timeout: float
    ) -> list[RecordedRequest]:
        """Block until ``predicate(snapshot)`` is true and return that snapshot.

        Raises :class:`TimeoutError` (showing the last snapshot) after ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        with self._condition:
            while True:
                items = list(self._items)
                if predicate(items):
                    return items
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    summary = "; ".join(_describe(item) for item in items) or "no requests"
                    raise TimeoutError(
                        f"the recording did not satisfy the condition within {timeout:g}s "
                        f"({summary})"
                    )
                self._condition.wait(remaining)


def _describe(item: RecordedRequest) -> str:
    flags = [
        name
        for name in ("completed", "dropped", "stalled", "disconnected", "finished")
        if getattr(item, name)
    ]
    return f"#{item.index} {item.method} {item.path} status={item.status} {','.join(flags) or '-'}"
