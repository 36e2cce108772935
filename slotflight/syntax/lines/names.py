"""Wire names of slots in the named line syntaxes: the shortest unambiguous dotted path.

A slot's path is the keys from the root to it, array positions left out
(``action_items[].owner`` → ``action_items.owner``). Its name is the shortest suffix of
that path that no other slot's path also ends with (``owner``), else its whole path,
else its whole path with ``_2``, ``_3`` … appended. Characters other than letters,
digits, ``_`` and ``-`` become ``_`` (so ``.`` only ever separates keys, and a name
never holds a blank, a colon, a bracket or a line break); an empty key becomes ``_``.
A plan's root slot is named ``value``; an object's rest slot (its keys outside
``properties``) is named as a key ``other_keys`` inside it.

Names are derived once per plan and kept with it.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping

from ...plan.model import Slot, SlotPlan

__all__ = ["NAME_CHARS", "list_names", "slot_names"]

#: A character a wire name may hold (``.`` joins keys).
NAME_CHARS = r"[\w.-]"
_UNSAFE = re.compile(r"[^\w-]+")


def _path(slot: Slot) -> list[str]:
    keys = [s for s in slot.segments if isinstance(s, str)]
    if slot.is_rest:
        keys.append("other_keys")  # the object's keys outside its properties
    return [_UNSAFE.sub("_", k) or "_" for k in keys] or ["value"]  # the root slot


def slot_names(plan: SlotPlan) -> Mapping[int, str]:
    """Slot id → wire name, for every slot of ``plan``."""
    cached = plan._derived.get("line_names")
    if cached is None:
        cached = plan._derived["line_names"] = _names(plan)
    assert isinstance(cached, dict)
    return cached


def _names(plan: SlotPlan) -> dict[int, str]:
    paths = {s.id: _path(s) for s in plan.slots}
    suffixes = {sid: [".".join(p[-k:]) for k in range(1, len(p) + 1)] for sid, p in paths.items()}
    seen = Counter(name for names in suffixes.values() for name in set(names))
    out: dict[int, str] = {}
    taken: set[str] = set()
    for slot in plan.slots:
        unique = next((n for n in suffixes[slot.id] if seen[n] == 1), None)
        if unique is not None:
            out[slot.id] = unique
            taken.add(unique)
    for slot in plan.slots:
        if slot.id not in out:
            out[slot.id] = _numbered(".".join(paths[slot.id]), taken)
    return out


def _numbered(base: str, taken: set[str]) -> str:
    """``base``, else ``base_2``, ``base_3`` …: the first not in ``taken`` (added)."""
    name, n = base, 1
    while name in taken:
        n += 1
        name = f"{base}_{n}"
    taken.add(name)
    return name


def list_names(plan: SlotPlan) -> Mapping[tuple[object, ...], str]:
    """Array segments → wire name, for every list of objects of ``plan`` (block syntax
    ``v4`` writes it alone on the line that opens the list).

    The shortest suffix of the list's key path that ends no other list's path and is no
    slot's name (:func:`slot_names`), else the whole path with ``_2``, ``_3`` …; a list
    at the root is named ``value``.
    """
    cached = plan._derived.get("line_list_names")
    if cached is None:
        cached = plan._derived["line_list_names"] = _list_names(plan)
    assert isinstance(cached, dict)
    return cached


def _list_names(plan: SlotPlan) -> dict[tuple[object, ...], str]:
    taken = set(slot_names(plan).values())
    arrays = [a for a in plan.arrays if a.items_are_objects]
    paths = {
        a.segments: [_UNSAFE.sub("_", k) or "_" for k in a.segments if isinstance(k, str)]
        or ["value"]
        for a in arrays
    }
    suffixes = {key: [".".join(p[-k:]) for k in range(1, len(p) + 1)] for key, p in paths.items()}
    seen = Counter(name for names in suffixes.values() for name in set(names))
    out: dict[tuple[object, ...], str] = {}
    for array in arrays:
        found = next((n for n in suffixes[array.segments] if seen[n] == 1 and n not in taken), None)
        if found is None:
            found = _numbered(".".join(paths[array.segments]), taken)
        out[array.segments] = found
        taken.add(found)
    return out
