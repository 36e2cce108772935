"""Server-owned object state: a JSON tree changed only through recorded operations.

Every change returns the RFC 6902 operations that made it, so events can carry a
patch without diffing. The tree holds plain JSON values only; the one string whose
frame is open is kept outside it (a :class:`TextBuffer`) and written in when a
snapshot is taken, so streaming a long string never rebuilds it.

Array positions: an object-array item is placed at the next free position the first
time any of its fields arrives; later fields with the same frame index go to the same
item. Scalar-array items are appended in arrival order (the pointer template
``/tags/-``). Paths in events are state positions, so they always address the state.

The root is ``{}`` for an object plan. For a plan whose single slot is the root (an array,
scalar or union schema) it is ``null`` until that slot has a value, and a failed value
puts ``null`` back: changes are ``replace`` operations on the path ``""``. A rest slot's
value (a JSON object) is merged into its object, one ``add`` per key.
"""

from __future__ import annotations

from typing import Any

import jsonpointer

from ..plan.model import INDEX, REST, Slot
from .events import PatchOp, TextBuffer

__all__ = ["ObjectState", "Place", "copy_json"]

Container = dict[str, Any] | list[Any]


def copy_json(value: Any) -> Any:
    """A copy of a JSON tree (strings and numbers are shared, being immutable)."""
    if isinstance(value, dict):
        return {k: copy_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [copy_json(v) for v in value]
    return value


class Place:
    """Where one slot value lives: its container, key and concrete pointer.

    A rest slot's place has ``key`` :data:`REST`: its container is the object itself.
    """

    __slots__ = ("container", "key", "pointer")

    def __init__(self, container: Container, key: str | int | object, pointer: str) -> None:
        self.container = container
        self.key = key
        self.pointer = pointer

    def exists(self) -> bool:
        if self.key is REST:
            return False
        if isinstance(self.container, dict):
            return self.key in self.container
        assert isinstance(self.key, int)
        return self.key < len(self.container)


class ObjectState:
    """The output object under construction."""

    def __init__(self, root: dict[str, Any] | None) -> None:
        # the root, boxed so that a root slot's place can replace it
        self._box: list[Any] = [root]
        # concrete array pointer -> {frame index: position}
        self._positions: dict[str, dict[int, int]] = {}
        self._open: tuple[Place, TextBuffer] | None = None

    # -- reading -------------------------------------------------------------------

    @property
    def root(self) -> Any:
        return self._box[0]

    def snapshot(self) -> Any:
        """A copy of the state, with the open string's text so far written in."""
        self._sync_open()
        return copy_json(self._box[0])

    def reset(self, root: Any) -> None:
        """Put back a root taken with :meth:`snapshot` at the end of a pass (a change
        that did not hold); array positions are not touched."""
        self._box[0] = root

    def _sync_open(self) -> None:
        if self._open is not None:
            place, buffer = self._open
            _store(place, buffer.text())

    def resolve(self, pointer: str) -> Any:
        """The value at a concrete pointer (raises ``jsonpointer.JsonPointerException``)."""
        self._sync_open()
        return jsonpointer.resolve_pointer(self.root, pointer)

    def contains(self, pointer: str) -> bool:
        try:
            self.resolve(pointer)
        except jsonpointer.JsonPointerException:
            return False
        return True

    def array_length(self, segments: tuple[Any, ...], index: int | None = None) -> int:
        """Length of the array at ``segments`` (0 when absent)."""
        node: Any = self.root
        for seg in segments:
            if seg is INDEX:
                if not isinstance(node, list) or index is None or index >= len(node):
                    return 0
                node = node[index]
            elif isinstance(node, dict) and seg in node:
                node = node[seg]
            else:
                return 0
        return len(node) if isinstance(node, list) else 0

    def position(self, array_pointer: str, frame_index: int) -> int | None:
        """The state position of an object-array item, by its frame index."""
        return self._positions.get(array_pointer, {}).get(frame_index)

    def forget_position(self, array_pointer: str, position: int) -> None:
        """The item at ``position`` was taken out: no frame index maps to it any more."""
        positions = self._positions.get(array_pointer, {})
        for index in [i for i, p in positions.items() if p == position]:
            del positions[index]

    def reset_positions(self, array_pointer: str, length: int) -> None:
        """Make frame index ``i`` mean position ``i`` again (before a retry)."""
        self._positions[array_pointer] = {i: i for i in range(length)}

    # -- locating (creating parents) -------------------------------------------------

    def place(self, slot: Slot, index: int | None, ops: list[PatchOp]) -> Place:
        """Where ``slot`` (item ``index``) goes, creating missing parents (recorded)."""
        if not slot.segments:
            return Place(self._box, 0, "")
        node: Container = self.root
        pointer = ""
        segs = slot.segments
        last = len(segs) - 1
        i = 0
        while i < last:
            seg = segs[i]
            assert isinstance(seg, str)
            child_pointer = pointer + "/" + jsonpointer.escape(seg)
            assert isinstance(node, dict)
            if segs[i + 1] is INDEX:
                arr = node.get(seg)
                if not isinstance(arr, list):
                    arr = node[seg] = []
                    ops.append(PatchOp("add", child_pointer, []))
                if i + 1 == last:  # scalar array: append position
                    return Place(arr, len(arr), f"{child_pointer}/{len(arr)}")
                assert index is not None
                positions = self._positions.setdefault(child_pointer, {})
                pos = positions.get(index)
                if pos is None or pos >= len(arr):
                    pos = positions[index] = len(arr)
                    arr.append({})
                    ops.append(PatchOp("add", f"{child_pointer}/{pos}", {}))
                node = arr[pos]
                pointer = f"{child_pointer}/{pos}"
                i += 2
                continue
            child = node.get(seg)
            if not isinstance(child, dict):
                child = node[seg] = {}
                ops.append(PatchOp("add", child_pointer, {}))
            node = child
            pointer = child_pointer
            i += 1
        key = segs[last]
        assert isinstance(node, dict)
        if key is REST:
            return Place(node, REST, pointer)
        assert isinstance(key, str)
        return Place(node, key, pointer + "/" + jsonpointer.escape(key))

    # -- changing -------------------------------------------------------------------

    def put(self, place: Place, value: Any, ops: list[PatchOp]) -> None:
        """Set a value (``add``, or ``replace`` when something is there); a rest slot's
        object is merged key by key."""
        if place.key is REST:
            assert isinstance(place.container, dict) and isinstance(value, dict)
            for key, item in value.items():
                self.put(
                    Place(place.container, key, place.pointer + "/" + jsonpointer.escape(key)),
                    item,
                    ops,
                )
            return
        exists = place.exists()
        _store(place, value)
        ops.append(PatchOp("replace" if exists else "add", place.pointer, copy_json(value)))

    def open_text(self, place: Place, buffer: TextBuffer, ops: list[PatchOp]) -> None:
        """Start streaming a string into ``place`` (shown as ``""`` at first)."""
        self.put(place, "", ops)
        self._open = (place, buffer)

    def close_text(self) -> None:
        self._sync_open()
        self._open = None

    def remove(self, place: Place, ops: list[PatchOp]) -> None:
        """Take a value out (a failed slot's value never stays in the state)."""
        if self._open is not None and self._open[0] is place:
            self._open = None
        if not place.exists():
            return
        if place.container is self._box:  # the root slot: back to null
            self._box[0] = None
            ops.append(PatchOp("replace", "", None))
            return
        if isinstance(place.container, dict):
            assert isinstance(place.key, str)
            del place.container[place.key]
        else:
            assert isinstance(place.key, int)
            del place.container[place.key]
        ops.append(PatchOp("remove", place.pointer))

    def set_pointer(self, pointer: str, value: Any, ops: list[PatchOp]) -> None:
        """Set the value at a concrete pointer whose parent exists (defaults)."""
        if not pointer:
            self.put(Place(self._box, 0, ""), value, ops)
            return
        parts = jsonpointer.JsonPointer(pointer).parts
        parent: Any = self.root
        for part in parts[:-1]:
            parent = parent[int(part)] if isinstance(parent, list) else parent[part]
        key: str | int = int(parts[-1]) if isinstance(parent, list) else parts[-1]
        self.put(Place(parent, key, pointer), value, ops)

    def remove_pointer(self, pointer: str, ops: list[PatchOp]) -> None:
        if not pointer:
            self.remove(Place(self._box, 0, ""), ops)
            return
        parts = jsonpointer.JsonPointer(pointer).parts
        parent: Any = self.root
        try:
            for part in parts[:-1]:
                parent = parent[int(part)] if isinstance(parent, list) else parent[part]
        except (KeyError, IndexError, ValueError, TypeError):
            return
        key: str | int = int(parts[-1]) if isinstance(parent, list) else parts[-1]
        self.remove(Place(parent, key, pointer), ops)


def _store(place: Place, value: Any) -> None:
    if isinstance(place.container, dict):
        assert isinstance(place.key, str)
        place.container[place.key] = value
    else:
        assert isinstance(place.key, int)
        if place.key == len(place.container):
            place.container.append(value)
        else:
            place.container[place.key] = value
