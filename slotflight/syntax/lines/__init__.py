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
from typing import Literal

from ...plan.instance import FrameValue
from ...plan.model import Slot, SlotPlan
from ...plan.tree import Group
from ..base import FrameLexer, Syntax
from ..gbnf import GrammarBuilder, Target, Unit, literal
from .items import always_in_item, explicit_indexes, slot_groups
from .lexer import END_LINE, LineLexer, NamedHeads, NumericHeads
from .names import slot_names

__all__ = ["END_LINE", "LineSyntax"]

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

    def lexer(self, plan: SlotPlan) -> FrameLexer:
        heads: NumericHeads | NamedHeads
        if self.ids == "named":
            heads = NamedHeads(slot_names(plan))
        else:
            heads = NumericHeads(frozenset(s.id for s in plan.slots))
        multiline = (
            frozenset()
            if self.quoted
            else frozenset(s.id for s in plan.slots if s.kind in _MULTILINE_KINDS)
        )
        return LineLexer(
            heads,
            groups=slot_groups(plan.slots),
            multiline=multiline,
            quoted=self.quoted,
            json_ids=frozenset(s.id for s in plan.slots if s.kind == "json"),
        )

    # -- writing --------------------------------------------------------------------------

    def value_text(self, frame: FrameValue) -> str:
        """A frame's value as written: JSON-quoted text in a quoted variant."""
        if self.quoted and frame.slot.kind in _QUOTED_KINDS and isinstance(frame.value, str):
            return json.dumps(frame.value, ensure_ascii=False)
        if self.quoted and frame.slot.kind == "enum" and isinstance(frame.value, str):
            return json.dumps(frame.value, ensure_ascii=False)
        return frame.text

    def write(self, plan: SlotPlan, frames: Iterable[FrameValue]) -> str:
        frames = list(frames)
        parts: list[str] = []
        for frame, explicit in zip(frames, explicit_indexes(frames), strict=True):
            head = self.head(plan, frame.slot, frame.index if explicit else None)
            first, *rest = self.value_text(frame).split("\n")
            parts.append(f"{head} {first}" if first else head)
            parts.extend(f"\n|{line}" for line in rest)
            parts.append("\n")
        parts.append(END_LINE + "\n")
        return "".join(parts)

    def grammar(
        self,
        plan: SlotPlan,
        *,
        max_string_chars: int | None = None,
        only: Iterable[Target] | None = None,
    ) -> str:
        return _LineGrammar(self, plan, max_string_chars, only).build()


class _LineGrammar(GrammarBuilder):
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

    def root(self, body: str) -> str:
        return f'{body} {literal(END_LINE)} "\\n"?'.lstrip()

    def text_body(self, slot: Slot, nonempty: bool) -> str:
        short = self.short_string(slot)
        if self.syntax.quoted:
            if short is not None:
                least, most = short
                self.need("json-char")
                return f'"\\"" [^"\\\\\\x7F\\x00-\\x20] json-char{{{least - 1},{most - 1}}} "\\""'
            rule = "quoted-filled" if nonempty else "quoted"
            self.need(rule)
            return rule
        if short is not None:
            least, most = short
            return f"[^ <\\t\\r\\n] [^\\r\\n]{{{least - 1},{most - 1}}}"
        rule = "line-filled" if nonempty else "line-text"
        self.need(rule)
        return rule

    def value_body(self, slot: Slot) -> str:
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
