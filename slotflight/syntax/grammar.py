"""A GBNF grammar (llama.cpp syntax) for the frame streams a plan admits.

The grammar follows the plan's tree (:mod:`slotflight.plan.tree`): frames in plan order,
object-array items grouped by index with literal indexes, item counts from
``minItems``/``maxItems``, optional slots optional, an optional object either absent or
present with its required fields. Frame bodies have the shape of their kind: enum
values spelled out, integer/number/boolean/date/time/UUID shapes, a JSON value on one
line for ``json`` slots, and text whose lines never start with ``<`` for strings (so a
body can never contain a close tag). Length bounds, patterns and numeric bounds are
left to validation.

The v2 grammar (:class:`_LineBuilder`) has the same structure with v2 lines: ``ID`` and
a blank before each value, string values continued on ``|`` lines, no index except on
the first line of a later object-array item whose field not every item has (as
:func:`slotflight.syntax.lines.format_v2` writes them), and the ``end`` line last.
"""

from __future__ import annotations

import re
from typing import ClassVar, Final

from ..plan.limits import limit_error
from ..plan.model import Slot, SlotPlan
from ..plan.tree import Group, Leaf, ObjectArray, ScalarArray, layout
from .lines import END_LINE, always_in_item
from .render import frame_tag, value_text

__all__ = ["MAX_GRAMMAR_ITEMS", "UNBOUNDED_ITEMS", "grammar"]

#: Items admitted for an array without ``maxItems`` (or more when ``minItems`` is larger).
UNBOUNDED_ITEMS: Final = 8
#: Literal indexes are spelled out per item, so a huge ``maxItems`` is cut to this.
MAX_GRAMMAR_ITEMS: Final = 256

_SHARED_RULES: Final = {
    "text": 'text ::= text-line ("\\n" text-line)*',
    "text-line": "text-line ::= ([^<\\r\\n] [^\\r\\n]*)?",
    "integer": 'integer ::= "-"? natural',
    "natural": 'natural ::= "0" | [1-9] [0-9]*',
    "number": 'number ::= "-"? natural ("." [0-9]+)? ([eE] [-+]? [0-9]+)?',
    "boolean": 'boolean ::= "true" | "false"',
    "date": 'date ::= [0-9] [0-9] [0-9] [0-9] "-" ("0" [1-9] | "1" [0-2]) "-" ("0" [1-9] | [12] [0-9] | "3" [01])',
    "time": 'time ::= hour ":" sixty (":" sixty ("." [0-9]+)?)? zone?',
    "hour": 'hour ::= [01] [0-9] | "2" [0-3]',
    "sixty": "sixty ::= [0-5] [0-9]",
    "zone": 'zone ::= [zZ] | [+-] hour ":"? sixty',
    "datetime": "datetime ::= date [Tt ] time",
    "uuid": 'uuid ::= hex4 hex4 "-" hex4 "-" hex4 "-" hex4 "-" hex4 hex4 hex4',
    "hex4": "hex4 ::= [0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F]",
    "json": 'json ::= json-object | json-array | json-string | number | boolean | "null"',
    "json-object": ('json-object ::= "{" json-ws (json-member ("," json-ws json-member)*)? "}"'),
    "json-member": 'json-member ::= json-string json-ws ":" json-ws json json-ws',
    "json-array": 'json-array ::= "[" json-ws (json json-ws ("," json-ws json json-ws)*)? "]"',
    "json-string": (
        'json-string ::= "\\"" ([^"\\\\\\x7F\\x00-\\x1F] | "\\\\" (["\\\\/bfnrt] | "u" hex4))* "\\""'
    ),
    "json-ws": "json-ws ::= [ \\t]*",
    "line-text": 'line-text ::= (" " line)? ("\\n|" line)*',
    "line": "line ::= [^\\r\\n]*",
}
_RULE_NEEDS: Final = {
    "text": ("text-line",),
    "integer": ("natural",),
    "number": ("natural",),
    "time": ("hour", "sixty", "zone"),
    "zone": ("hour", "sixty"),
    "datetime": ("date", "time"),
    "uuid": ("hex4",),
    "json": ("json-object", "json-array", "json-string", "number", "boolean"),
    "json-object": ("json-member", "json-ws"),
    "json-member": ("json-string", "json-ws", "json"),
    "json-array": ("json-ws", "json"),
    "json-string": ("hex4",),
    "line-text": ("line",),
}
_KIND_RULES: Final = {
    "string": "text",
    "integer": "integer",
    "number": "number",
    "boolean": "boolean",
    "date": "date",
    "datetime": "datetime",
    "time": "time",
    "uuid": "uuid",
    "json": "json",
}


