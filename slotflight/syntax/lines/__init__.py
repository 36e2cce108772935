"""Line syntaxes: one line per value, the slot's id first, ``end`` last.

::

    summary: Export job failed for large workspaces      named ids ("v3")
    priority: 4
    tags: export
    tags: bug
    owner: Ada Lovelace
    due: 2025-02-01
    end

The same reading rules (:mod:`.lexer`), item grouping (:mod:`.items`) and grammar
structure serve every variant; a variant chooses how slots are named on the wire
(numbers in plan order, or names: :mod:`.names`) and whether text values are written
raw (continued on ``|`` lines) or as JSON strings. Prompt templates:
``prompts/<templates>/``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Final, Literal

from ...plan.instance import FrameValue
from ...plan.model import Slot, SlotPlan
from ...plan.tree import Group
from ..base import FrameLexer, Syntax
from ..gbnf import (
    LINE_FIRST,
    RETRY_LINE_FIRST,
    GrammarBuilder,
    Target,
    Unit,
    literal,
    one_line_string,
)
from .items import always_in_item, explicit_indexes, slot_groups
from .lexer import END_LINE, LineLexer, NamedHeads, NumericHeads
from .names import slot_names

__all__ = ["END_LINE", "Counters", "LineGrammar", "LineSyntax"]

#: Kinds whose raw value may continue on ``|`` lines.
_MULTILINE_KINDS = frozenset({"string", "json"})
#: Kinds written as JSON strings in a quoted variant.
_QUOTED_KINDS = frozenset({"string", "date", "datetime", "time", "uuid"})

IdStyle = Literal["numeric", "named"]


class LineSyntax(Syntax):
    """A line syntax variant (see the module docs)."""

    end_marker = True

    def __init__(
        self, name: str, *, ids: IdStyle, quoted: bool, templates: str, summary: str
    ) -> None:
        self.name = name
        self.ids = ids
        self.quoted = quoted
        self.templates = templates
        self.summary = summary

    # -- naming ---------------------------------------------------------------------------

    def wire_id(self, plan: SlotPlan, slot: Slot) -> str:
        """The id frames use for ``slot``: ``3`` or ``owner``."""
        return slot_names(plan)[slot.id] if self.ids == "named" else str(slot.id)

    def head(self, plan: SlotPlan, slot: Slot, index: int | None) -> str:
        """A line's head, index written: ``3``, ``3:1``, ``owner:``, ``owner[1]:``."""
        wire = self.wire_id(plan, slot)
        if self.ids == "numeric":
            return wire if index is None else f"{wire}:{index}"
        return (wire if index is None else f"{wire}[{index}]") + ":"

    def ref(self, plan: SlotPlan, slot: Slot, index: int | None = None) -> str:
        return self.head(plan, slot, index).rstrip(":")

    # -- reading --------------------------------------------------------------------------

    def quotes(self, slot: Slot) -> bool:
        return self.quoted and slot.kind in _QUOTED_KINDS

    def may_quote(self, slot: Slot) -> bool:
        """Whether a value of ``slot`` that starts with ``"`` is read as a JSON string."""
        return self.quoted and slot.kind != "json"

    def follow_up_quotes(self, slot: Slot) -> bool:
        """Whether a follow-up's grammar lets ``slot``'s value be a JSON string."""
        return self.may_quote(slot)

    def lexer(
        self, plan: SlotPlan, *, grammar: bool = False, max_string_chars: int | None = None
    ) -> FrameLexer:
        multiline = (
            frozenset()
            if self.quoted
            else frozenset(
                s.id
                for s in plan.slots
                if s.kind in _MULTILINE_KINDS
                and not self.quotes(s)
                and not (grammar and _one_line_in_grammar(s, max_string_chars))
            )
        )
        quoted = frozenset(s.id for s in plan.slots if self.may_quote(s))
        return self.make_lexer(plan, multiline=multiline, quoted=quoted)

    def make_lexer(
        self, plan: SlotPlan, *, multiline: frozenset[int], quoted: frozenset[int]
    ) -> FrameLexer:
        """The lexer of ``plan`` whose raw values of ``multiline`` slots may continue on
        ``|`` lines and whose values of ``quoted`` slots may be JSON strings."""
        heads: NumericHeads | NamedHeads
        if self.ids == "named":
            heads = NamedHeads(slot_names(plan))
        else:
            heads = NumericHeads(frozenset(s.id for s in plan.slots))
        return LineLexer(heads, groups=slot_groups(plan.slots), multiline=multiline, quoted=quoted)

    # -- writing --------------------------------------------------------------------------

    def value_text(self, frame: FrameValue) -> str:
        """A frame's value as written: JSON-quoted text in a quoted variant."""
        if self.quotes(frame.slot) and isinstance(frame.value, str):
            return json.dumps(frame.value, ensure_ascii=False)
        if self.quoted and frame.slot.kind == "enum" and isinstance(frame.value, str):
            return json.dumps(frame.value, ensure_ascii=False)
        return frame.text

    def write(self, plan: SlotPlan, frames: Iterable[FrameValue]) -> str:
        frames = list(frames)
        parts: list[str] = []
        for frame, explicit in zip(frames, explicit_indexes(frames), strict=True):
            self.write_line(
                self.head(plan, frame.slot, frame.index if explicit else None), frame, parts
            )
        parts.append(END_LINE + "\n")
        return "".join(parts)

    def write_line(self, head: str, frame: FrameValue, parts: list[str]) -> None:
        """Append ``frame``'s line(s) after ``head`` to ``parts``: the value's first line
        (``head`` alone when it is empty), then a ``|`` line per further line."""
        first, *rest = self.value_text(frame).split("\n")
        parts.append(f"{head} {first}" if first else head)
        parts.extend(f"\n|{line}" for line in rest)
        parts.append("\n")

    def grammar(
        self,
        plan: SlotPlan,
        *,
        max_string_chars: int | None = None,
        only: Iterable[Target] | None = None,
    ) -> str:
        return self.grammar_type()(self, plan, max_string_chars, only).build()

    def grammar_type(self) -> type[LineGrammar]:
        """The grammar builder of this variant."""
        return LineGrammar


