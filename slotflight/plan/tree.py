"""The plan as a tree: objects, arrays and slots in plan order.

Slots are numbered depth-first, so every object's slots and every object array's slots
are contiguous in the plan. :func:`layout` turns that flat list back into the tree the
renderer and the grammar walk: a :class:`Group` (an object) holds, in order, leaf
slots, scalar-array slots, nested groups and object arrays (whose ``item`` is the group
of one item's fields, repeated per index). A rest slot is a :class:`Leaf` (key ``""``)
last in its group; a root slot is the root group's only :class:`Leaf` (key ``""``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .model import INDEX, REST, ArrayNode, ObjectNode, Segment, Slot, SlotPlan

__all__ = ["Group", "Leaf", "ObjectArray", "ScalarArray", "Unit", "layout"]


@dataclass(frozen=True)
class Leaf:
    """A slot written once (per item, inside an object array)."""

    slot: Slot
    key: str


@dataclass(frozen=True)
class ScalarArray:
    """A scalar-array slot: one frame per item, ``<id:0>``, ``<id:1>``, …"""

    slot: Slot
    key: str


@dataclass
class Group:
    """An object: the root (``node`` is ``None``), a nested object, or an array item."""

    node: ObjectNode | None
    key: str | None
    units: list[Unit] = field(default_factory=list)

    def slots(self) -> list[Slot]:
        out: list[Slot] = []
        for unit in self.units:
            if isinstance(unit, (Leaf, ScalarArray)):
                out.append(unit.slot)
            elif isinstance(unit, Group):
                out.extend(unit.slots())
            else:
                out.extend(unit.item.slots())
        return out


@dataclass
class ObjectArray:
    """An array of objects: ``item`` is repeated once per index."""

    array: ArrayNode
    key: str
    item: Group


Unit = Leaf | ScalarArray | Group | ObjectArray


def _last_key(segments: tuple[Segment, ...]) -> str:
    if not segments or segments[-1] is REST:
        return ""
    last = segments[-1]
    if not isinstance(last, str):  # pragma: no cover - plans never end a node in INDEX here
        raise ValueError(f"no key at the end of {segments!r}")
    return last


def layout(plan: SlotPlan) -> Group:
    """The tree of ``plan``; leaves keep plan order. Built once per plan and kept."""
    tree = plan._derived.get("tree")
    if tree is None:
        tree = plan._derived["tree"] = _build(plan)
    assert isinstance(tree, Group)
    return tree


def _build(plan: SlotPlan) -> Group:
    root = Group(node=None, key=None)
    for slot in plan.slots:
        group = root
        for parent in slot.parents:
            if parent.segments and parent.segments[-1] is INDEX:
                array_segments = parent.segments[:-1]
                last = group.units[-1] if group.units else None
                if not (isinstance(last, ObjectArray) and last.array.segments == array_segments):
                    if slot.array is None:  # pragma: no cover - compiler invariant
                        raise ValueError(f"slot {slot.id} sits in an item but has no array")
                    last = ObjectArray(
                        array=slot.array,
                        key=_last_key(array_segments),
                        item=Group(node=parent, key=None),
                    )
                    group.units.append(last)
                group = last.item
            else:
                last_group = group.units[-1] if group.units else None
                if not (isinstance(last_group, Group) and last_group.node == parent):
                    last_group = Group(node=parent, key=_last_key(parent.segments))
                    group.units.append(last_group)
                group = last_group
        if slot.array is not None and not slot.array.items_are_objects:
            group.units.append(ScalarArray(slot=slot, key=_last_key(slot.array.segments)))
        else:
            group.units.append(Leaf(slot=slot, key=_last_key(slot.segments)))
    return root