def literal(text: str) -> str:
    """``text`` as a GBNF string literal."""
    out = ['"']
    for ch in text:
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02X}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


class _Unit:
    """One part of a sequence: ``present`` matches it with at least one frame.

    ``opener`` is the form it takes when it opens an array item (v2 may need an index
    there); the same as ``present`` unless given.
    """

    __slots__ = ("opener", "optional", "present")

    def __init__(self, present: str, optional: bool, opener: str | None = None) -> None:
        self.present = present
        self.optional = optional
        self.opener = present if opener is None else opener

    def in_sequence(self) -> str:
        return f"({self.present})?" if self.optional else self.present


class _Builder:
    #: Whether an array item's first frame is written in its opener form (v2 lines).
    _item_openers: ClassVar[bool] = False

    def __init__(self, plan: SlotPlan, max_string_chars: int | None = None) -> None:
        self.plan = plan
        self.max_string_chars = max_string_chars
        self.rules: dict[str, str] = {}
        self.shared: set[str] = set()

    def _short_string(self, slot: Slot) -> tuple[int, int] | None:
        """``(min, max)`` characters of a one-line string value, in compact mode (at least
        one: an empty value is what a small model falls back to)."""
        if self.max_string_chars is None:
            return None
        most = self.max_string_chars
        bound = slot.constraints.get("maxLength")
        if isinstance(bound, int):
            most = min(most, bound)
        least = slot.constraints.get("minLength")
        least = max(least, 1) if isinstance(least, int) else 1
        return (min(least, most), max(most, 1))

    def build(self) -> str:
        body = self._root(self._sequence(self._units(layout(self.plan), None)))
        lines = [f"root ::= {body}"]
        used = _referenced(body, self.rules)
        lines.extend(f"{name} ::= {rule}" for name, rule in self.rules.items() if name in used)
        lines.extend(_SHARED_RULES[name] for name in _SHARED_RULES if name in self.shared)
        return self._bounded("\n".join(lines) + "\n")

    def _bounded(self, text: str) -> str:
        """``text``, or :class:`SchemaError` when it passes ``max_grammar_chars``. Checked
        on every alternative as it is built, so an exponential grammar stops early."""
        self._check_size(len(text))
        return text

    def _check_size(self, chars: int) -> None:
        bound = self.plan.limits.max_grammar_chars
        if chars > bound:
            raise limit_error(
                "max_grammar_chars", f"the grammar for this plan has more than {bound} characters"
            )

    def _root(self, body: str) -> str:
        return body or literal("")

    def _need(self, rule: str) -> None:
        if rule not in self.shared:
            self.shared.add(rule)
            for dependency in _RULE_NEEDS.get(rule, ()):
                self._need(dependency)

    # -- values and frames ----------------------------------------------------------

    def _value_rule(self, slot: Slot) -> str:
        name = f"v{slot.id}"
        if name not in self.rules:
            self.rules[name] = self._value_body(slot)
        return name

    def _value_body(self, slot: Slot) -> str:
        short = self._short_string(slot) if slot.kind == "string" else None
        if short is not None:
            least, most = short
            body = f"[^<\\r\\n] [^\\r\\n]{{{max(least - 1, 0)},{most - 1}}}"
            return body if least > 0 else f"({body})?"
        small = _small_range(slot) if slot.kind == "integer" else None
        if small is not None:
            body = " | ".join(literal(str(n)) for n in small)
            return f'{body} | "null"' if slot.nullable else body
        if slot.kind == "enum":
            body = " | ".join(literal(value_text(slot, v)) for v in slot.enum or ())
        else:
            rule = _KIND_RULES[slot.kind]
            if rule == "integer" and _non_negative(slot):
                rule = "natural"
            self._need(rule)
            body = rule
        if slot.nullable and slot.kind not in ("string", "json"):
            body = f'{body} | "null"'
        return body

    def _frame_rule(self, slot: Slot, index: int | None) -> str:
        name = f"f{slot.id}" if index is None else f"f{slot.id}-{index}"
        if name not in self.rules:
            tag = frame_tag(slot.id, index)
            value = self._value_rule(slot)
            opening, closing = literal(f"<{tag}>\n"), literal(f"\n</{tag}>\n")
            self.rules[name] = f"{opening} {value} {closing}"
        return name

    # -- structure ------------------------------------------------------------------

    @staticmethod
    def _sequence(units: list[_Unit]) -> str:
        return " ".join(u.in_sequence() for u in units)

    def _nonempty(self, units: list[_Unit], *, opening: bool = False) -> str | None:
        found = self._alternatives(units, opening=opening)
        return None if found is None else self._bounded(found)

    @staticmethod
    def _alternatives(units: list[_Unit], *, opening: bool = False) -> str | None:
        """Matches ``units`` in order with at least one frame; ``None`` if impossible.

        ``opening``: the first frame opens an array item (written in its opener form).
        """
        if not units:
            return None
        if opening:
            choices = []
            for i, unit in enumerate(units):
                choices.append(" ".join([unit.opener] + [u.in_sequence() for u in units[i + 1 :]]))
                if not unit.optional:
                    break
            return "(" + " | ".join(choices) + ")" if len(choices) > 1 else choices[0]
        if any(not u.optional for u in units):
            return " ".join(u.in_sequence() for u in units)
        choices = [
            " ".join([units[i].present] + [u.in_sequence() for u in units[i + 1 :]])
            for i in range(len(units))
        ]
        return "(" + " | ".join(choices) + ")" if len(choices) > 1 else choices[0]

    def _units(self, group: Group, index: int | None) -> list[_Unit]:
        units: list[_Unit] = []
        for unit in group.units:
            made: _Unit | None
            if isinstance(unit, Leaf):
                made = self._leaf(unit.slot, index)
            elif isinstance(unit, ScalarArray):
                made = self._scalar_array(unit)
            elif isinstance(unit, Group):
                made = self._object(unit, index)
            else:
                made = self._object_array(unit)
            if made is not None:
                units.append(made)
        return units

    def _leaf(self, slot: Slot, index: int | None) -> _Unit:
        return _Unit(self._frame_rule(slot, index), not slot.required)

    def _object(self, group: Group, index: int | None) -> _Unit | None:
        inner = self._units(group, index)
        present = self._nonempty(inner)
        if present is None:
            return None
        node = group.node
        always = node is not None and node.required and not node.nullable
        if always and any(not u.optional for u in inner):
            return _Unit(self._sequence(inner), optional=False)
        return _Unit(present, optional=True)

    def _counted(self, name: str, items: list[str], low: int, required: bool) -> _Unit | None:
        """At least ``max(low, 1)`` of ``items`` in order; each further one optional."""
        if not items:
            return None
        head = max(low, 1)
        self.rules[name] = " ".join(items[:head]) + (
            f" {name}-from{head}?" if head < len(items) else ""
        )
        for k in range(head, len(items)):
            more = f" {name}-from{k + 1}?" if k + 1 < len(items) else ""
            self.rules[f"{name}-from{k}"] = items[k] + more
        return _Unit(name, optional=not (required and low > 0))

    def _item_count(self, low: int, high: int | None) -> int:
        if high is None:
            return max(low, UNBOUNDED_ITEMS)
        return min(high, max(low, MAX_GRAMMAR_ITEMS))

    def _scalar_array(self, unit: ScalarArray) -> _Unit | None:
        slot = unit.slot
        array = slot.array
        assert array is not None
        count = self._item_count(array.min_items, array.max_items)
        items = [self._item_frame_rule(slot, k) for k in range(count)]
        return self._counted(f"list{slot.id}", items, array.min_items, array.required)

    def _item_frame_rule(self, slot: Slot, index: int) -> str:
        """The frame of item ``index`` of a scalar array (v1 tags carry the index)."""
        return self._frame_rule(slot, index)

    def _object_array(self, unit: ObjectArray) -> _Unit | None:
        array = unit.array
        first = unit.item.slots()[0].id
        count = self._item_count(array.min_items, array.max_items)
        items: list[str] = []
        size = 0
        for k in range(count):
            present = self._nonempty(self._units(unit.item, k), opening=self._item_openers)
            if present is None:
                return None
            size += len(present)
            self._check_size(size)
            rule = f"item{first}-{k}"
            self.rules[rule] = present
            items.append(rule)
        return self._counted(f"list{first}", items, array.min_items, array.required)


