"""The queue of scripted replies, consumed one per chat-completion request."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from typing import Any

from ._reply import Reply

__all__ = ["NoReply", "Script"]


class NoReply(Exception):
    """No scripted reply can answer a request; the message says why."""


class Script:
    """Thread-safe queue of :class:`Reply`.

    A request takes the first reply, in queue order, whose ``match`` accepts its body;
    a reply without ``match`` accepts every request. Replies that do not match stay
    queued for later requests.
    """

    def __init__(self, replies: Iterable[Reply | str] = ()) -> None:
        self._lock = threading.Lock()
        self._replies: list[Reply] = []
        self._taken = 0
        self.add(replies)

    def add(self, replies: Iterable[Reply | str]) -> None:
        items = [Reply(reply) if isinstance(reply, str) else reply for reply in replies]
        for item in items:
            if not isinstance(item, Reply):
                raise TypeError(f"a script holds Reply objects or strings, got {item!r}")
        with self._lock:
            self._replies.extend(items)

    @property
    def remaining(self) -> int:
        with self._lock:
            return len(self._replies)

    def pending(self) -> list[Reply]:
        with self._lock:
            return list(self._replies)

    def take(self, body: Mapping[str, Any], request_label: str) -> Reply:
        """Remove and return the reply for this request, or raise :class:`NoReply`."""
        with self._lock:
            for position, reply in enumerate(self._replies):
                if reply.match is not None:
                    try:
                        accepted = bool(reply.match(body))
                    except Exception as exc:
                        raise NoReply(
                            f"the match of the reply at queue position {position} raised "
                            f"{type(exc).__name__}: {exc} on {request_label}"
                        ) from exc
                    if not accepted:
                        continue
                del self._replies[position]
                self._taken += 1
                return reply
            if not self._replies:
                raise NoReply(
                    f"no scripted reply left for {request_label}: "
                    f"{self._taken} replies were consumed and the script is empty; "
                    "add a Reply for this request"
                )
            raise NoReply(
                f"no scripted reply matches {request_label}: "
                f"{len(self._replies)} replies are queued and none of their match accepts it"
            )
