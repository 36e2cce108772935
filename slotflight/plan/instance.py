"""A valid instance as the frames that write it, syntax-neutral.

:func:`walk_instance` walks the instance along the plan's tree and yields one
:class:`FrameValue` (slot, index, value text) per frame, in plan order, with
object-array items grouped by index. A frame syntax turns those into text
(:meth:`slotflight.syntax.base.Syntax.write`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from pydantic import BaseModel

from .model import Slot, SlotPlan
from .tree import Group, Leaf, ObjectArray, ScalarArray, layout

__all__ = ["FrameValue", "value_text", "walk_instance"]


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


def value_text(slot: Slot, value: Any) -> str:
    """The frame body for ``value`` (JSON-mode data) in ``slot``."""
    if slot.kind == "json":
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return json.dumps(value)
    if isinstance(value, str):
        return value
    raise TypeError(f"slot {slot.id} ({slot.path}): cannot write {type(value).__name__} {value!r}")


def _as_data(instance: Mapping[str, Any] | BaseModel) -> Mapping[str, Any]:
    if isinstance(instance, BaseModel):
        return instance.model_dump(mode="json", by_alias=True)
    if isinstance(instance, Mapping):
        return instance
    raise TypeError(f"expected a mapping or a Pydantic model, got {type(instance).__name__}")


def _child(container: Mapping[str, Any], key: str, where: str) -> Any:
    if not isinstance(container, Mapping):
        raise TypeError(f"{where}: expected an object, got {type(container).__name__}")
    return container.get(key, _ABSENT)


_ABSENT: Final = object()


def _items(container: Mapping[str, Any], key: str, where: str) -> list[Any]:
    """The items of the array at ``key``; none for an absent or ``null`` array."""
    items = _child(container, key, where)
    if items is _ABSENT or items is None:
        return []
    if not isinstance(items, list):
        raise TypeError(f"{where}: expected an array, got {type(items).__name__}")
    return items


def _walk_group(group: Group, data: Mapping[str, Any], index: int | None) -> Iterator[FrameValue]:
    for unit in group.units:
        if isinstance(unit, Leaf):
            value = _child(data, unit.key, unit.slot.path)
            if value is not _ABSENT:
                yield FrameValue(unit.slot, index, value)
        elif isinstance(unit, ScalarArray):
            for i, item in enumerate(_items(data, unit.key, unit.slot.path)):
                yield FrameValue(unit.slot, i, item)
        elif isinstance(unit, Group):
            assert unit.key is not None
            value = _child(data, unit.key, unit.key)
            if value is not _ABSENT and value is not None:
                yield from _walk_group(unit, value, index)
        elif isinstance(unit, ObjectArray):
            for i, item in enumerate(_items(data, unit.key, unit.array.path)):
                if item is not None:
                    yield from _walk_group(unit.item, item, i)


def walk_instance(plan: SlotPlan, instance: Mapping[str, Any] | BaseModel) -> Iterator[FrameValue]:
    """The frames that write ``instance``, in canonical order.

    Absent keys and ``null`` objects or arrays produce no frame (their slots stay
    missing); a ``null`` leaf produces a ``null`` frame.
    """
    yield from _walk_group(layout(plan), _as_data(instance), None)
