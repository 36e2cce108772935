"""Frame admission: whether a frame that opens is read, and at which index.

Each rule drops or corrects a frame with a diagnostic (at the frame's offset):

- ``unknown_slot``: an id the plan does not know; the frame is skipped.
- ``unexpected_index``: an index on a slot that is not repeatable; the index is ignored.
- ``missing_index``: a repeatable slot without an index; it takes the next index of
  that slot.
- ``not_requested``: in a follow-up pass, a frame the retry did not ask for; skipped.
- ``list_stopped``: an item of a list that a slot check stopped in this pass (an item
  repeated an earlier one, :mod:`.checks`); skipped.
- ``duplicate_frame``: a second frame for the same slot and index (in this pass, or an
  accepted value of an earlier one); skipped, the first one counts.
- ``too_many_items``: a new item for an array already holding ``maxItems`` (or
  ``max_array_items``) items; skipped.
- ``index_skipped`` (an index above the next one expected: per list, so a field an
  earlier item left out may first come at a later index) and ``index_out_of_order`` (a
  scalar-array index below one already seen): noted; the item is still read, at the
  next free position, so the state never has holes.

Complexity: O(1) per frame apart from the retry check (O(targets)). Memory: one entry
per frame read in this pass.
"""

from __future__ import annotations

from ..plan.model import Slot, SlotPlan
from ..syntax.base import Open
from .diagnostics import DiagnosticLog
from .events import Event
from .results import Key, SlotResults
from .retry import RetryRequest
from .state import ObjectState

__all__ = ["Admission"]


class Admission:
    """Admits the frames of one pass."""

    __slots__ = (
        "_diagnostics",
        "_highest_index",
        "_max_array_items",
        "_next_index",
        "_plan",
        "_request",
        "_results",
        "_seen",
        "_state",
    )

    def __init__(
        self,
        plan: SlotPlan,
        state: ObjectState,
        results: SlotResults,
        diagnostics: DiagnosticLog,
        *,
        request: RetryRequest | None,
        max_array_items: int,
    ) -> None:
        self._plan = plan
        self._state = state
        self._results = results
        self._diagnostics = diagnostics
        self._request = request
        self._max_array_items = max_array_items
        self._seen: set[Key] = set()  # (slot id, frame index) read in this pass
        self._next_index: dict[int, int] = {}  # per repeatable slot: the next free index
        # the highest index seen: per scalar-array slot, per list of objects (segments)
        self._highest_index: dict[object, int] = {}

    def admit(self, token: Open, events: list[Event]) -> tuple[Slot, int | None] | None:
        """The slot and index to read the frame as, or ``None`` to skip it."""
        index, offset = token.index, token.offset
        slot = None if token.slot is None else self._plan.get(token.slot)
        if slot is None:
            self._diagnostics.report(
                events, "unknown_slot", f"frame for unknown slot id {token.ref} ignored", offset
            )
            return None
        if not slot.repeatable and index is not None:
            self._diagnostics.report(
                events,
                "unexpected_index",
                f"slot {token.ref} ({slot.path}) is not repeatable; index {index} ignored",
                offset,
            )
            index = None
        elif slot.repeatable and index is None:
            index = self._next_index.get(slot.id, 0)
            self._diagnostics.report(
                events,
                "missing_index",
                f"repeatable slot {token.ref} ({slot.path}) written without an index; took {index}",
                offset,
            )
        if self._rejects(slot, index, offset, events):
            return None
        self._seen.add((slot.id, index))
        if index is not None:
            self._next_index[slot.id] = max(self._next_index.get(slot.id, 0), index + 1)
        return slot, index

    def _rejects(self, slot: Slot, index: int | None, offset: int, events: list[Event]) -> bool:
        """Whether the frame is skipped (with its diagnostic); index order is noted."""
        if self._request is not None and not self._request.allows(slot, index):
            self._diagnostics.report(
                events,
                "not_requested",
                f"frame for {slot.display(index)} was not asked for in this attempt; ignored",
                offset,
            )
            return True
        if slot.id in self._results.stopped:
            self._diagnostics.report(
                events,
                "list_stopped",
                f"{slot.display(index)} ignored: the list stopped at a repeated item",
                offset,
            )
            return True
        accepted = self._results.accepted
        array = slot.array
        duplicate = (slot.id, index) in self._seen
        if array is None:
            duplicate = duplicate or (slot.id, index) in accepted
        elif array.items_are_objects and index is not None:
            position = self._state.position(array.pointer, index)
            duplicate = duplicate or (position is not None and (slot.id, position) in accepted)
        if duplicate:
            self._diagnostics.report(
                events,
                "duplicate_frame",
                f"second frame for {slot.display(index)} ignored (the first one counts)",
                offset,
            )
            return True
        if array is None or index is None:
            return False
        cap = self._max_array_items
        if array.max_items is not None:
            cap = min(cap, array.max_items)
        new_item = not array.items_are_objects or (
            self._state.position(array.pointer, index) is None
        )
        if new_item and self._state.array_length(array.segments) >= cap:
            self._diagnostics.report(
                events,
                "too_many_items",
                f"{array.path} already has {cap} items; {slot.display(index)} ignored",
                offset,
            )
            return True
        # a list of objects counts its items, whichever field wrote them
        track: object = array.segments if array.items_are_objects else slot.id
        expected = self._highest_index.get(track, -1) + 1
        if index > expected:
            self._diagnostics.report(
                events,
                "index_skipped",
                f"{slot.path} index {index} came where {expected} was expected",
                offset,
            )
        elif index < expected - 1 and not array.items_are_objects:
            self._diagnostics.report(
                events,
                "index_out_of_order",
                f"{slot.path} index {index} came after index {expected - 1}",
                offset,
            )
        self._highest_index[track] = max(expected - 1, index)
        return False