def _one_line_in_grammar(slot: Slot, max_string_chars: int | None) -> bool:
    """Whether the grammar keeps ``slot``'s raw value to its head's line: a JSON value
    always, a string when it is a bounded line (:func:`~..gbnf.one_line_string`)."""
    return slot.kind == "json" or one_line_string(slot, max_string_chars) is not None


class LineGrammar(GrammarBuilder):
    """Line frames: the head, then the value; no index except where :func:`.items.
    explicit_indexes` writes one (the first line of a later object-array item whose
    field not every item has); the end line last."""

    item_openers = True

    def __init__(
        self,
        syntax: LineSyntax,
        plan: SlotPlan,
        max_string_chars: int | None,
        only: Iterable[Target] | None,
    ) -> None:
        super().__init__(plan, max_string_chars, only)
        self.syntax = syntax
        self.text_excludes_null = syntax.quoted

    def follow_up(self, targets: list[Target]) -> str:
        """A follow-up's frames with their index, as the retry prompt shows them; where
        the grouping rule gives a frame that same index (which depends on which optional
        targets before it came), also without it, as :meth:`LineSyntax.write` writes it.

        The alternatives branch on the item counters' states: the states reachable
        before each target are found going forward, the rules are written going
        backward. Past :data:`_MAX_FOLLOW_UP_STATES` states only the indexed form is
        admitted (the plain sequence)."""
        units = [self._target(*t) for t in targets]
        reach: list[set[Counters]] = [{()}]
        for (slot, index, required), unit in zip(targets, units, strict=True):
            after: set[Counters] = set()
            for counters in reach[-1]:
                after.add(_after(counters, slot, index) if unit is not None else counters)
                if not required:
                    after.add(counters)
            reach.append(after)
            if sum(len(r) for r in reach) > _MAX_FOLLOW_UP_STATES:
                return super().follow_up(targets)
        names: dict[tuple[int, Counters], str] = {
            (len(targets), counters): "" for counters in reach[-1]
        }
        for i in range(len(targets) - 1, -1, -1):
            slot, index, required = targets[i]
            unit = units[i]
            for counters in reach[i]:
                if unit is None:
                    names[(i, counters)] = names[(i + 1, counters)]
                    continue
                form = self.target_form(unit.present, slot, index, counters)
                present = f"{form} {names[(i + 1, _after(counters, slot, index))]}".strip()
                absent = names.get((i + 1, counters), "")
                if required:
                    body = present
                elif absent:
                    body = f"({present}) | {absent}"
                else:
                    body = f"({present})?"
                name = f"follow{i}-{len(names)}"
                self.rules[name] = body
                names[(i, counters)] = name
        return names[(0, ())]

    def target_form(self, form: str, slot: Slot, index: int | None, counters: Counters) -> str:
        """A follow-up target's frames ``form``, or where the writer may write it
        otherwise after ``counters``, the alternatives: here without its index where
        the grouping rule gives it that index."""
        if index is not None and slot.array is not None and _implicit(counters, slot) == index:
            return f"({form} | {self.frame(slot, None)})"
        return form

    def root(self, body: str) -> str:
        return f'{body} {literal(END_LINE)} "\\n"?'.lstrip()

    def quoted_text(self, slot: Slot, nonempty: bool, *, placeholder: bool = True) -> str:
        """The body of a string value written as a JSON string; ``placeholder=False``:
        one that does not start with ``<`` (the form's placeholder) either."""
        short = self.short_string(slot)
        first = "json-first" if placeholder else "text-first"
        if short is not None:
            least, most = short
            self.need(first)
            self.need("json-char")
            return f'"\\"" {first} json-char{{{least - 1},{most - 1}}} "\\""'
        rule = "quoted-text" if not placeholder else "quoted-filled" if nonempty else "quoted"
        self.need(rule)
        return rule

    def text_body(self, slot: Slot, nonempty: bool) -> str:
        if self.syntax.quoted:
            return self.quoted_text(slot, nonempty)
        short = self.short_string(slot)
        first = RETRY_LINE_FIRST if self.only is not None else LINE_FIRST
        if short is not None:
            least, most = short
            return f"{first} [^\\r\\n]{{{least - 1},{most - 1}}}"
        rule = (
            "line-text"
            if not nonempty
            else "line-retry"
            if self.only is not None
            else "line-filled"
        )
        self.need(rule)
        return rule

    def value_body(self, slot: Slot) -> str:
        if self.syntax.quoted and slot.kind in _QUOTED_KINDS and slot.kind != "string":
            # a date, time or UUID as a JSON string, as written
            quoted = f'"\\"" {self.kind_rule(slot)} "\\""'
            return f'" " ({quoted} | "null")' if slot.nullable else f'" " {quoted}'
        body = super().value_body(slot)
        if slot.kind == "string" and not self.syntax.quoted and self.short_string(slot) is None:
            return body  # the rule writes its own blank (an empty first line has none)
        return f'" " ({body})'

    def enum_text(self, slot: Slot, value: object) -> str:
        if self.syntax.quoted and isinstance(value, str):
            return json.dumps(value, ensure_ascii=False)
        return super().enum_text(slot, value)

    def frame(self, slot: Slot, index: int | None) -> str:
        name = f"f{slot.id}" if index is None else f"f{slot.id}-{index}"
        if name not in self.rules:
            head = literal(self.syntax.head(self.plan, slot, index))
            self.rules[name] = f'{head} {self.value(slot)} "\\n"'
        return name

    def leaf(self, slot: Slot, index: int | None) -> Unit:
        plain = self.frame(slot, None)
        if index is None or index == 0 or always_in_item(slot):
            return Unit(plain, not slot.required)
        return Unit(plain, not slot.required, opener=self.frame(slot, index))

    def object_unit(self, group: Group, index: int | None) -> Unit | None:
        made = super().object_unit(group, index)
        if made is None or not index:
            return made
        opener = self._nonempty(self._units(group, index), opening=True)
        return Unit(made.present, made.optional, opener=opener)

    def scalar_item(self, slot: Slot, index: int) -> str:
        return self.frame(slot, None)  # the line order gives a scalar item its index

    def retry_frame(self, slot: Slot, index: int | None) -> str:
        return self.frame(slot, index)


