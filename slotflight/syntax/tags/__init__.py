"""Frame syntax v1: tag frames, wire-compatible with slot-flight.

::

    <1>
    value, possibly over several lines
    </1>
    <3:0>
    first item
    </3:0>

Slot ids are numbers in plan order; a repeatable slot's frames carry the item index in
both tags. Reading: :mod:`.lexer`. Prompt templates: ``prompts/v1/``.
"""

from __future__ import annotations

from collections.abc import Iterable

from ...plan.instance import FrameValue
from ...plan.model import Slot, SlotPlan
from ..base import FrameLexer, Syntax
from ..gbnf import GrammarBuilder, Target, literal
from .lexer import TagLexer

__all__ = ["TAGS", "TagSyntax"]


def _tag(slot_id: int, index: int | None) -> str:
    return str(slot_id) if index is None else f"{slot_id}:{index}"


class _TagGrammar(GrammarBuilder):
    def frame(self, slot: Slot, index: int | None) -> str:
        name = f"f{slot.id}" if index is None else f"f{slot.id}-{index}"
        if name not in self.rules:
            tag = _tag(slot.id, index)
            opening, closing = literal(f"<{tag}>\n"), literal(f"\n</{tag}>\n")
            self.rules[name] = f"{opening} {self.value(slot)} {closing}"
        return name

    def text_body(self, slot: Slot, nonempty: bool) -> str:
        short = self.short_string(slot)
        if short is not None:
            least, most = short
            return f"[^<\\r\\n \\t] [^\\r\\n]{{{max(least - 1, 0)},{most - 1}}}"
        rule = "text-filled" if nonempty else "text"
        self.need(rule)
        return rule


class TagSyntax(Syntax):
    """v1 tag frames (see the module docs)."""

    name = "v1"
    templates = "v1"
    summary = "tag frames <ID>…</ID>, wire-compatible with slot-flight"

    def ref(self, plan: SlotPlan, slot: Slot, index: int | None = None) -> str:
        return f"<{_tag(slot.id, index)}>"

    def lexer(
        self, plan: SlotPlan, *, grammar: bool = False, max_string_chars: int | None = None
    ) -> FrameLexer:
        # A closing tag ends every value: nothing to rely on from a grammar.
        return TagLexer(frozenset(s.id for s in plan.slots))

    def write(self, plan: SlotPlan, frames: Iterable[FrameValue]) -> str:
        parts: list[str] = []
        for frame in frames:
            tag = _tag(frame.slot.id, frame.index)
            parts.append(f"<{tag}>\n{frame.text}\n</{tag}>\n")
        return "".join(parts)

    def grammar(
        self,
        plan: SlotPlan,
        *,
        max_string_chars: int | None = None,
        only: Iterable[Target] | None = None,
    ) -> str:
        return _TagGrammar(plan, max_string_chars, only).build()


TAGS = TagSyntax()
