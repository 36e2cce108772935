"""GBNF (llama.cpp grammar) building blocks shared by every frame syntax.

:class:`GrammarBuilder` follows the plan's tree (:mod:`slotflight.plan.tree`): frames in
plan order, object-array items grouped by index, item counts from
``minItems``/``maxItems``, optional slots optional, an optional object either absent or
present with its required fields. Values have the shape of their kind: enum values
spelled out, integer/number/boolean/date/time/UUID shapes (a date also written out,
``12 March 2024``, and a number whose integer part the grammar does not bound also with
digit groups and a currency sign, ``$1,899.99``: see :mod:`slotflight._written`), a JSON
value on one line for ``json`` slots (its numbers within a double, an integer of at most
:data:`JSON_WHOLE_DIGITS` digits written out). What the grammar can say about bounds it says: a
string is never empty (a small model's fallback; an optional one can be left out) and a
``maxLength`` up to :data:`MAX_LINE_BOUND` makes it one line of at most that many
characters; integer bounds are exact (:func:`integer_range`); a number's integer part
keeps to its bounds when both are known, the lower one is not negative and both are
spelled out (under 18 digits), else has at most 17 digits (:data:`FLOAT_WHOLE_DIGITS`, a
double's precision: a larger value takes an exponent, which keeps it within a double, and
a model cannot write digits to the token limit), and is unsigned when no negative value
is allowed. Everything else (patterns, a
number's fraction against its bounds, ``multipleOf``) is left to validation.

A syntax subclasses the builder with how its frames look (:meth:`GrammarBuilder.frame`,
:meth:`GrammarBuilder.text_body`, :meth:`GrammarBuilder.root`). A follow-up pass's
grammar (``only``) admits just the frames it asks for.
"""

from __future__ import annotations

import math
import re
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar, Final

from .._written import CURRENCY_SIGNS, MONTH_NAMES
from ..plan.instance import value_text
from ..plan.limits import limit_error
from ..plan.model import Slot, SlotPlan
from ..plan.tree import Group, Leaf, ObjectArray, ScalarArray, layout

__all__ = [
    "EXPONENT_DIGITS",
    "FLOAT_WHOLE_DIGITS",
    "FRACTION_DIGITS",
    "JSON_WHOLE_DIGITS",
    "LINE_FIRST",
    "MAX_GRAMMAR_ITEMS",
    "MAX_LINE_BOUND",
    "RETRY_LINE_FIRST",
    "UNBOUNDED_ITEMS",
    "UNQUOTED_LINE_FIRST",
    "GrammarBuilder",
    "Target",
    "Unit",
    "literal",
    "one_line_string",
]

#: A frame a follow-up pass asks for: ``(slot, index, required)``; index ``None`` on a
#: repeatable slot asks for the whole scalar list.
Target = tuple[Slot, int | None, bool]

#: The longest ``maxLength`` a grammar spells out as a bounded line.
MAX_LINE_BOUND: Final = 2000
#: Items admitted for an array without ``maxItems`` (or more when ``minItems`` is larger).
UNBOUNDED_ITEMS: Final = 8
#: Digits of a number's integer part the grammar does not bound otherwise (``1e20``
#: has an exponent instead); digit groups (``1,899``) allow as many, plus one.
FLOAT_WHOLE_DIGITS: Final = 17
#: Digits of a number's fraction: a float's shortest form has at most 17 significant
#: digits after at most 4 zeros (below 1e-4 it takes an exponent), so this admits every
#: one and stops a model writing ``0.000…`` to its token limit (Qwen2.5-Coder asked
#: again for a depth above 0 wrote 400 tokens of zeros, twice).
FRACTION_DIGITS: Final = 24
#: Digits of an integer a JSON value writes out (every 64-bit integer); a longer one takes
#: an exponent, as a ``number`` slot's does.
JSON_WHOLE_DIGITS: Final = 20
#: Digits of a number's exponent.
EXPONENT_DIGITS: Final = 3
#: The largest double, as its shortest text writes it: a number's exponent keeps the
#: value within it (``1e999`` is no double, and validation refuses it).
_DOUBLE_MAX: Final = "1.7976931348623157e308"
#: Literal indexes are spelled out per item, so a huge ``maxItems`` is cut to this.
MAX_GRAMMAR_ITEMS: Final = 256

