"""Regeneration planning: which slots to ask for again, and why.

Pure data: the assembler decides *what* failed; this module says how a follow-up
request is shaped. Rules:

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
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .._errors import ErrorDetail
from ..plan.model import Slot

__all__ = ["RetryRequest", "RetryTarget"]


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
