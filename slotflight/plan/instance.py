"""A valid instance as the frames that write it, syntax-neutral.

:func:`walk_instance` walks the instance along the plan's tree and yields one
:class:`FrameValue` (slot, index, value) per frame, in plan order, with object-array
items grouped by index. A frame syntax turns those into text
(:meth:`slotflight.syntax.base.Syntax.write`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from .model import ArrayNode, Slot, SlotPlan, enum_key
from .pydantic_schema import validation_data
from .tree import Group, Leaf, ObjectArray, ScalarArray, layout

__all__ = ["FrameValue", "UnexpressibleValue", "value_text", "walk_instance"]


@dataclass(frozen=True)
class FrameValue:
    """One frame to write: ``slot`` at ``index`` (``None`` unless repeatable), its
    ``value`` (JSON-mode data) and ``text``, the value as a frame body."""

    slot: Slot
    index: int | None
    value: Any

    @property
    def text(self) -> str:
        return value_text(self.slot, self.value)

    @property
    def pointer(self) -> str:
        """The concrete JSON Pointer this frame fills (``/items/1/owner``, ``/tags/0``)."""
        return self.slot.concrete_pointer(self.index)


class UnexpressibleValue(TypeError, ValueError):
    """The instance holds something no frame can write (a wrong type for its slot, a key
    outside the plan, an empty item, text the assembler would trim). A ``TypeError`` (as
    the renderer always raised for wrong shapes) and a ``ValueError``."""


def value_text(slot: Slot, value: Any) -> str:
    """The frame body for ``value`` (JSON-mode data) in ``slot``.

    Raises :class:`UnexpressibleValue` when the slot cannot hold the value: a type other
    than the slot's kind, ``null`` in a slot that is not nullable, a number that is not
    finite, text with leading or trailing white space or a carriage return (the
    assembler trims and normalises them), or the text ``null`` in a nullable text slot.
    An enum member is written as its JSON text, a text member bare, except a text member
    that written bare would read as another member (``"1"`` beside ``1``, ``"null"`` in a
    nullable slot): that one is written as a JSON string. O(1) per value.
    """
    if slot.kind == "json":
        try:
            return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise _unexpressible(slot, f"not JSON: {exc}") from None
    if value is None:
        if not slot.nullable:
            raise _unexpressible(slot, "null in a slot that is not nullable")
        return "null"
    kind = slot.kind
    if kind == "enum":
        if enum_key(value) not in slot._enum_keys:  # JSON equality, O(1)
            raise _unexpressible(slot, f"{value!r} is not one of its values")
        if isinstance(value, str):
            # bare, unless that text would read as another member
            return json.dumps(value, ensure_ascii=False) if value in slot._enum_quoted else value
        return json.dumps(value)
    if kind == "boolean":
        if not isinstance(value, bool):
            raise _unexpressible(slot, f"expected true or false, got {value!r}")
        return "true" if value else "false"
    if kind in ("integer", "number"):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise _unexpressible(slot, f"expected a number, got {value!r}")
        if isinstance(value, float) and not math.isfinite(value):
            raise _unexpressible(slot, f"{value} is not a JSON number")
        if kind == "integer" and isinstance(value, float) and not value.is_integer():
            raise _unexpressible(slot, f"expected an integer, got {value!r}")
        # a float stays a float (2.0): the assembler keeps a number as written
        return str(value) if isinstance(value, int) else json.dumps(value)
    if not isinstance(value, str):
        raise _unexpressible(slot, f"expected text, got {value!r}")
    if value != value.strip() or "\r" in value:
        raise _unexpressible(slot, "text with leading or trailing white space or \\r")
    if slot.nullable and value == "null":
        raise _unexpressible(slot, "the text 'null' reads back as null")
    return value


def _frame(slot: Slot, index: int | None, value: Any) -> FrameValue:
    value_text(slot, value)  # raises UnexpressibleValue now, not when written
    return FrameValue(slot, index, value)


def _unexpressible(slot: Slot, why: str) -> UnexpressibleValue:
    return UnexpressibleValue(f"slot {slot.id} ({slot.path or 'the output'}): {why}")


_ABSENT: Final = object()


def _items(data: Mapping[str, Any], key: str, array: ArrayNode) -> list[Any]:
    """The items of the array at ``key``; none for an absent or (nullable) ``null`` one."""
    items = data.get(key, _ABSENT)
    if items is _ABSENT or (items is None and array.nullable):
        return []
    if not isinstance(items, list):
        raise UnexpressibleValue(f"{array.path}: expected an array, got {items!r:.60}")
    return items


def _walk_group(group: Group, data: Any, index: int | None, where: str) -> Iterator[FrameValue]:
    """The frames of one object. Keys outside the plan go to the group's rest slot."""
    if not isinstance(data, Mapping):
        raise UnexpressibleValue(f"{where or 'the output'}: expected an object, got {data!r:.60}")
    declared: set[str] = set()
    rest: Slot | None = None
    written = 0
    for unit in group.units:
        if isinstance(unit, Leaf):
            if unit.slot.is_rest:
                rest = unit.slot
                continue
            declared.add(unit.key)
            value = data.get(unit.key, _ABSENT)
            if value is not _ABSENT:
                written += 1
                yield _frame(unit.slot, index, value)
        elif isinstance(unit, ScalarArray):
            assert unit.slot.array is not None
            declared.add(unit.key)
            for i, item in enumerate(_items(data, unit.key, unit.slot.array)):
                written += 1
                yield _frame(unit.slot, i, item)
        elif isinstance(unit, Group):
            assert unit.key is not None and unit.node is not None
            declared.add(unit.key)
            value = data.get(unit.key, _ABSENT)
            if value is _ABSENT or (value is None and unit.node.nullable):
                continue
            frames = list(_walk_group(unit, value, index, unit.node.pointer))
            written += len(frames)
            yield from frames
        elif isinstance(unit, ObjectArray):
            declared.add(unit.key)
            for i, item in enumerate(_items(data, unit.key, unit.array)):
                frames = list(_walk_group(unit.item, item, i, f"{unit.array.pointer}/{i}"))
                if not frames:
                    raise UnexpressibleValue(f"{unit.array.path}[{i}]: an empty item has no frame")
                written += len(frames)
                yield from frames
    extras = {k: v for k, v in data.items() if k not in declared}
    if extras or (rest is not None and not written and group.node is not None):
        if rest is None:
            names = ", ".join(repr(k) for k in list(extras)[:3])
            raise UnexpressibleValue(f"{where or 'the output'}: no slot for the key(s) {names}")
        yield _frame(rest, index, extras)


def walk_instance(plan: SlotPlan, instance: Any) -> Iterator[FrameValue]:
    """The frames that write ``instance``, in canonical order.

    Absent keys, ``null`` nullable objects or arrays and objects with no field set produce
    no frame (their slots stay missing); a ``null`` leaf produces a ``null`` frame; keys
    outside ``properties`` go to the object's rest slot (an object or item with no field
    set is written as its rest slot's ``{}`` when it has one; an item without one cannot
    be written). A plan whose root is one slot writes the whole instance there. A model
    instance is written as its validation reads it (:func:`validation_data`: validation
    aliases as keys, excluded fields in, computed fields out). Raises
    :class:`UnexpressibleValue` for what no frame can write.
    """
    data = validation_data(instance)
    root = plan.root_slot
    if root is not None:
        yield _frame(root, None, data)
        return
    yield from _walk_group(layout(plan), data, None, "")