#: The first character of an unquoted line's text value, and of one a follow-up asks
#: for again: not a quote or a bracket either (a quoted copy, ``[Triage]``: what a small
#: model asked again reaches for, never needed unquoted).
LINE_FIRST: Final = "[^ <\\t\\r\\n]"
RETRY_LINE_FIRST: Final = '[^ <\\t\\r\\n"\\[]'
#: The first character of a raw text value where a quote would start a JSON string.
UNQUOTED_LINE_FIRST: Final = '[^ <\\t\\r\\n"]'

_SHARED_RULES: Final = {
    "text": 'text ::= text-line ("\\n" text-line)*',
    "text-line": "text-line ::= ([^<\\r\\n] [^\\r\\n]*)?",
    "integer": 'integer ::= "-"? natural',
    "natural": 'natural ::= "0" | [1-9] [0-9]*',
    # a JSON value's number: a double (1e999 is none), an integer of at most
    # JSON_WHOLE_DIGITS digits written out (every 64-bit one), a longer one with an exponent
    "number": f'number ::= "-"? (json-whole ("." [0-9]{{1,{FRACTION_DIGITS}}})? | float-scaled)',
    "json-whole": f'json-whole ::= "0" | [1-9] [0-9]{{0,{JSON_WHOLE_DIGITS - 1}}}',
    "boolean": 'boolean ::= "true" | "false"',
    "date": 'date ::= iso-date | month-day " " month-name " " year | month-name " " month-day ", " year',
    "iso-date": 'iso-date ::= year "-" ("0" [1-9] | "1" [0-2]) "-" ("0" [1-9] | [12] [0-9] | "3" [01])',
    "year": "year ::= [0-9] [0-9] [0-9] [0-9]",
    "grouped": 'grouped ::= [1-9] [0-9]? [0-9]? ("," [0-9] [0-9] [0-9])'
    f"{{1,{FLOAT_WHOLE_DIGITS // 3}}}",
    "float-whole": f'float-whole ::= "0" | [1-9] [0-9]{{0,{FLOAT_WHOLE_DIGITS - 1}}}',
    "currency": "currency ::= " + " | ".join(f'"{sign}"' for sign in CURRENCY_SIGNS),
    "month-day": 'month-day ::= [1-9] | [12] [0-9] | "3" [01]',
    "month-name": "month-name ::= " + " | ".join(f'"{name}"' for name in MONTH_NAMES),
    "time": 'time ::= hour ":" sixty (":" sixty ("." [0-9]+)?)? zone?',
    "hour": 'hour ::= [01] [0-9] | "2" [0-3]',
    "sixty": "sixty ::= [0-5] [0-9]",
    "zone": 'zone ::= [zZ] | [+-] hour ":"? sixty',
    "datetime": "datetime ::= iso-date [Tt ] time",
    # RFC 3339, as JSON Schema's `time` and `date-time` formats read it: seconds and a
    # zone required (a plan compiled from a Pydantic model takes the rules above)
    "rfc-time": 'rfc-time ::= hour ":" sixty ":" sixty ("." [0-9]+)? rfc-zone',
    "rfc-zone": 'rfc-zone ::= [zZ] | [+-] hour ":" sixty',
    "rfc-datetime": "rfc-datetime ::= iso-date [Tt] rfc-time",
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
    "text-filled": 'text-filled ::= [^<\\r\\n \\t] [^\\r\\n]* ("\\n" text-line)*',
    "line-text": 'line-text ::= (" " line)? ("\\n|" line)*',
    "line-filled": f'line-filled ::= " " {LINE_FIRST} line ("\\n|" line)*',
    "line-retry": f'line-retry ::= " " {RETRY_LINE_FIRST} line ("\\n|" line)*',
    "line": "line ::= [^\\r\\n]*",
    "quoted": 'quoted ::= "\\"" json-char* "\\""',
    "quoted-filled": 'quoted-filled ::= "\\"" json-first json-char* "\\""',
    "json-char": 'json-char ::= [^"\\\\\\x7F\\x00-\\x1F] | "\\\\" (["\\\\/bfnrt] | "u" hex4)',
    # a JSON string's first character, not a blank (an escaped quote or backslash is not)
    "json-first": 'json-first ::= [^"\\\\\\x7F\\x00-\\x20] | "\\\\" (["\\\\/] | "u" hex4)',
    # a quoted text value's first character: as json-first, and not "<" either (the
    # form's placeholder, which a model would copy)
    "text-first": 'text-first ::= [^"\\\\\\x7F\\x00-\\x20<] | "\\\\" (["\\\\/] | "u" hex4)',
    "quoted-text": 'quoted-text ::= "\\"" text-first json-char* "\\""',
}
_RULE_NEEDS: Final = {
    "line-retry": ("line",),
    "text": ("text-line",),
    "integer": ("natural",),
    "number": ("json-whole", "float-scaled"),
    "time": ("hour", "sixty", "zone"),
    "zone": ("hour", "sixty"),
    "date": ("iso-date", "year", "month-day", "month-name"),
    "iso-date": ("year",),
    "datetime": ("iso-date", "time"),
    "rfc-time": ("hour", "sixty", "rfc-zone"),
    "rfc-zone": ("hour", "sixty"),
    "rfc-datetime": ("iso-date", "rfc-time"),
    "uuid": ("hex4",),
    "json": ("json-object", "json-array", "json-string", "number", "boolean"),
    "json-object": ("json-member", "json-ws"),
    "json-member": ("json-string", "json-ws", "json"),
    "json-array": ("json-ws", "json"),
    "json-string": ("hex4",),
    "text-filled": ("text-line",),
    "line-text": ("line",),
    "line-filled": ("line",),
    "quoted": ("json-char",),
    "quoted-filled": ("json-first", "json-char"),
    "json-char": ("hex4",),
    "json-first": ("hex4",),
    "text-first": ("hex4",),
    "quoted-text": ("text-first", "json-char"),
    "float-scaled": ("float-top",),
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


class Unit:
    """One part of a sequence: ``present`` matches it with at least one frame.

    ``opener`` is the form it takes when it opens an array item (line syntaxes may need
    an index there); the same as ``present`` unless given.
    """

    __slots__ = ("opener", "optional", "present")

    def __init__(self, present: str, optional: bool, opener: str | None = None) -> None:
        self.present = present
        self.optional = optional
        self.opener = present if opener is None else opener

    def in_sequence(self) -> str:
        return f"({self.present})?" if self.optional else self.present


def one_line_string(slot: Slot, max_string_chars: int | None) -> tuple[int, int] | None:
    """``(min, max)`` characters of ``slot``'s value when the grammar keeps it to one
    bounded line, or ``None`` for text of any length over any number of lines (a
    syntax's continuation lines).

    A string is one bounded line when its ``maxLength`` is at most
    :data:`MAX_LINE_BOUND`, or in compact mode (``max_string_chars``), which also
    bounds strings without a ``maxLength``. A bounded line has at least one character:
    an empty value is what a small model falls back to.
    """
    bound = slot.constraints.get("maxLength")
    most = bound if isinstance(bound, int) and 0 < bound <= MAX_LINE_BOUND else None
    if max_string_chars is not None:
        most = max_string_chars if most is None else min(most, max_string_chars)
    if most is None:
        return None
    least = slot.constraints.get("minLength")
    least = max(least, 1) if isinstance(least, int) else 1
    return (min(least, most), most)


class GrammarBuilder(ABC):
    """Builds one grammar. Subclasses say how a syntax's frames look."""

    #: Whether an array item's first frame is written in its opener form.
    item_openers: ClassVar[bool] = False
    #: Whether :meth:`text_body` cannot match ``null`` (quoted text): a nullable
    #: string then gets ``null`` as an alternative.
    text_excludes_null: bool = False

    def __init__(
        self,
        plan: SlotPlan,
        max_string_chars: int | None = None,
        only: Iterable[Target] | None = None,
    ) -> None:
        if max_string_chars is not None and max_string_chars < 1:
            raise ValueError(f"max_string_chars must be >= 1, got {max_string_chars}")
        self.plan = plan
        self.max_string_chars = max_string_chars
        self.only = None if only is None else list(only)
        self.rules: dict[str, str] = {}
        self.shared: set[str] = set()
        # rules written for "at least one of these units, in order", by body (written
        # once however often they are asked for), and the characters asked for so far
        self._chains: dict[str, str] = {}
        self._chain_chars = 0
        self._made: dict[tuple[int, int | None], tuple[Group, list[Unit]]] = {}

    # -- what a syntax says -----------------------------------------------------------

    @abstractmethod
    def frame(self, slot: Slot, index: int | None) -> str:
        """The name of the rule matching one whole frame of ``slot`` at ``index``
        (``None``: no index written); defined in :attr:`rules` by the call."""

    @abstractmethod
    def text_body(self, slot: Slot, nonempty: bool) -> str:
        """The body of a string value (``nonempty``: at least one non-blank character).

        Grammars ask for non-empty text everywhere: an empty string is what a small model
        falls back to when it has nothing better, and an optional field it has no value
        for can be left out instead."""

    def root(self, body: str) -> str:
        """The root rule's body around the sequence of frames."""
        return body or literal("")

    def scalar_item(self, slot: Slot, index: int) -> str:
        """The frame of item ``index`` of a scalar list."""
        return self.frame(slot, index)

    def retry_frame(self, slot: Slot, index: int | None) -> str:
        """The frame of a follow-up pass's target (its index always written)."""
        return self.frame(slot, index)

    def leaf(self, slot: Slot, index: int | None) -> Unit:
        return Unit(self.frame(slot, index), not slot.required)

    def object_unit(self, group: Group, index: int | None) -> Unit | None:
        inner = self._units(group, index)
        present = self._nonempty(inner)
        if present is None:
            return None
        node = group.node
        always = node is not None and node.required and not node.nullable
        if always and any(not u.optional for u in inner):
            return Unit(self._sequence(inner), optional=False)
        return Unit(present, optional=True)

    # -- building ---------------------------------------------------------------------

    def build(self) -> str:
        try:
            if self.only is None:
                body = self.root(self._sequence(self._units(layout(self.plan), None)))
            else:
                body = self.root(self.follow_up(self.only))
        except RecursionError:  # a plan compiled with a max_expansion_depth too high
            raise limit_error(
                "max_expansion_depth", "the plan nests too deeply to write its grammar"
            ) from None
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

    def follow_up(self, targets: list[Target]) -> str:
        """The sequence of a follow-up pass: each target's frames, in order, the
        optional ones optional."""
        return self._sequence([u for u in (self._target(*t) for t in targets) if u is not None])

    def _target(self, slot: Slot, index: int | None, required: bool) -> Unit | None:
        array = slot.array
        made: Unit | None
        if array is not None and index is None and array.items_are_objects:
            made = self._object_array(_object_array_of(layout(self.plan), array.segments))
        elif array is not None and index is None:
            made = self._scalar_array(ScalarArray(slot=slot, key=slot.name))
        else:
            return Unit(self.retry_frame(slot, index), not required)
        if made is not None:
            made.optional = not required
        return made

    def need(self, rule: str) -> None:
        """Include the shared rule ``rule`` (and what it uses)."""
        if rule not in self.shared:
            self.shared.add(rule)
            for dependency in _RULE_NEEDS.get(rule, ()):
                self.need(dependency)

    def value(self, slot: Slot) -> str:
        """The name of the rule matching ``slot``'s value (built once)."""
        name = f"v{slot.id}"
        if name not in self.rules:
            self.rules[name] = self.value_body(slot)
        return name

    def short_string(self, slot: Slot) -> tuple[int, int] | None:
        """:func:`one_line_string` of ``slot`` in this grammar."""
        return one_line_string(slot, self.max_string_chars)

    def value_body(self, slot: Slot) -> str:
        """The shape of ``slot``'s value, written as a bare literal."""
        if slot.kind == "string":
            body = self.text_body(slot, True)
            return f'{body} | "null"' if slot.nullable and self.text_excludes_null else body
        if slot.kind == "enum":
            body = " | ".join(literal(self.enum_text(slot, v)) for v in slot.enum or ())
        elif slot.kind in ("integer", "number"):
            body = self._number(slot)
        else:
            body = self.kind_rule(slot)
        if slot.nullable and slot.kind != "json":
            body = f'{body} | "null"'
        return body

    def kind_rule(self, slot: Slot) -> str:
        """The rule (added to the grammar) of a value of ``slot``'s kind. A time or
        date-time of a plan compiled from a JSON Schema is written as RFC 3339 reads
        it, as its format requires; a Pydantic model's may leave the zone out."""
        rule = _KIND_RULES[slot.kind]
        if rule in ("time", "datetime") and self.plan.model is None:
            rule = f"rfc-{rule}"
        self.need(rule)
        return rule

    def enum_text(self, slot: Slot, value: object) -> str:
        """How an enum value is written."""
        return value_text(slot, value)

    def _number(self, slot: Slot) -> str:
        """An integer or number whose integer part keeps to the slot's bounds.

        An integer's bounds are exact (:func:`integer_range`: ``minimum: 50`` admits no
        ``3``). A number's integer part is kept between the bounds' integer parts when
        both are known and the lower one is not negative; else it is any natural
        number, signed only when a negative value is allowed."""
        c = slot.constraints
        if slot.kind == "integer":
            low, high = _integer_bounds(c)
            if (low is not None or high is not None) and (
                low is None or high is None or low <= high
            ):
                return integer_range(low, high)
        low_f = _value(_bound(c, "minimum", "exclusiveMinimum"))
        high_f = _value(_bound(c, "maximum", "exclusiveMaximum"))
        # bounds whose integer parts are too long to spell out bound nothing here: the
        # value may need an exponent (1e20 below a maximum of 1e300)
        bounded = (
            low_f is not None and high_f is not None and 0 <= low_f <= high_f < 10**_MAX_DIGITS
        )
        if bounded and low_f is not None and high_f is not None:
            whole = integer_range(math.floor(low_f), math.floor(high_f))
        elif slot.kind == "integer":
            self.need("natural")
            whole = "natural"
        else:  # no float has more significant digits; larger ones take an exponent
            self.need("float-whole")
            whole = "float-whole"
        sign = '"-"? ' if low_f is None or low_f < 0 else ""
        if slot.kind == "integer":
            return f"{sign}{whole}"
        fraction = f'("." [0-9]{{1,{FRACTION_DIGITS}}})?'
        if bounded:
            return f"{sign}({whole}) {fraction}"
        # an integer part the grammar does not bound may be written as people write
        # amounts: $1,899.99 (validation still applies the bounds there are)
        self.need("grouped")
        self.need("currency")
        self.need("float-scaled")
        return f"{sign}currency? ({whole} {fraction} | float-scaled | grouped {fraction})"

    # -- structure --------------------------------------------------------------------

    @staticmethod
    def _sequence(units: list[Unit]) -> str:
        return " ".join(u.in_sequence() for u in units)

    def _nonempty(self, units: list[Unit], *, opening: bool = False) -> str | None:
        found = self._alternatives(units, opening=opening)
        return None if found is None else self._bounded(found)

    def _alternatives(self, units: list[Unit], *, opening: bool = False) -> str | None:
        """Matches ``units`` in order with at least one frame; ``None`` if impossible.

        ``opening``: the first frame opens an array item (written in its opener form).

        A match starts with one of the units up to the first required one. With more
        than one such start, the choices are named rules linear in ``units``: each
        ``some`` rule is one start and what may follow it, or the next start; each
        ``rest`` rule is a unit as it may be written in sequence, then the next one.
        Written inline the choices grow with the square of ``units`` (and multiply
        through nested objects), and llama.cpp refuses an optional group of about
        2000 symbols: an optional object of 45 optional fields.
        """
        if not units:
            return None
        if not opening and any(not u.optional for u in units):
            return self._sequence(units)
        heads = [u.opener if opening else u.present for u in units]
        last = next((i for i, u in enumerate(units) if not u.optional), len(units) - 1)
        if last == 0:
            return " ".join([heads[0]] + [u.in_sequence() for u in units[1:]])
        rests = [""] * (len(units) + 1)
        for j in range(len(units) - 1, 0, -1):
            tail = f"{units[j].in_sequence()} {rests[j + 1]}".rstrip()
            rests[j] = tail if j == len(units) - 1 else self._chain("rest", tail)
        choice = f"{heads[last]} {rests[last + 1]}".rstrip()
        for i in range(last - 1, -1, -1):
            choice = self._chain("some", f"{heads[i]} {rests[i + 1]}".rstrip() + f" | {choice}")
        return choice

    def _chain(self, prefix: str, body: str) -> str:
        """The name of a rule matching ``body`` (one per body). Every body asked for
        counts towards ``max_grammar_chars``: nested objects in array items ask for
        their units again per item and per form, which must stop early when it grows."""
        self._chain_chars += len(body)
        self._check_size(self._chain_chars)
        name = self._chains.get(body)
        if name is None:
            name = self._chains[body] = f"{prefix}{len(self._chains)}"
            self.rules[name] = body
        return name

    def _units(self, group: Group, index: int | None) -> list[Unit]:
        # made once per group and index: a line syntax asks again for an item's opener
        # form, which would double the work at every nested object
        made_before = self._made.get((id(group), index))
        if made_before is not None and made_before[0] is group:
            return list(made_before[1])
        units: list[Unit] = []
        for unit in group.units:
            made: Unit | None
            if isinstance(unit, Leaf):
                made = self.leaf(unit.slot, index)
            elif isinstance(unit, ScalarArray):
                made = self._scalar_array(unit)
            elif isinstance(unit, Group):
                made = self.object_unit(unit, index)
            else:
                made = self._object_array(unit)
            if made is not None:
                units.append(made)
        self._made[(id(group), index)] = (group, units)
        return list(units)

    def _counted(self, name: str, items: list[str], low: int, required: bool) -> Unit | None:
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
        return Unit(name, optional=not (required and low > 0))

    @staticmethod
    def _item_count(low: int, high: int | None) -> int:
        if high is None:
            return max(low, UNBOUNDED_ITEMS)
        return min(high, max(low, MAX_GRAMMAR_ITEMS))

    def _scalar_array(self, unit: ScalarArray) -> Unit | None:
        slot = unit.slot
        array = slot.array
        assert array is not None
        count = self._item_count(array.min_items, array.max_items)
        items = [self.scalar_item(slot, k) for k in range(count)]
        return self._counted(f"list{slot.id}", items, array.min_items, array.required)

    def _object_array(self, unit: ObjectArray) -> Unit | None:
        array = unit.array
        first = unit.item.slots()[0].id
        count = self._item_count(array.min_items, array.max_items)
        items: list[str] = []
        size = 0
        for k in range(count):
            present = self._nonempty(self._units(unit.item, k), opening=self.item_openers)
            if present is None:
                return None
            size += len(present)
            self._check_size(size)
            rule = f"item{first}-{k}"
            self.rules[rule] = present
            items.append(rule)
        return self._counted(f"list{first}", items, array.min_items, array.required)


def _object_array_of(group: Group, segments: tuple[Any, ...]) -> ObjectArray:
    """The list of objects at ``segments`` in the tree below ``group``."""
    for unit in group.units:
        if isinstance(unit, ObjectArray) and unit.array.segments == segments:
            return unit
        if isinstance(unit, Group):
            try:
                return _object_array_of(unit, segments)
            except LookupError:
                continue
    raise LookupError(f"no list of objects at {segments!r}")


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


#: Bounds with more digits than this are not spelled out (validation checks them).
_MAX_DIGITS: Final = 18


def _integer_bounds(constraints: Mapping[str, Any]) -> tuple[int | None, int | None]:
    """The least and the greatest integer ``constraints`` allow (``None``: unbounded or
    too large to spell out)."""
    least = most = None
    if (low := _bound(constraints, "minimum", "exclusiveMinimum")) is not None:
        value, exclusive = low
        least = math.floor(value) + 1 if exclusive else math.ceil(value)
    if (high := _bound(constraints, "maximum", "exclusiveMaximum")) is not None:
        value, exclusive = high
        most = math.ceil(value) - 1 if exclusive else math.floor(value)
    limit = 10**_MAX_DIGITS
    return (
        least if least is not None and abs(least) < limit else None,
        most if most is not None and abs(most) < limit else None,
    )


def integer_range(low: int | None, high: int | None) -> str:
    """A GBNF alternation matching exactly the integers from ``low`` to ``high``
    (``None``: unbounded on that side), written without leading zeros or ``-0``.

    Each run of equal-length numbers splits into digit classes, e.g. 50..3000 is
    ``[5-9] [0-9] | [1-9] [0-9]{2} | [1-2] [0-9]{3} | "3" "000"``. The rule has
    O(digits²) parts."""
    if low is not None and high is not None and low > high:
        raise ValueError(f"empty integer range {low}..{high}")
    forms: list[str] = []
    if low is None or low < 0:
        # negatives: "-" then the magnitudes from max(1, -high) to -low
        least = 1 if high is None or high >= 0 else -high
        forms.extend(f'"-" {f}' for f in _natural_forms(least, None if low is None else -low))
    if high is None or high >= 0:
        forms.extend(_natural_forms(max(low, 0) if low is not None else 0, high))
    return " | ".join(forms) if len(forms) == 1 else "(" + " | ".join(forms) + ")"


def _natural_forms(low: int, high: int | None) -> list[str]:
    """Sequences matching the naturals ``low``..``high`` (``high`` ``None``: unbounded)."""
    forms: list[str] = []
    digits = len(str(low))
    top = digits if high is None else len(str(high))
    for width in range(digits, top + 1):
        first = 0 if width == 1 else 10 ** (width - 1)
        last = 10**width - 1
        forms.extend(
            _same_width(str(max(low, first)), str(last if high is None else min(high, last)))
        )
    if high is None:
        forms.append(f"[1-9] [0-9]{{{top},}}")
    return forms


def _same_width(lo: str, hi: str) -> list[str]:
    """Sequences matching the digit strings of one width from ``lo`` to ``hi``."""
    if lo == hi:
        return [literal(lo)]
    rest = len(lo) - 1
    if lo[0] == hi[0]:
        return [f"{literal(lo[0])} {tail}" for tail in _same_width(lo[1:], hi[1:])]
    forms: list[str] = []
    start, end = int(lo[0]), int(hi[0])
    if lo[1:] != "0" * rest:
        forms.extend(f"{literal(lo[0])} {tail}" for tail in _same_width(lo[1:], "9" * rest))
        start += 1
    tails: list[str] = []
    if hi[1:] != "9" * rest:
        tails = [f"{literal(hi[0])} {tail}" for tail in _same_width("0" * rest, hi[1:])]
        end -= 1
    if start <= end:
        head = literal(str(start)) if start == end else f"[{start}-{end}]"
        forms.append(head + (f" [0-9]{{{rest}}}" if rest > 1 else " [0-9]" if rest else ""))
    return forms + tails


def _bound(
    constraints: Mapping[str, Any], inclusive: str, exclusive: str
) -> tuple[int | float, bool] | None:
    """The finite bound ``inclusive`` (else ``exclusive``) of ``constraints``, if any,
    and whether it is exclusive. Integers stay exact."""
    for key, is_exclusive in ((inclusive, False), (exclusive, True)):
        value = constraints.get(key)
        if (
            isinstance(value, int | float)
            and not isinstance(value, bool)
            and (isinstance(value, int) or math.isfinite(value))
        ):
            return value, is_exclusive
    return None


def _value(bound: tuple[int | float, bool] | None) -> float | None:
    return None if bound is None else float(bound[0])


def _exponent(most: int) -> str:
    """An exponent (after its ``e``) of at most :data:`EXPONENT_DIGITS` digits, leading
    zeros allowed (``1.5e+07``): any negative one, a positive one up to ``most``."""
    width = EXPONENT_DIGITS
    digits = " | ".join(
        [f"[0-9]{{1,{width - 1}}}", *_same_width("0" * width, str(most).zfill(width))]
    )
    return f'[eE] ("-" [0-9]{{1,{width}}} | "+"? ({digits}))'


def _at_most(digits: str, room: int) -> str:
    """Digit strings of 1 to ``room`` digits that, read as a fraction, are at most
    ``digits`` followed by any digits."""
    first = int(digits[0])
    below = "" if not first else '"0"' if first == 1 else f"[0-{first - 1}]"
    forms = [f"{below} [0-9]{{0,{room - 1}}}"] if below else []
    rest = f"[0-9]{{0,{room - 1}}}" if len(digits) == 1 else f"({_at_most(digits[1:], room - 1)})?"
    forms.append(f"{literal(digits[0])} {rest}")
    return " | ".join(forms)


def _scaled_rules() -> dict[str, str]:
    """The rules of a number written with an exponent, ``float-scaled``: only values a
    double holds. An exponent up to 307 after one digit, or up to 291 after up to 17
    (below 1e308 either way), or 308 after ``1`` and a fraction up to the largest
    double's (``float-top``): every double as its shortest text writes it
    (``1.7976931348623157e+308``), never one beyond (``1e999``, ``2e308``)."""
    mantissa, power = _DOUBLE_MAX.split("e")
    top = int(power)
    fraction = f'("." [0-9]{{1,{FRACTION_DIGITS}}})?'
    scaled = " | ".join(
        [
            f"[0-9] {fraction} {_exponent(top - 1)}",
            f"[1-9] [0-9]{{1,{FLOAT_WHOLE_DIGITS - 1}}} {fraction} "
            + _exponent(top - FLOAT_WHOLE_DIGITS),
            f'{literal(mantissa[0])} ("." float-top)? [eE] "+"? {literal(power)}',
        ]
    )
    return {
        "float-scaled": f"float-scaled ::= {scaled}",
        "float-top": f"float-top ::= {_at_most(mantissa[2:], FRACTION_DIGITS)}",
    }


_SHARED_RULES.update(_scaled_rules())
