"""The end of a pass: missing slots, defaults, and the whole-object check.

Rules, in the order they apply when a pass closes:

- **Missing**: a required slot with no accepted value that did not fail in this pass
  fails ``missing``. Slots under an optional object that is absent are not needed. A
  scalar array is one unit: missing when it has fewer than ``minItems`` items. A
  required list of objects with no item at all, where it may not be empty, is missing
  as a whole (reported once, as its first field with no index); its items' required
  fields are each missing at their position. A nullable object or array with no frame
  is ``null`` (no frame is how ``null`` is written), not missing. When the stream was
  cut short (and did not mark its own end), a required array that received nothing is
  missing too, instead of being taken as empty, and so are the required fields of a
  nullable object that received nothing.
- **Defaults** (only when nothing failed): an absent optional value takes its default;
  an absent required object is ``{}`` (``null`` when nullable); an absent required
  array is ``[]`` (``null`` when nullable and ``minItems`` is above 0).
- **Whole object**: the object is validated strictly (the Pydantic model with
  ``strict=True`` from JSON, or the JSON Schema). An error at or below a slot's value
  fails that slot (once; its value leaves the state); an error at a key of a rest slot
  fails the rest slot; any other error is ``model_invalid``, which no retry can mend.
  At most :data:`MAX_WHOLE_ERRORS` errors are read.
- A pass that ends with no error emits ``done`` with the final object.
- **Left out on the last attempt** (:meth:`PassCloser.leave_out`): when no attempt is
  left and every error belongs to a slot that lies in an optional part of the object
  (an optional field, or an optional or nullable object or scalar list above it, not
  inside a list item), each such part is taken out whole (then it takes its default
  as above: absent, or ``null``), a ``left_out`` diagnostic names it and the values it
  held, and the pass ends again; ``done`` carries the removals. If the object still does not
  validate, the parts are put back and the pass fails as before.

Complexity: O(slots + items + state size) per pass end; mapping an error back to its
slot is O(depth of its pointer).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any, Final

import jsonpointer
from jsonpointer import JsonPointer
from pydantic import ValidationError

from .._errors import ErrorDetail
from .._jsonable import dumps
from ..plan.model import INDEX, MISSING, Slot, SlotPlan, _display, _pointer
from .events import Diagnostic, Done, Event, PatchOp, SlotFailed
from .results import Key, SlotResults
from .state import ObjectState, copy_json

__all__ = ["MAX_WHOLE_ERRORS", "PassCloser", "PassEnd"]

#: Errors of the whole-object check read at most (the rest adds nothing).
MAX_WHOLE_ERRORS: Final = 100
#: Characters of an error message, and of a rejected value, kept in its error.
_MAX_MESSAGE: Final = 300
_MAX_ECHO: Final = 200


@dataclass(frozen=True)
class PassEnd:
    """How a pass ended: its errors, whether a retry may mend them, and the validated
    object (a model instance, or the JSON value; ``None`` unless valid)."""

    errors: tuple[ErrorDetail, ...]
    retryable: bool
    value: Any = None


class PassCloser:
    """Ends the passes of one assembler."""

    __slots__ = ("_plan", "_results", "_state")

    def __init__(self, plan: SlotPlan, state: ObjectState, results: SlotResults) -> None:
        self._plan = plan
        self._state = state
        self._results = results

    def missing(self, *, cut: bool) -> list[tuple[Slot, int | None]]:
        """Required slots (at item positions) with no accepted value that did not fail
        in this pass. ``cut``: the stream was cut short, so an empty required array is
        missing rather than empty."""
        out: list[tuple[Slot, int | None]] = []
        state = self._state
        results = self._results
        accepted, failed = results.accepted, results.failed
        whole: set[tuple[Any, ...]] = set()  # object arrays reported missing as a whole
        for slot in self._plan.slots:
            if not self._parents_present(slot, cut=cut):
                continue
            array = slot.array
            if array is None:
                key: Key = (slot.id, None)
                if slot.required and key not in accepted and key not in failed:
                    out.append((slot, None))
                continue
            length = state.array_length(array.segments)
            if length == 0 and array.nullable and not cut and INDEX not in array.segments:
                continue  # a null array: no frames (it becomes null or [] below)
            empty_cut = cut and array.required and length == 0
            if not array.items_are_objects:
                if slot.id not in results.failed_sequences and (
                    length < array.min_items or empty_cut
                ):
                    out.append((slot, None))
                continue
            if length == 0 and (array.min_items > 0 or empty_cut):
                if array.segments not in whole and (slot.id, None) not in failed:
                    whole.add(array.segments)
                    out.append((slot, None))
                continue
            for position in range(max(length, array.min_items)):
                key = (slot.id, position)
                if (
                    slot.required
                    and key not in accepted
                    and key not in failed
                    and (position >= length or self._parents_present(slot, position, cut=cut))
                ):
                    out.append((slot, position))
        return out

    def finish(
        self, attempt: int, *, cut: bool, events: list[Event], ops: list[PatchOp] | None = None
    ) -> PassEnd:
        """Close the pass: fail missing slots, then fill defaults and check the whole.
        ``ops``: changes already made to the state, sent with ``done``."""
        errors: list[ErrorDetail] = list(self._results.failed.values())
        for slot, position in self.missing(cut=cut):
            if slot.array is not None and position is None:  # a whole scalar sequence
                pointer, shown = slot.array.pointer, slot.array.path
            else:
                pointer = slot.concrete_pointer(position) if slot.repeatable else slot.pointer
                shown = slot.display(position)
            why = self._results.why_missing.get((slot.id, position))
            if why is None:
                detail = ErrorDetail("missing", "no frame arrived for this slot", pointer, shown)
            else:  # kept out of its list by a check: the follow-up says why
                detail = replace(why, location=pointer, slot=shown)
            self._results.failed[(slot.id, position)] = detail
            errors.append(detail)
            events.append(SlotFailed(slot.id, shown, pointer, position, attempt, (), detail))
        if errors:
            return PassEnd(tuple(errors), True)
        ops = list(ops or ())
        self._fill_defaults(ops)
        value, errors = self._validate_whole(attempt, events)
        if errors:
            retryable = all(e.code != "model_invalid" for e in errors)
            return PassEnd(tuple(errors), retryable)
        events.append(Done(attempt, self._state.snapshot(), tuple(ops)))
        return PassEnd((), True, value)

    def leave_out(
        self, attempt: int, errors: tuple[ErrorDetail, ...], *, cut: bool, events: list[Event]
    ) -> PassEnd | None:
        """The last attempt ended with ``errors``: leave out the optional parts that hold
        them (module rules). The new end of the pass, or ``None`` when some error is
        not in an optional part, or the object still fails (nothing changed then)."""
        failed = self._results.failed
        owned = {id(detail) for detail in failed.values()}
        if not errors or any(id(e) not in owned for e in errors):
            return None
        parts: dict[str, tuple[Any, ...]] = {}  # pointer -> segments
        for slot_id, _ in failed:
            part = _optional_part(self._plan[slot_id])
            if part is None:
                return None
            parts[_pointer(part, "")] = part
        chosen = _outermost(parts)
        results = self._results
        saved = (dict(results.accepted), dict(failed), dict(results.flagged))
        saved_sequences = set(results.failed_sequences)
        saved_root = self._state.snapshot()
        ops: list[PatchOp] = []
        notes: list[Event] = []
        for pointer in chosen:
            under = [k for k, (where, _) in results.accepted.items() if _within(where, pointer)]
            values = [results.accepted.pop(k)[1] for k in under]
            owned_here = [k for k in failed if _within(self._plan[k[0]].pointer, pointer)]
            reasons = sorted({f"{failed[k].slot} ({failed[k].code})" for k in owned_here})
            for key in owned_here:
                del failed[key]
            for where in [w for w in results.flagged if _within(w, pointer)]:
                del results.flagged[where]
            self._state.remove_pointer(pointer, ops)
            shown = _display(parts[pointer], "") or "(root)"
            written = ", ".join(dumps(v)[:40] for v in values[:5])
            message = (
                f"{shown} left out: {', '.join(reasons)} still failed after the last attempt"
                + (f" (values dropped: {written})" if written else "")
            )
            notes.append(Diagnostic("left_out", message, 0, attempt, shown))
        results.failed_sequences = set()
        end_events: list[Event] = []
        end = self.finish(attempt, cut=cut, events=end_events, ops=ops)
        if not end.errors:
            events.extend(notes)
            events.extend(end_events)
            return end
        # still invalid: everything goes back as it was (no event told of the change)
        self._state.reset(saved_root)
        results.accepted.clear()
        results.accepted.update(saved[0])
        results.failed = saved[1]
        results.flagged.clear()
        results.flagged.update(saved[2])
        results.failed_sequences = saved_sequences
        return None

    def _parents_present(self, slot: Slot, position: int | None = None, *, cut: bool) -> bool:
        """False when an optional object above the slot is absent (it is not needed), or
        a nullable one in a pass that marked its end (no frame is how ``null`` is written;
        in a cut pass its fields are missing).

        Objects inside array items are checked at item ``position``; without a position
        only the objects above the array are.
        """
        for node in slot.parents:
            if node.segments[-1] is INDEX:
                continue  # the item itself: present by construction
            indexed = any(s is INDEX for s in node.segments)
            if indexed and position is None:
                continue
            pointer = node.concrete_pointer(position) if indexed else node.pointer
            may_be_absent = not node.required or (node.nullable and not cut)
            if may_be_absent and not self._state.contains(pointer):
                return False
        array = slot.array
        return array is None or array.required or self._state.contains(array.pointer)

    def _concrete(self, segments: tuple[Any, ...]) -> list[str]:
        """Concrete pointers for a template: one per existing item when it has an index."""
        if INDEX not in segments:
            return [_pointer(segments, "")]
        cut = segments.index(INDEX)
        length = self._state.array_length(segments[:cut])
        return [_pointer(segments, str(i)) for i in range(length)]

    def _fill_defaults(self, ops: list[PatchOp]) -> None:
        """Absent optional values take their defaults; absent required objects are ``{}``
        (an object whose fields are all optional gets no frame at all), or ``null`` when
        nullable; absent required arrays are ``[]``, or ``null`` when nullable and ``[]``
        is too short."""
        state = self._state
        for node in self._plan.objects:
            if not node.required and node.default is MISSING:
                continue
            absent: Any = None if node.nullable else {}
            default = node.default if node.default is not MISSING else absent
            for pointer in self._concrete(node.segments):
                if not state.contains(pointer) and _parent_exists(state, pointer):
                    state.set_pointer(pointer, copy_json(default), ops)
        for array in self._plan.arrays:
            if INDEX in array.segments:
                continue
            if not state.contains(array.pointer) and _parent_exists(state, array.pointer):
                if array.default is not MISSING:
                    state.set_pointer(array.pointer, copy_json(array.default), ops)
                elif array.required:
                    no_items: Any = None if array.nullable and array.min_items > 0 else []
                    state.set_pointer(array.pointer, no_items, ops)
        for slot in self._plan.slots:
            if not slot.has_default or (
                slot.array is not None and not slot.array.items_are_objects
            ):
                continue
            for pointer in self._concrete(slot.segments):
                if not state.contains(pointer) and _parent_exists(state, pointer):
                    state.set_pointer(pointer, copy_json(slot.default), ops)

    def _validate_whole(self, attempt: int, events: list[Event]) -> tuple[Any, list[ErrorDetail]]:
        """The validated object, or the errors of the strict whole-object check, mapped
        back to the slots that own them (see the module rules)."""
        snapshot = self._state.snapshot()
        found: list[tuple[str, str, str]] = []  # (pointer, code, message)
        value: Any = None
        try:
            model = self._plan.model
            if model is not None:
                try:
                    value = model.model_validate_json(dumps(snapshot), strict=True)
                except ValidationError as exc:
                    for err in exc.errors(include_url=False)[:MAX_WHOLE_ERRORS]:
                        pointer = JsonPointer.from_parts(err["loc"]).path
                        found.append((pointer, err["type"], err["msg"]))
            else:
                for error in self._plan.context.validator().iter_errors(snapshot):
                    pointer = JsonPointer.from_parts(error.absolute_path).path
                    found.append((pointer, f"schema_{error.validator}", error.message))
                    if len(found) >= MAX_WHOLE_ERRORS:
                        break
                if not found:
                    value = snapshot
        except Exception as exc:  # the check itself failed: the output is not accepted
            message = f"the output could not be checked ({exc!r:.120})"
            return None, [ErrorDetail("model_invalid", message)]
        owners = self._owners()
        errors: list[ErrorDetail] = []
        for pointer, code, message in found:
            if len(message) > _MAX_MESSAGE:
                message = message[:_MAX_MESSAGE] + "…"
            key = _owner(owners, pointer)
            if key is None:
                errors.append(ErrorDetail("model_invalid", f"{code}: {message}", pointer))
            elif key in self._results.accepted:  # else it failed on an earlier error
                errors.append(self._reject(key, code, message, pointer, attempt, events))
        return value, errors

    def _reject(
        self, key: Key, code: str, message: str, pointer: str, attempt: int, events: list[Event]
    ) -> ErrorDetail:
        """Take an accepted value back: the whole object rejected it."""
        slot = self._plan[key[0]]
        shown = slot.display(key[1])
        where, value = self._results.accepted.pop(key)
        detail = ErrorDetail(code, message, pointer, shown, dumps(value)[:_MAX_ECHO])
        self._results.fail(slot, key, detail)
        ops: list[PatchOp] = []
        if slot.is_rest:
            for name in value:
                self._state.remove_pointer(f"{where}/{jsonpointer.escape(name)}", ops)
        else:
            self._state.remove_pointer(where, ops)
        events.append(SlotFailed(slot.id, shown, where, key[1], attempt, tuple(ops), detail))
        return detail

    def _owners(self) -> dict[str, Key]:
        """Which accepted slot value each concrete pointer belongs to (a rest slot owns
        its keys)."""
        owners: dict[str, Key] = {}
        for key, (where, value) in self._results.accepted.items():
            if self._plan[key[0]].is_rest and isinstance(value, dict):
                for name in value:
                    owners[f"{where}/{jsonpointer.escape(name)}"] = key
            else:
                owners[where] = key
        return owners


def _owner(owners: dict[str, Key], pointer: str) -> Key | None:
    """The slot owning ``pointer`` or the nearest value above it. O(depth)."""
    while True:
        if pointer in owners:
            return owners[pointer]
        if not pointer:
            return None
        pointer = pointer.rpartition("/")[0]


def _optional_part(slot: Slot) -> tuple[Any, ...] | None:
    """The segments of the innermost optional part of the object that holds ``slot``:
    the slot itself when optional, else an optional or nullable scalar list or object
    above it; ``None`` when there is none, or the slot lies in an item of a list (an
    item is not taken out: the positions after it would move). O(depth)."""
    array = slot.array
    if array is not None and (array.items_are_objects or INDEX in array.segments):
        return None
    if array is None and not slot.required and not slot.is_root and not slot.is_rest:
        return slot.segments
    if array is not None and (not array.required or array.nullable):
        return array.segments
    for node in reversed(slot.parents):
        if not node.segments:
            break
        if not node.required or node.nullable:
            return node.segments
    return None


def _outermost(parts: Iterable[str]) -> list[str]:
    """The pointers of ``parts`` not inside another of them."""
    chosen: list[str] = []
    for pointer in sorted(parts, key=len):
        if not any(_within(pointer, outer) for outer in chosen):
            chosen.append(pointer)
    return chosen


def _within(pointer: str, outer: str) -> bool:
    return pointer == outer or pointer.startswith(outer + "/")


def _parent_exists(state: ObjectState, pointer: str) -> bool:
    """Whether the object that would hold ``pointer`` exists (and is an object)."""
    parent = pointer.rsplit("/", 1)[0]
    return parent == "" or (state.contains(parent) and isinstance(state.resolve(parent), dict))
