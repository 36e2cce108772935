"""Slot results: which slot values were accepted, and which failed in this pass.

A result is keyed by :data:`Key`: the slot id and the value's position in the state
(``None`` for a slot outside arrays; for an object-array field, the item's position; for
a scalar-array item, its position in the array).

Rules:

- An accepted value keeps its concrete pointer and stays accepted across passes. Only
  the whole-object check (which takes a value back when the object rejects it) and a
  retry that asks for a whole scalar sequence again take accepted values out.
- Failures belong to one pass and are cleared when the next begins. A scalar-array
  item that failed marks its whole sequence as failed (it is asked for again as one).
- An accepted value clears a failure under its key, unless the key's whole sequence
  failed: a value the state holds is never asked for again.
- A list-of-objects item whose every field failed leaves the state, and the next item
  takes its position. Its failures are set aside past the list's end
  (:class:`DroppedItems`), so they are asked for as new items and never name the
  item that took the position.

Complexity: O(1) per accepted or failed value; :meth:`SlotResults.completed` is
O(accepted values).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from .._errors import ErrorDetail
from ..plan.model import Slot

__all__ = ["DroppedItems", "Key", "SlotResults", "move_item_records"]

#: A slot value: the slot id and its position in the state (``None`` outside arrays).
Key = tuple[int, int | None]

R = TypeVar("R")


def move_item_records(
    records: dict[Key, R],
    fields: Sequence[Slot],
    moves: Sequence[tuple[int, int]],
    moved: Callable[[R, Slot, int], R] | None = None,
) -> None:
    """Move what ``records`` holds for the ``fields`` of list items from one position
    to another (``(from, to)``, as :meth:`DroppedItems.placed` gives them), each record
    made over for its new position by ``moved``. All are taken before any is put back
    (a swap). O(fields · moves)."""
    taken = [[(slot, records.pop((slot.id, old), None)) for slot in fields] for old, _ in moves]
    for (_, new), pairs in zip(moves, taken, strict=True):
        for slot, record in pairs:
            if record is not None:
                records[(slot.id, new)] = record if moved is None else moved(record, slot, new)


class DroppedItems:
    """The items of one list of objects taken out in this pass with failed fields.

    Their failures are keyed at the positions after the list's last item, one item
    each, in a row: the list's length, the next one, and so on (what a follow-up asks
    for as new items). An item that takes the first of them moves its holder to the
    end of the row, unless it is the dropped item itself (a later field of it came),
    which gets its failures back at its new position.
    """

    __slots__ = ("by_index", "by_position")

    def __init__(self) -> None:
        #: Frame index of the item -> position its failures are keyed at.
        self.by_index: dict[int, int] = {}
        #: The same, the other way round.
        self.by_position: dict[int, int] = {}

    def add(self, index: int, position: int) -> None:
        self.by_index[index] = position
        self.by_position[position] = index

    def placed(self, index: int, position: int) -> list[tuple[int, int]]:
        """Item ``index`` was placed at ``position`` (the list's end): the moves
        ``(from, to)`` of failure positions that keep the row after the list's end."""
        held_at = self.by_index.pop(index, None)
        holder = self.by_position.pop(position, None)
        if held_at is None:
            if holder is None:
                return []
            end = position + len(self.by_position) + 1
            self.add(holder, end)
            return [(position, end)]
        if held_at == position:
            return []
        del self.by_position[held_at]
        if holder is not None:
            self.add(holder, held_at)
            return [(held_at, position), (position, held_at)]
        return [(held_at, position)]


class SlotResults:
    """Accepted values (across passes) and failures (this pass)."""

    __slots__ = (
        "accepted",
        "dropped",
        "failed",
        "failed_sequences",
        "flagged",
        "logprobs",
        "stopped",
        "why_missing",
    )

    def __init__(self) -> None:
        #: Accepted values by key: ``(concrete pointer, value)``.
        self.accepted: dict[Key, tuple[str, Any]] = {}
        #: Failures of this pass by key, in the order they happened.
        self.failed: dict[Key, ErrorDetail] = {}
        #: Scalar-array slots with a failed item in this pass.
        self.failed_sequences: set[int] = set()
        #: Lists of objects with items taken out in this pass, by array pointer.
        self.dropped: dict[str, DroppedItems] = {}
        #: Array slots whose list a slot check stopped in this pass (every field of a
        #: list of objects).
        self.stopped: set[int] = set()
        #: Why values the checks kept out of a list in this pass may be missing, by key:
        #: the rejection of the item a list stopped at (its other fields: "the item
        #: repeats an earlier one"), or of an item dropped from a list of scalars
        #: (under ``(slot id, None)``, the whole list). The follow-up says it of a value
        #: found missing instead of "no frame arrived".
        self.why_missing: dict[Key, ErrorDetail] = {}
        #: Values kept although a slot check failed on them, by concrete pointer.
        self.flagged: dict[str, ErrorDetail] = {}
        #: The log probabilities of the tokens that wrote each accepted value, by concrete
        #: pointer, where the pass had them (:mod:`.confidence`).
        self.logprobs: dict[str, tuple[float, ...]] = {}

    def new_pass(self) -> None:
        self.failed = {}
        self.failed_sequences = set()
        self.dropped = {}
        self.stopped = set()
        self.why_missing = {}

    def accept(self, key: Key, pointer: str, value: Any) -> None:
        self.accepted[key] = (pointer, value)
        if key[0] not in self.failed_sequences:
            self.failed.pop(key, None)
        self.logprobs.pop(pointer, None)

    def fail(self, slot: Slot, key: Key, detail: ErrorDetail) -> None:
        self.failed[key] = detail
        if slot.array is not None and not slot.array.items_are_objects:
            self.failed_sequences.add(slot.id)

    def forget_slot(self, slot_id: int) -> None:
        """Take every accepted value of ``slot_id`` out (a retry replaces the sequence)."""
        for key in [k for k in self.accepted if k[0] == slot_id]:
            del self.accepted[key]

    def completed(self) -> dict[str, Any]:
        """Accepted values by concrete pointer."""
        return {pointer: value for pointer, value in self.accepted.values()}
