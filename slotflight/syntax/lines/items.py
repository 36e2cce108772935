"""The item-grouping rule of line syntaxes, shared by their reader and writer.

A repeatable slot takes its index from the line order unless one is written. Each array
counts its own items: a scalar-array slot starts a new item with every line; in an
array of objects a new item starts when a field of the current item comes again
(``owner a`` ``due b`` ``owner c`` are two items). An explicit index moves the array to
that item.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence

from ...plan.instance import FrameValue
from ...plan.model import Slot

__all__ = ["ItemCounter", "always_in_item", "explicit_indexes", "slot_groups"]


def slot_groups(slots: Iterable[Slot]) -> dict[int, Hashable]:
    """Which array each repeatable slot counts items in (slot id -> array key)."""
    return {s.id: s.array.segments for s in slots if s.array is not None}


class ItemCounter:
    """Which index a line without one gets. Memory is bounded by the number of slots."""

    def __init__(self, groups: Mapping[int, Hashable]) -> None:
        self._groups = groups
        self._item: dict[Hashable, int] = {}
        self._fields: dict[Hashable, set[int]] = {}

    def implicit(self, slot_id: int) -> int | None:
        """The index a line for ``slot_id`` without an index would get now."""
        group = self._groups.get(slot_id)
        if group is None:
            return None
        current = self._item.get(group)
        if current is None:
            return 0
        return current + 1 if slot_id in self._fields[group] else current

    def new_item(self, slot_id: int) -> int:
        """The index of a new item of ``slot_id``'s array: the one after the current."""
        current = self._item.get(self._groups.get(slot_id))
        return 0 if current is None else current + 1

    def take(self, slot_id: int, explicit: int | None) -> int | None:
        """Record a line for ``slot_id`` (index as written); return its index."""
        group = self._groups.get(slot_id)
        if group is None:
            return explicit
        index = self.implicit(slot_id) if explicit is None else explicit
        assert index is not None
        fields = self._fields.setdefault(group, set())
        if index != self._item.get(group):
            fields.clear()
            self._item[group] = index
        fields.add(slot_id)
        return index


def always_in_item(slot: Slot) -> bool:
    """Whether every item of ``slot``'s object array has a line for ``slot``.

    True for a required field whose objects between the item and it are required and
    not nullable. An item that opens with such a field is a new item without an
    index (the field repeats); any other item opener needs one.
    """
    if not slot.required:
        return False
    inside = False
    for node in slot.parents:
        if inside and (not node.required or node.nullable):
            return False
        if node.segments and not isinstance(node.segments[-1], str):
            inside = True
    return True


def explicit_indexes(frames: Sequence[FrameValue]) -> list[bool]:
    """Whether each frame's line must write its index.

    An index is written where the grouping rule would give another one, and on the
    first line of every later item of an object array when that line is for a field
    not every item has (:func:`always_in_item`), so a grammar can require it there.
    """
    counter = ItemCounter(slot_groups(f.slot for f in frames))
    current: dict[Hashable, int] = {}
    out: list[bool] = []
    for frame in frames:
        slot, index = frame.slot, frame.index
        explicit = counter.implicit(slot.id) != index
        array = slot.array
        if array is not None and array.items_are_objects and index is not None:
            opens = current.get(array.segments) != index
            current[array.segments] = index
            if opens and index > 0 and not always_in_item(slot):
                explicit = True
        counter.take(slot.id, index if explicit else None)
        out.append(explicit)
    return out
