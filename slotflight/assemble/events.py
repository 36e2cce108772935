"""Events: small immutable records of what happened to the output object.

Every event that changes the state carries the RFC 6902 operations that turn the
previous state into the new one (:attr:`Event.patch`), except :class:`SlotDelta`,
whose change is its ``delta`` appended to the string at its ``path``.

Sizes are O(delta): a ``slot-delta``'s :meth:`~Event.to_json` holds the appended text
only, never the value so far, so producing and serialising every event of a value of n
characters costs O(n) in all. The value so far stays available in Python
(:attr:`SlotDelta.value`, and the RFC 6902 form :attr:`SlotDelta.patch`): both refer to
a shared growing text buffer and are joined only when read, at O(value so far) per read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from .._errors import ErrorDetail
from .._jsonable import to_jsonable

__all__ = [
    "Diagnostic",
    "Done",
    "ErrorEvent",
    "Event",
    "PassFailed",
    "PatchOp",
    "Retry",
    "SlotComplete",
    "SlotDelta",
    "SlotFailed",
    "SlotRejected",
    "SlotStart",
    "TextBuffer",
]


class TextBuffer:
    """A growing string kept as parts; prefixes are joined only when asked for.

    Appending is O(len(part)). ``prefix(n)`` joins the parts once and keeps the
    result, so reading the latest prefix after every append costs O(n) per read: the
    reader pays for what it reads, the writer never does.
    """

    __slots__ = ("_joined", "_length", "_parts")

    def __init__(self) -> None:
        self._parts: list[str] = []
        self._joined = ""
        self._length = 0

    def append(self, text: str) -> int:
        self._parts.append(text)
        self._length += len(text)
        return self._length

    def __len__(self) -> int:
        return self._length

    def prefix(self, end: int) -> str:
        if len(self._joined) < end:
            self._joined = self._joined + "".join(self._parts)
            self._parts = []
        return self._joined if end == len(self._joined) else self._joined[:end]

    def text(self) -> str:
        return self.prefix(self._length)


class TextRef:
    """The first ``end`` characters of a :class:`TextBuffer` (a lazily joined value)."""

    __slots__ = ("buffer", "end")

    def __init__(self, buffer: TextBuffer, end: int) -> None:
        self.buffer = buffer
        self.end = end

    def resolve(self) -> str:
        return self.buffer.prefix(self.end)


def _resolve(value: Any) -> Any:
    return value.resolve() if isinstance(value, TextRef) else value


@dataclass(frozen=True, slots=True)
class PatchOp:
    """One RFC 6902 operation (``add``, ``replace`` or ``remove``)."""

    op: Literal["add", "replace", "remove"]
    path: str
    value: Any = None

    def to_json(self) -> dict[str, Any]:
        if self.op == "remove":
            return {"op": "remove", "path": self.path}
        return {"op": self.op, "path": self.path, "value": to_jsonable(_resolve(self.value))}


@dataclass(frozen=True, slots=True)
class Event:
    """Base of all events. ``type`` is the wire name (``slot-delta`` …)."""

    type: ClassVar[str] = "event"

    @property
    def patch(self) -> list[dict[str, Any]]:
        """RFC 6902 operations turning the previous state into this event's state."""
        return [op.to_json() for op in self._patch_ops()]

    def _patch_ops(self) -> Sequence[PatchOp]:
        return ()

    def _fields(self) -> dict[str, Any]:
        return {}

    def to_json(self, *, patch: bool = True, state: Any = None) -> dict[str, Any]:
        """The event as a JSON-compatible dict; ``state`` is added when given."""
        data: dict[str, Any] = {"type": self.type}
        data.update(self._fields())
        if patch:
            ops = self._patch_ops()
            if ops:
                data["patch"] = [op.to_json() for op in ops]
        if state is not None:
            data["state"] = to_jsonable(state)
        return data