_TOKEN = re.compile(r'"(?:\\.|[^"\\])*"|\[(?:\\.|[^\]\\])*\]|([A-Za-z][A-Za-z0-9-]*)')


def _referenced(body: str, rules: dict[str, str]) -> set[str]:
    """The names in ``rules`` that ``body`` reaches (unused rules are left out)."""
    seen: set[str] = set()
    todo = [body]
    while todo:
        for m in _TOKEN.finditer(todo.pop()):
            name = m.group(1)
            if name and name in rules and name not in seen:
                seen.add(name)
                todo.append(rules[name])
    return seen


_SMALL_RANGE: Final = 32


def _small_range(slot: Slot) -> range | None:
    """The allowed integers, spelled out, when the bounds leave only a few."""
    c = slot.constraints
    low = c.get("minimum")
    if isinstance(c.get("exclusiveMinimum"), int):
        low = c["exclusiveMinimum"] + 1
    high = c.get("maximum")
    if isinstance(c.get("exclusiveMaximum"), int):
        high = c["exclusiveMaximum"] - 1
    if not isinstance(low, int) or not isinstance(high, int) or isinstance(low, bool):
        return None
    if high < low or high - low >= _SMALL_RANGE or c.get("multipleOf") not in (None, 1):
        return None
    return range(low, high + 1)


