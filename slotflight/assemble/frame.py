"""The open frame: an admitted frame's body read into the state, one frame at a time.

Rules:

- Opening a frame places its value in the state (creating missing parent objects and
  arrays, recorded as patch operations) and emits ``slot-start``. A scalar-array item
  of a kind other than string takes its place only once it validated, so a failed item
  leaves no hole.
- String values stream. The value is the trimmed body: leading white space is dropped,
  trailing white space is held back until more text follows it, and every piece that
  extends the value is one ``slot-delta`` carrying only the new text. The string in
  the state grows as prefixes of the final value.
- Other kinds collect their body and appear in the state only once the frame closed
  and the body validated (:mod:`.validation`).
- Closing validates the body. A valid value is put in the state (``slot-complete``)
  and accepted; an invalid one fails the slot (``slot-failed``): its value, and any
  container its opening added that is still empty, leave the state.
- A valid value then passes the run's slot checks (:mod:`.checks`), when it has any. A
  value a check rejects leaves the state as a failed one does, with a
  ``slot-rejected`` event saying what follows (asked again, a list item dropped, left
  out, failed); a value kept anyway is accepted, flagged or with a diagnostic.
- A body longer than ``max_frame_chars`` fails the slot (``frame_too_large``) once its
  first ``max_frame_chars`` characters are read (the error quotes their start, however
  the body was split); the rest of the body is skipped until the frame closes. A frame
  the stream or a stopped pass left open fails ``truncated``.
- A frame that was not admitted is skipped: its body is dropped.
- An object-array item that a failed frame leaves empty leaves the state, and the next
  item takes its position; the item's failures, and the values the checks tried and
  held for it, move past the list's end (:class:`~.results.DroppedItems`), so a
  follow-up asks for it as a new item, not for the item now at its old position. A
  later field of the dropped item brings them back to where that field places it.

Complexity: O(len(text)) per piece of body text: a streamed piece is appended to a
shared :class:`~.events.TextBuffer` and never re-joined; a collected body is joined
once, when the frame closes. No state copy per event.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import jsonpointer

from .._errors import ErrorDetail
from .._jsonable import dumps
from ..plan.model import Slot, SlotPlan
from .checks import Held, Judgement, SlotChecker
from .confidence import TokenLedger, confidence
from .diagnostics import DiagnosticLog
from .events import (
    Event,
    PatchOp,
    SlotComplete,
    SlotDelta,
    SlotFailed,
    SlotRejected,
    SlotStart,
    TextBuffer,
    TextRef,
)
from .results import DroppedItems, Key, SlotResults, move_item_records
from .state import ObjectState, Place
from .validation import validator_for

__all__ = ["FrameReader", "OpenFrame"]

#: Characters of a failed frame's body quoted in its error.
_MAX_ECHO = 200


class OpenFrame:
    """An admitted frame being read."""

    __slots__ = (
        "added_containers",
        "body",
        "body_parts",
        "buffer",
        "display",
        "has_text",
        "held_blanks",
        "index",
        "key",
        "offset",
        "place",
        "pointer",
        "size",
        "slot",
        "slot_id",
        "streams",
    )

    def __init__(self, slot: Slot, index: int | None, offset: int = 0, body: int = -1) -> None:
        self.slot = slot
        self.offset = offset  # where the frame opened in the decoded stream
        self.body = body if body >= offset else offset  # where its value starts
        self.slot_id = slot.id
        self.index = index  # the frame index, as admitted
        self.key: Key = (slot.id, None)
        self.pointer = ""
        self.display = ""
        self.place: Place | None = None  # None: a scalar-array item not placed yet
        self.streams = slot.kind == "string"
        self.buffer = TextBuffer()  # the trimmed value so far (strings)
        self.body_parts: list[str] = []  # the body so far (other kinds)
        self.size = 0
        self.has_text = False  # a non-blank character arrived (strings)
        self.held_blanks = ""  # trailing white space not yet part of the value (strings)
        self.added_containers: list[str] = []  # pointers of what opening the frame added

    def raw(self) -> str:
        """The body read so far (strings: trimmed)."""
        return self.buffer.text() if self.streams else "".join(self.body_parts)


class FrameReader:
    """Reads the frames of one pass: at most one is open (:attr:`current`) or skipped."""

    __slots__ = (
        "_attempt",
        "_checker",
        "_diagnostics",
        "_ledger",
        "_max_frame_chars",
        "_max_json_depth",
        "_plan",
        "_results",
        "_state",
        "current",
        "skipping",
    )

    def __init__(
        self,
        plan: SlotPlan,
        state: ObjectState,
        results: SlotResults,
        *,
        attempt: int,
        max_frame_chars: int,
        max_json_depth: int,
        checker: SlotChecker | None = None,
        diagnostics: DiagnosticLog | None = None,
        ledger: TokenLedger | None = None,
    ) -> None:
        self._plan = plan
        self._ledger = ledger
        self._checker = checker
        self._diagnostics = diagnostics
        self._state = state
        self._results = results
        self._attempt = attempt
        self._max_frame_chars = max_frame_chars
        self._max_json_depth = max_json_depth
        #: The frame being read.
        self.current: OpenFrame | None = None
        #: Inside a frame whose body is dropped (not admitted, or over its bound).
        self.skipping = False

    @property
    def inside(self) -> bool:
        return self.current is not None or self.skipping

    def skip(self) -> None:
        """A frame opened that is not read: drop its body until it closes."""
        self.current = None
        self.skipping = True

    def open(
        self, slot: Slot, index: int | None, events: list[Event], offset: int = 0, body: int = -1
    ) -> None:
        """Start reading an admitted frame for ``slot`` at item ``index`` (opened at
        ``offset`` of the decoded stream, its value starting at ``body`` when known)."""
        state = self._state
        frame = OpenFrame(slot, index, offset, body)
        ops: list[PatchOp] = []
        array = slot.array
        if array is not None and not array.items_are_objects and not frame.streams:
            # a scalar item of a kind other than string: appended only once it validated
            position = state.array_length(array.segments)
            frame.pointer = f"{array.pointer}/{position}"
            frame.key = (slot.id, position)
        else:
            place = state.place(slot, index, ops)
            frame.added_containers = [op.path for op in ops if op.op == "add"]
            frame.place = place
            frame.pointer = place.pointer
            frame.key = (slot.id, self._position(slot, index, place))
            if array is not None and index is not None and frame.key[1] is not None:
                item = f"{array.pointer}/{frame.key[1]}"
                if item in frame.added_containers:
                    self._item_placed(array.pointer, index, frame.key[1])
            if frame.streams:
                state.open_text(place, frame.buffer, ops)
        self.current = frame
        self.skipping = False
        frame.display = slot.display(frame.key[1])
        events.append(
            SlotStart(slot.id, frame.display, frame.pointer, index, self._attempt, tuple(ops))
        )

    def _position(self, slot: Slot, index: int | None, place: Place) -> int | None:
        """The value's position in its array (``None`` outside arrays)."""
        array = slot.array
        if array is None:
            return None
        if not array.items_are_objects:
            assert isinstance(place.key, int)
            return place.key
        return self._state.position(array.pointer, index) if index is not None else None

    def _item_placed(self, array_pointer: str, index: int, position: int) -> None:
        """A new list-of-objects item (frame index ``index``) took ``position``: the
        failures of items taken out before it move so that they stay past the list's
        end, or come back to it when it is one of them. O(the list's fields), and only
        once an item of the list was taken out in this pass."""
        dropped = self._results.dropped.get(array_pointer)
        if dropped is None:
            return
        moves = dropped.placed(index, position)
        if not moves:
            return
        fields = self._plan.array_slots(array_pointer)
        move_item_records(
            self._results.failed,
            fields,
            moves,
            lambda detail, slot, new: replace(
                detail, location=slot.concrete_pointer(new), slot=slot.display(new)
            ),
        )
        if self._checker is not None:  # what the checks hold of an item follows it
            self._checker.move_items(fields, moves)

    def text(self, text: str, events: list[Event]) -> None:
        """Body text of the open frame."""
        frame = self.current
        if frame is None:
            return
        frame.size += len(text)
        if frame.size > self._max_frame_chars:
            # the part within the bound is read first, so that what the failure quotes
            # (and what streamed) does not depend on where the pieces of the body ended
            within = len(text) - (frame.size - self._max_frame_chars)
            frame.size -= len(text)
            if within > 0:
                self.text(text[:within], events)
            self.skip()
            message = f"frame body exceeded {self._max_frame_chars} characters"
            self._fail(frame, "frame_too_large", message, events)
            return
        if not frame.streams:
            frame.body_parts.append(text)
            return
        if not frame.has_text:
            text = text.lstrip()
            if not text:
                return
            frame.has_text = True
        body = text.rstrip()
        if not body:
            frame.held_blanks += text
            return
        cut = len(body)
        if frame.held_blanks:
            body = frame.held_blanks + body
        frame.held_blanks = text[cut:] if cut < len(text) else ""
        end = frame.buffer.append(body)
        events.append(
            SlotDelta(
                frame.slot_id,
                frame.display,
                frame.pointer,
                frame.index,
                self._attempt,
                (),
                body,
                TextRef(frame.buffer, end),
            )
        )

    def close(self, events: list[Event], *, quoted: bool = False, end: int = -1) -> None:
        """The open frame ended (at ``end`` of the decoded stream, when known): validate
        its value, then accept or fail it."""
        frame = self.current
        self.skipping = False
        if frame is None:
            return
        self.current = None
        slot = frame.slot
        validate = validator_for(self._plan, slot)
        value, error = validate(
            frame.raw(), frame.key[1], max_depth=self._max_json_depth, quoted=quoted
        )
        if error is not None:
            self._fail(frame, error.code, error.message, events, detail=error)
            return
        judgement = None
        if self._checker is not None:
            judgement = self._checker.judge(slot, frame.key, value, self._attempt)
            if judgement is not None and not judgement.keeps:
                self._reject(frame, value, judgement, events)
                return
        state = self._state
        ops: list[PatchOp] = []
        if frame.place is None:  # a scalar-array item: placed now that it validated
            frame.place = state.place(slot, frame.index, ops)
        if frame.streams:
            state.close_text()
        state.put(frame.place, value, ops)
        self._results.accept(frame.key, frame.pointer, value)
        logprobs = None
        if self._ledger is not None and end >= 0:
            logprobs = self._ledger.logprobs(frame.body, end)
            if logprobs is not None:
                self._results.logprobs[frame.pointer] = logprobs
        flag = None
        if self._checker is not None:
            self._checker.accept(slot, frame.key, value, frame.display)
            if judgement is not None:
                flag = self._kept(frame, value, judgement, events)
        events.append(
            SlotComplete(
                *self._where(frame),
                tuple(ops),
                value,
                flag,
                None if logprobs is None else confidence(logprobs),
            )
        )

    def _check_detail(self, frame: OpenFrame, value: Any, judgement: Judgement) -> ErrorDetail:
        failure = judgement.failure
        written = value if isinstance(value, str) else dumps(value)
        # a sentence the follow-up quotes as the problem: "The value repeats …."
        return ErrorDetail(
            failure.code,
            f"The value {judgement.message or failure.reason}.",
            location=frame.pointer,
            slot=frame.display,
            input=written[:_MAX_ECHO],
        )

    def _kept(
        self, frame: OpenFrame, value: Any, judgement: Judgement, events: list[Event]
    ) -> ErrorDetail | None:
        """A value kept although a check failed: flagged, or confirmed (diagnostic)."""
        detail = self._check_detail(frame, value, judgement)
        if judgement.action == "flag":
            self._results.flagged[frame.pointer] = detail
            return detail
        self._report(
            frame,
            events,
            "check_confirmed",
            f"{frame.display} written again after it was rejected (it"
            f" {judgement.failure.reason}); accepted",
        )
        return None

    def _reject(
        self, frame: OpenFrame, value: Any, judgement: Judgement, events: list[Event]
    ) -> None:
        """A value a check rejected leaves the state; the judgement says what follows."""
        ops: list[PatchOp] = []
        if frame.place is not None:
            self._state.remove(frame.place, ops)
            self._drop_empty_containers(frame, ops)
        detail = self._check_detail(frame, value, judgement)
        action = judgement.action
        if action in ("retry", "fail"):
            self._results.fail(frame.slot, frame.key, detail)
            if action == "retry" and self._checker is not None:
                where = Held(frame.slot, frame.display, frame.pointer, frame.index, value, detail)
                self._checker.hold(frame.key, where)
        elif action == "stop":
            self._stop(frame, detail)
        elif action == "drop":
            self._results.why_missing[(frame.slot_id, None)] = detail
        failure = judgement.failure
        events.append(
            SlotRejected(
                *self._where(frame),
                tuple(ops),
                failure.code,
                failure.reason,
                value,
                action,
                detail,
            )
        )
        if action == "leave_out":
            self._report(
                frame,
                events,
                "check_left_out",
                f"{frame.display} left out: it {failure.reason} after every attempt",
            )

    def _stop(self, frame: OpenFrame, detail: ErrorDetail) -> None:
        """A list stops at ``frame``'s repeating value: the rest of it is not read in
        this pass, and what that leaves missing is asked for with the reason."""
        results = self._results
        array = frame.slot.array
        if array is not None and array.items_are_objects:  # every field of the list
            fields = self._list_slots(array.segments)
            results.stopped.update(fields)
            unread = ErrorDetail("missing", "the item repeats an earlier one")
            position = frame.key[1]
            for slot_id in fields:
                results.why_missing[(slot_id, position)] = (
                    detail if slot_id == frame.slot_id else unread
                )
        else:
            results.stopped.add(frame.slot_id)
            results.why_missing[(frame.slot_id, None)] = detail

    def keep_held(self, events: list[Event]) -> None:
        """An attempt that settles check failures ends (``on_failure="accept"``: the
        second, :data:`~.checks.ACCEPT_SETTLES_ON`): a required field it left
        without an acceptable value keeps the last value a check rejected, flagged,
        instead of failing the object (the checks are judgements, not the schema)."""
        if self._checker is None:
            return
        results = self._results
        for key, held in self._checker.held_to_keep(self._attempt):
            if key in results.accepted:
                continue
            ops: list[PatchOp] = []
            try:
                self._state.set_pointer(held.pointer, held.value, ops)
            except (LookupError, ValueError, TypeError, jsonpointer.JsonPointerException):
                continue  # its item is gone (a list written again): nothing to keep
            results.failed.pop(key, None)
            results.accept(key, held.pointer, held.value)
            results.flagged[held.pointer] = held.detail
            where = (held.slot.id, held.display, held.pointer, held.index, self._attempt)
            events.append(SlotComplete(*where, tuple(ops), held.value, held.detail, None))

    def _list_slots(self, segments: tuple[object, ...]) -> list[int]:
        """The slots of the list of objects at ``segments`` (read once per stopped list)."""
        return [
            s.id for s in self._plan.slots if s.array is not None and s.array.segments == segments
        ]

    def _report(self, frame: OpenFrame, events: list[Event], code: str, message: str) -> None:
        if self._diagnostics is not None:
            self._diagnostics.report(events, code, message, frame.offset, frame.display)

    def truncate(self, message: str, events: list[Event]) -> None:
        """The stream ended or the pass stopped: an open frame fails ``truncated``."""
        frame = self.current
        self.current = None
        self.skipping = False
        if frame is not None:
            self._fail(frame, "truncated", message, events)

    def abandon(self) -> None:
        """Forget the open frame without reporting it (the pass hit an internal fault)."""
        self.current = None
        self.skipping = False

    def _fail(
        self,
        frame: OpenFrame,
        code: str,
        message: str,
        events: list[Event],
        *,
        detail: ErrorDetail | None = None,
    ) -> None:
        ops: list[PatchOp] = []
        if frame.place is not None:
            self._state.remove(frame.place, ops)
            self._drop_empty_containers(frame, ops)
        if detail is None:
            detail = ErrorDetail(
                code,
                message,
                location=frame.pointer,
                slot=frame.display,
                input=frame.raw()[:_MAX_ECHO],
            )
        self._results.fail(frame.slot, frame.key, detail)
        events.append(SlotFailed(*self._where(frame), tuple(ops), detail))

    def _where(self, frame: OpenFrame) -> tuple[int, str, str, int | None, int]:
        """The fields every slot event of ``frame`` starts with."""
        return frame.slot_id, frame.display, frame.pointer, frame.index, self._attempt

    def _drop_empty_containers(self, frame: OpenFrame, ops: list[PatchOp]) -> None:
        """Take out the containers the failed frame's opening added, if still empty.

        They were added last (one frame is open at a time), so no position shifts; an
        object-array item taken out forgets its frame index, and its failures are set
        aside (:meth:`_item_placed` keeps them past the list's end).
        """
        state = self._state
        for pointer in reversed(frame.added_containers):
            try:
                value = state.resolve(pointer)
            except jsonpointer.JsonPointerException:
                continue
            if value not in ({}, []):
                break
            state.remove_pointer(pointer, ops)
            array_pointer, _, position = pointer.rpartition("/")
            if position.isdigit():
                state.forget_position(array_pointer, int(position))
                if frame.index is not None:
                    dropped = self._results.dropped.setdefault(array_pointer, DroppedItems())
                    dropped.add(frame.index, int(position))