@dataclass(frozen=True, slots=True)
class _SlotEvent(Event):
    slot_id: int
    slot: str
    path: str
    index: int | None
    attempt: int
    ops: tuple[PatchOp, ...] = ()

    def _patch_ops(self) -> Sequence[PatchOp]:
        return self.ops

    def _fields(self) -> dict[str, Any]:
        return {
            "slot": self.slot,
            "path": self.path,
            "slot_id": self.slot_id,
            "index": self.index,
            "attempt": self.attempt,
        }


@dataclass(frozen=True, slots=True)
class SlotStart(_SlotEvent):
    """A frame for a slot opened."""

    type: ClassVar[str] = "slot-start"


@dataclass(frozen=True, slots=True)
class SlotDelta(_SlotEvent):
    """More text arrived for a string slot: ``delta`` is appended to the string at
    ``path``.

    :meth:`to_json` carries ``delta`` and no ``value`` or ``patch`` (O(delta)). Reading
    :attr:`value` (the whole value so far) or :attr:`patch` (the RFC 6902 ``replace``
    that sets it) costs O(value so far) per read; they are for callers that want the
    value as it grows, not for serialising every event.
    """

    type: ClassVar[str] = "slot-delta"
    delta: str = ""
    text: TextRef | None = None

    @property
    def value(self) -> str:
        """The slot's whole text so far (joined when read)."""
        return self.text.resolve() if self.text is not None else self.delta

    def _patch_ops(self) -> Sequence[PatchOp]:
        if self.ops or self.text is None:
            return self.ops
        return (PatchOp("replace", self.path, self.text),)

    def to_json(self, *, patch: bool = True, state: Any = None) -> dict[str, Any]:
        """``type``, the slot fields and ``delta``; ``state`` when given. ``patch`` is
        ignored: a delta's change is ``delta`` appended at ``path``."""
        data: dict[str, Any] = {
            "type": "slot-delta",
            "slot": self.slot,
            "path": self.path,
            "slot_id": self.slot_id,
            "index": self.index,
            "attempt": self.attempt,
            "delta": self.delta,
        }
        if state is not None:
            data["state"] = to_jsonable(state)
        return data


@dataclass(frozen=True, slots=True)
class SlotComplete(_SlotEvent):
    """A slot's frame closed and its value validated; ``value`` never changes again.

    ``flag``: set when the run accepts values that fail their checks
    (``on_check_failure="accept"``) and a slot check failed again on the value's retry
    (the second attempt, or the last if earlier; an item of a list repeating another
    field: on any attempt, since an item is not asked for again on its own); the
    message then carries ``status: "flagged"`` with the check's ``code`` and
    ``reason``.

    ``confidence``: in ``[0, 1]``, the probability the model gave the tokens that
    wrote the value (their product), when the run asked the server for token logprobs and got them
    (:mod:`.confidence`); ``None`` otherwise, and then absent from the message.
    """

    type: ClassVar[str] = "slot-complete"
    value: Any = None
    flag: ErrorDetail | None = None
    confidence: float | None = None

    @property
    def flagged(self) -> bool:
        return self.flag is not None

    def _fields(self) -> dict[str, Any]:
        data = _SlotEvent._fields(self)
        data["value"] = to_jsonable(self.value)
        if self.flag is not None:
            data["status"] = "flagged"
            data["code"] = self.flag.code
            data["reason"] = self.flag.message
        if self.confidence is not None:
            data["confidence"] = self.confidence
        return data


@dataclass(frozen=True, slots=True)
class SlotFailed(_SlotEvent):
    """A slot failed (validation, truncation, missing); its value left the state."""

    type: ClassVar[str] = "slot-failed"
    error: ErrorDetail = field(default_factory=lambda: ErrorDetail("failed", "slot failed"))

    def _fields(self) -> dict[str, Any]:
        data = _SlotEvent._fields(self)
        data["error"] = self.error.to_json()
        return data