def _non_negative(slot: Slot) -> bool:
    low = slot.constraints.get("minimum")
    exclusive = slot.constraints.get("exclusiveMinimum")
    return (isinstance(low, (int, float)) and low >= 0) or (
        isinstance(exclusive, (int, float)) and exclusive >= -1
    )


class _LineBuilder(_Builder):
    """The v2 grammar: the v1 structure, written as v2 lines."""

    _item_openers = True

    def _root(self, body: str) -> str:
        return f'{body} {literal(END_LINE)} "\\n"?'.lstrip()

    def _value_body(self, slot: Slot) -> str:
        short = self._short_string(slot) if slot.kind == "string" else None
        if short is not None:
            least, most = short
            body = f'" " [^\\r\\n]{{{max(least, 1)},{most}}}'
            return body if least > 0 else f"({body})?"
        if slot.kind == "string":
            self._need("line-text")
            return "line-text"
        return f'" " ({super()._value_body(slot)})'

    def _frame_rule(self, slot: Slot, index: int | None) -> str:
        name = f"f{slot.id}" if index is None else f"f{slot.id}-{index}"
        if name not in self.rules:
            head = literal(frame_tag(slot.id, index))
            self.rules[name] = f'{head} {self._value_rule(slot)} "\\n"'
        return name

    def _leaf(self, slot: Slot, index: int | None) -> _Unit:
        plain = self._frame_rule(slot, None)
        if index is None or index == 0 or always_in_item(slot):
            return _Unit(plain, not slot.required)
        return _Unit(plain, not slot.required, opener=self._frame_rule(slot, index))

    def _object(self, group: Group, index: int | None) -> _Unit | None:
        made = super()._object(group, index)
        if made is None or not index:
            return made
        opener = self._nonempty(self._units(group, index), opening=True)
        return _Unit(made.present, made.optional, opener=opener)

    def _item_frame_rule(self, slot: Slot, index: int) -> str:
        return self._frame_rule(slot, None)  # the line order gives a scalar item its index


_BUILDERS: Final = {"v1": _Builder, "v2": _LineBuilder}


def grammar(plan: SlotPlan, syntax: str = "v1", *, max_string_chars: int | None = None) -> str:
    """The GBNF grammar (root rule ``root``) of the frame streams valid for ``plan``.

    ``max_string_chars``: compact mode for small models. String values are then one
    line of at most that many characters (and at most the slot's ``maxLength``), which
    stops a small model from running on inside a value until its token limit. The
    default grammar admits every valid frame stream, multi-line strings included.
    """
    builder = _BUILDERS.get(syntax)
    if builder is None:
        raise ValueError(f"unknown frame syntax {syntax!r} (known: v1, v2)")
    if max_string_chars is not None and max_string_chars < 1:
        raise ValueError(f"max_string_chars must be >= 1, got {max_string_chars}")
    return builder(plan, max_string_chars).build()
