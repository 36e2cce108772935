"""Regeneration planning: which slots to ask for again, and why.

The assembler records *what* failed (:mod:`.results`); this module shapes the follow-up
request (:func:`plan_retry`) and prepares the state for it (:func:`prepare_retry`).
Rules:

- A plain slot that failed validation, was truncated or never arrived is asked for
  again on its own, with the validation message and the rejected text.
- An object-array field is asked for again at its item index (``<3:1>``); items
  missing below ``minItems`` are asked for as new indexes.
- A list of objects that got no item at all is asked for again as a whole (a target
  on its first field with no index), and accepts every field of every item.
- A scalar array (``tags``) is one unit: when an item failed, or the array is short,
  the whole sequence is asked for again and replaces the array; its accepted items are
  shown as context.
- Accepted values are sent along as context and are never changed by a retry.
- A request that would repeat the one before word for word (the same failures, the
  same rejected texts, the same accepted values: :meth:`RetryRequest.repeats`) is not
  sent: the client settles the failures as on the last attempt (unless a drop or a
  server error cut the pass).
- Before the follow-up pass, frame index ``i`` of a list of objects means item ``i``
  of the state again, so a retry names items by their position.

Complexity: planning is O(failures · log failures) plus one state snapshot; preparing is
O(targets · accepted values + arrays); :meth:`RetryRequest.allows` is O(targets) per frame.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .._errors import ErrorDetail
from ..plan.model import Slot, SlotPlan
from .events import PatchOp
from .results import Key, SlotResults
from .state import ObjectState

__all__ = ["RetryRequest", "RetryTarget", "plan_retry", "prepare_retry"]


@dataclass(frozen=True)
class RetryTarget:
    """One thing to produce again: ``slot`` at item ``index`` (``None``: the whole
    slot, or the whole sequence for a scalar array), with the reason it failed."""

    slot: Slot
    index: int | None
    error: ErrorDetail

    @property
    def whole_sequence(self) -> bool:
        return self.slot.repeatable and self.index is None


@dataclass(frozen=True)
class RetryRequest:
    """A follow-up attempt: the targets, and the accepted object as context."""

    attempt: int
    targets: tuple[RetryTarget, ...]
    accepted: Mapping[str, Any] = field(default_factory=dict)

    def allows(self, slot: Slot, index: int | None) -> bool:
        """Whether a frame for ``slot`` at ``index`` belongs to this attempt.

        A whole list of objects asked for again (a target with no index on one of its
        fields) admits every field of every item.
        """
        for t in self.targets:
            if t.slot.id == slot.id and (t.index is None or index is None or t.index == index):
                return True
            array = t.slot.array
            if (
                t.index is None
                and array is not None
                and array.items_are_objects
                and slot.array is not None
                and slot.array.segments == array.segments
            ):
                return True
        return False

    def repeats(self, other: RetryRequest | None) -> bool:
        """Whether this request asks ``other``'s question again word for word: the same
        slots and items, failed with the same errors (the same rejected texts), with
        the same accepted values. The pass ``other`` asked for then changed nothing,
        and the model would be sent the request it has just answered. O(targets +
        accepted values)."""
        return (
            other is not None
            and self._failures() == other._failures()
            and self.accepted == other.accepted
        )

    def _failures(self) -> list[tuple[int, int | None, ErrorDetail]]:
        return [(t.slot.id, t.index, t.error) for t in self.targets]

    def to_json(self) -> dict[str, Any]:
        return {
            "attempt": self.attempt,
            "targets": [
                {
                    "slot_id": t.slot.id,
                    "slot": t.slot.display(t.index),
                    "index": t.index,
                    "error": t.error.to_json(),
                }
                for t in self.targets
            ],
        }


def plan_retry(
    plan: SlotPlan, failed: Mapping[Key, ErrorDetail], state: ObjectState, attempt: int
) -> RetryRequest | None:
    """The request for attempt ``attempt`` that asks again for what ``failed``, with
    ``state`` as context, or ``None`` when nothing failed."""
    targets: list[RetryTarget] = []
    whole: set[int] = set()
    for key, error in failed.items():
        slot = plan[key[0]]
        if slot.array is not None and not slot.array.items_are_objects:
            if slot.id not in whole:
                whole.add(slot.id)
                targets.append(RetryTarget(slot, None, error))
        else:
            targets.append(RetryTarget(slot, key[1], error))
    if not targets:
        return None
    targets.sort(key=lambda t: (t.slot.id, -1 if t.index is None else t.index))
    return RetryRequest(attempt, tuple(targets), state.snapshot())


def prepare_retry(
    plan: SlotPlan, state: ObjectState, results: SlotResults, request: RetryRequest
) -> tuple[PatchOp, ...]:
    """Make way for ``request``'s pass: a sequence asked for as a whole leaves the state
    (emptied) and the accepted values; item indexes mean state positions again. Returns
    the state's changes."""
    ops: list[PatchOp] = []
    for target in request.targets:
        array = target.slot.array
        if target.whole_sequence and array is not None:
            results.forget_slot(target.slot.id)
            if state.contains(array.pointer):
                state.set_pointer(array.pointer, [], ops)
    for array in plan.arrays:
        if array.items_are_objects and all(isinstance(s, str) for s in array.segments):
            state.reset_positions(array.pointer, state.array_length(array.segments))
    return tuple(ops)