@dataclass(frozen=True, slots=True)
class SlotRejected(_SlotEvent):
    """A slot check rejected a value that validated; the value left the state.

    ``code`` and ``reason`` say why (``repeat``, ``repeats the value of title``);
    ``value`` is what was written. ``action`` says what follows: ``retry`` (asked for
    again), ``drop`` (a list item left out, the list goes on), ``stop`` (a list item
    left out and the rest of the list ignored in this pass), ``leave_out`` (an
    optional field left out on the last attempt) or ``fail`` (a required field that
    still fails on the last attempt: the run ends with an error).
    """

    type: ClassVar[str] = "slot-rejected"
    code: str = ""
    reason: str = ""
    value: Any = None
    action: str = "retry"
    error: ErrorDetail = field(default_factory=lambda: ErrorDetail("rejected", "slot rejected"))

    def _fields(self) -> dict[str, Any]:
        data = _SlotEvent._fields(self)
        data["code"] = self.code
        data["reason"] = self.reason
        data["value"] = to_jsonable(self.value)
        data["action"] = self.action
        data["error"] = self.error.to_json()
        return data


@dataclass(frozen=True, slots=True)
class Diagnostic(Event):
    """Something in the stream was tolerated (noise, unknown id, duplicate frame …).

    ``offset`` is the character offset in the decoded stream where it was noticed.
    """

    type: ClassVar[str] = "diagnostic"
    code: str
    message: str
    offset: int = 0
    attempt: int = 1
    slot: str = ""

    def _fields(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "code": self.code,
            "message": self.message,
            "offset": self.offset,
            "attempt": self.attempt,
        }
        if self.slot:
            data["slot"] = self.slot
        return data


@dataclass(frozen=True, slots=True)
class Retry(Event):
    """A follow-up attempt starts, asking again only for ``slots``."""

    type: ClassVar[str] = "retry"
    attempt: int
    slots: tuple[str, ...]
    reasons: tuple[ErrorDetail, ...] = ()
    ops: tuple[PatchOp, ...] = ()

    def _patch_ops(self) -> Sequence[PatchOp]:
        return self.ops

    def _fields(self) -> dict[str, Any]:
        return {
            "attempt": self.attempt,
            "slots": list(self.slots),
            "reasons": [r.to_json() for r in self.reasons],
        }


@dataclass(frozen=True, slots=True)
class Done(Event):
    """The object is complete and valid. ``value`` is its JSON form."""

    type: ClassVar[str] = "done"
    attempt: int
    value: Any
    ops: tuple[PatchOp, ...] = ()

    def _patch_ops(self) -> Sequence[PatchOp]:
        return self.ops

    def _fields(self) -> dict[str, Any]:
        return {"attempt": self.attempt, "value": to_jsonable(self.value)}


@dataclass(frozen=True, slots=True)
class PassFailed(Event):
    """One pass (one request) was stopped: a bound was crossed, or the model stopped
    writing frames. Not the end of the stream: its accepted slots stay, and the client
    may still regenerate the rest and reach ``done``. Later input of the pass is ignored.
    """

    type: ClassVar[str] = "pass-failed"
    error: ErrorDetail
    attempt: int = 1

    def _fields(self) -> dict[str, Any]:
        return {"attempt": self.attempt, "error": self.error.to_json()}


@dataclass(frozen=True, slots=True)
class ErrorEvent(Event):
    """The stream failed: its last event. ``errors`` says why (one per failing slot, or
    one). A pass that failed but may be regenerated is :class:`PassFailed` instead."""

    type: ClassVar[str] = "error"
    error: ErrorDetail
    attempt: int = 1
    errors: tuple[ErrorDetail, ...] = ()

    def _fields(self) -> dict[str, Any]:
        data: dict[str, Any] = {"attempt": self.attempt, "error": self.error.to_json()}
        if self.errors:
            data["errors"] = [e.to_json() for e in self.errors]
        return data
