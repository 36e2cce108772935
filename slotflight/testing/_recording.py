"""What the server received and what it did with it, shared safely between threads.

The server thread writes; test threads read consistent snapshots and wait on a condition
variable for the recording to reach a state (a disconnect seen, a stream finished).
Snapshots are independent of the recording: headers are a read-only mapping and every
snapshot carries its own copy of the parsed body, made outside the lock.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
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

    ``headers`` is read-only; ``body`` is this snapshot's own copy of the parsed JSON, so
    changing it changes neither the recording nor any other snapshot.
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
        self._version = 0  # bumped on every change, so that waiters miss none

    def open(
        self, *, method: str, path: str, headers: Mapping[str, str], raw_body: bytes, body: Any
    ) -> int:
        """Record a new request and return its index.

        The recording keeps its own copy of ``body``: what the caller does with its
        object later (a reply's ``match`` may change it) does not reach the recording.
        """
        kept_headers = MappingProxyType(dict(headers))
        kept_body = _copy_json(body)
        with self._condition:
            index = self._next_index
            self._next_index += 1
            self._version += 1
            self._items.append(
                RecordedRequest(
                    index=index,
                    method=method,
                    path=path,
                    headers=kept_headers,
                    raw_body=raw_body,
                    body=kept_body,
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
            self._version += 1
            self._condition.notify_all()

    def get(self, index: int) -> RecordedRequest | None:
        """Request ``index``; ``None`` when not received yet or no longer kept."""
        with self._condition:
            position = index - (self._next_index - len(self._items))
            item = self._items[position] if 0 <= position < len(self._items) else None
        return None if item is None else _handed_out(item, None)

    def snapshot(self) -> list[RecordedRequest]:
        with self._condition:
            items = list(self._items)
        return [_handed_out(item, None) for item in items]

    def wait_for(
        self, predicate: Callable[[list[RecordedRequest]], bool], timeout: float
    ) -> list[RecordedRequest]:
        """Block until ``predicate(snapshot)`` is true and return that snapshot.

        The predicate runs outside the lock, so the server thread is never held up by it
        or by copying bodies; a body is copied once per call, not once per change.
        Raises :class:`TimeoutError` (showing the last snapshot) after ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        copies: dict[int, tuple[RecordedRequest, RecordedRequest]] = {}
        while True:
            with self._condition:
                stored = list(self._items)
                version = self._version
            handed: dict[int, tuple[RecordedRequest, RecordedRequest]] = {}
            for item in stored:
                handed[item.index] = (item, _handed_out(item, copies.get(item.index)))
            copies = handed
            items = [copy for _, copy in handed.values()]
            if predicate(items):
                return items
            with self._condition:
                while True:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        summary = "; ".join(_describe(item) for item in stored) or "no requests"
                        raise TimeoutError(
                            f"the recording did not satisfy the condition within {timeout:g}s "
                            f"({summary})"
                        )
                    if self._version != version:
                        break
                    self._condition.wait(remaining)


def _handed_out(
    item: RecordedRequest, previous: tuple[RecordedRequest, RecordedRequest] | None
) -> RecordedRequest:
    """``item`` with its own copy of the body; ``previous`` (the stored item and the copy
    handed out for it last time) lets an unchanged body's copy be used again."""
    if previous is not None:
        stored, handed = previous
        if stored is item:
            return handed
        if stored.body is item.body:
            return dataclasses.replace(item, body=handed.body)
    if not isinstance(item.body, (dict, list)):
        return item
    return dataclasses.replace(item, body=_copy_json(item.body))


def _copy_json(value: Any) -> Any:
    """A copy of parsed JSON: new dicts and lists, the (immutable) scalars shared.

    Iterative, so a body nested as deeply as the parser accepted is copied without
    recursion; work is proportional to the number of values.
    """
    if not isinstance(value, (dict, list)):
        return value
    root: Any = {} if isinstance(value, dict) else []
    pending: list[tuple[Any, Any]] = [(value, root)]
    while pending:
        source, target = pending.pop()
        if isinstance(source, dict):
            for key, member in source.items():
                target[key] = _child(member, pending)
        else:
            for member in source:
                target.append(_child(member, pending))
    return root


def _child(member: Any, pending: list[tuple[Any, Any]]) -> Any:
    if isinstance(member, dict):
        copied: Any = {}
    elif isinstance(member, list):
        copied = []
    else:
        return member
    pending.append((member, copied))
    return copied


def _describe(item: RecordedRequest) -> str:
    flags = [
        name
        for name in ("completed", "dropped", "stalled", "disconnected", "finished")
        if getattr(item, name)
    ]
    return f"#{item.index} {item.method} {item.path} status={item.status} {','.join(flags) or '-'}"