#: The item-counter states a follow-up grammar branches on, at most.
_MAX_FOLLOW_UP_STATES: Final = 512

#: Item counters of a follow-up so far: per array, the current item and the fields it
#: had, or ``None`` when unknown (after a whole scalar list). Sorted, hashable.
Counters = tuple[tuple[str, tuple[int, frozenset[int]] | None], ...]


def _implicit(counters: Counters, slot: Slot) -> int | None:
    """The index the grouping rule gives a line of ``slot`` without one (``None``:
    unknown), as :class:`.items.ItemCounter` does."""
    assert slot.array is not None
    states = dict(counters)
    group = repr(slot.array.segments)
    if group not in states:
        return 0
    state = states[group]
    if state is None:
        return None
    item, fields = state
    return item + 1 if slot.id in fields else item


def _after(counters: Counters, slot: Slot, index: int | None) -> Counters:
    """The counters after a target's frames: a frame at ``index`` is taken as
    :class:`.items.ItemCounter` takes it; a whole scalar list makes its array's
    counter unknown; a plain slot changes nothing."""
    if slot.array is None:
        return counters
    group = repr(slot.array.segments)
    states = dict(counters)
    state = states.get(group)
    if index is None:
        states[group] = None
    elif state is not None and state[0] == index:
        states[group] = (index, state[1] | {slot.id})
    else:
        states[group] = (index, frozenset({slot.id}))
    return tuple(sorted(states.items()))
