"""Block lists (syntax ``v4``): v3's lines, with every list written as a block.

::

    title: Weekly product sync
    attendees:
    - Hannah Schmidt
    - Luis Ortega
    action_items:
    - task: Collect feedback from sales
    owner: Hannah Schmidt
    due: 2024-03-15
    - task: Set up test accounts
    owner: Luis Ortega
    end

- A list's name alone on its line opens its block (a scalar list's slot name; a list
  of objects' name from :func:`.names.list_names`). Blanks may follow the colon; the
  line has no value.
- In a block of a scalar list, ``- value`` (a dash, then a blank or the line's end) is
  the next item.
- ``- name: value`` (a dash, blanks, then the head of a field of a list of objects)
  starts a new item of that list and opens its block, wherever it stands (a model
  that leaves out the opening line loses nothing; a follow-up may write it so); the
  item's other fields follow as v3 lines (``owner: value``), named as in v3 and
  grouped by v3's rule. Indentation is not significant (leading blanks are skipped, as
  on every line), so ``  owner:`` reads the same.
- A v3 head of a slot outside the block's list ends the block; every v3 line reads as
  in v3 (``tags: export``, ``owner[1]: Ada``: the forms a follow-up pass writes), so
  v4 reads all of v3 but for text that starts with a quote. A ``-`` line outside a
  block, or one that names no field of the block's list, is noise; noise does not end
  a block.
- A text value that starts with ``"`` is a JSON string (:class:`.lexer.LineLexer`'s
  quoted values): ``title: "Lisbon"`` is ``Lisbon``.

An empty list has no lines, as in v3 (after the ``end`` line it is an empty list); an
opening line with no items after it adds nothing. The writer writes an explicit v3
index line (``tags[2]: b``) where the block form would give a frame another index.
"""

from __future__ import annotations

import json
import re
from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from typing import Final

from ...plan.instance import FrameValue
from ...plan.model import ArrayNode, Slot, SlotPlan
from ...plan.tree import Group, ObjectArray, ScalarArray
from ..base import FrameLexer, Token
from ..gbnf import RETRY_LINE_FIRST, UNQUOTED_LINE_FIRST, Unit, literal
from . import Counters, LineGrammar, LineSyntax
from .items import ItemCounter, slot_groups
from .lexer import _START, END_LINE, HeadMatch, LineLexer, NamedHeads, NamePrefixes
from .names import list_names, slot_names

__all__ = ["BlockHeads", "BlockLexer", "BlockSyntax"]

#: Blanks allowed after a block's opening colon, and between an item's dash and its head.
_MAX_GAP: Final = 16
_DASH = re.compile(rf"-[ \t]{{1,{_MAX_GAP}}}")
_DASH_PREFIX = re.compile(rf"-[ \t]{{0,{_MAX_GAP}}}")
#: A scalar item: a dash, then a blank or the line's end (``-3`` is not an item).
_SCALAR_DASH = re.compile(r"-(?:[ \t]|(?=\n))")
#: After a scalar list's name and colon: a value on the line (v3's one-line form).
_INLINE = re.compile(rf"[ \t]{{0,{_MAX_GAP}}}[^ \t\n]")


@dataclass(frozen=True, slots=True)
class Opener:
    """A line opening the block of the list ``block`` (array segments); ``end``: where
    the next line starts in the looked-at text."""

    block: Hashable
    end: int


@dataclass(frozen=True, slots=True)
class ItemHead:
    """A frame line's head read in a block: ``new_item`` when a dash started it."""

    head: HeadMatch
    new_item: bool


class BlockHeads:
    """Heads of the block syntax: v3's named heads, list openers, and dashed items in
    the open block (:attr:`block`, set by the lexer)."""

    def __init__(self, plan: SlotPlan) -> None:
        names = slot_names(plan)
        self._named = NamedHeads(names)
        self._groups = slot_groups(plan.slots)
        #: scalar-list slot id per name (their names open blocks and inline items)
        self._scalar = {
            names[s.id]: s.id
            for s in plan.slots
            if s.array is not None and not s.array.items_are_objects
        }
        openers: dict[str, Hashable] = {n: self._groups[i] for n, i in self._scalar.items()}
        openers.update({name: key for key, name in list_names(plan).items()})
        self._openers = openers
        self._block_slot = {self._groups[i]: i for i in self._scalar.values()}
        self._object_fields = frozenset(
            s.id for s in plan.slots if s.array is not None and s.array.items_are_objects
        )
        alternatives = "|".join(re.escape(n) for n in sorted(openers, key=len, reverse=True))
        alternatives = alternatives or "(?!)"
        self._opener = re.compile(rf"({alternatives}):[ \t]{{0,{_MAX_GAP}}}\n")
        self._opener_prefix = re.compile(rf"(?:{alternatives}):[ \t]{{0,{_MAX_GAP}}}")
        self._opener_starts = NamePrefixes(openers)
        self.starts = self._named.starts | frozenset(n[0] for n in openers) | {"-"}
        longest = max((len(n) for n in openers), default=0)
        self.max_hold = max(self._named.max_hold, longest) + 2 * _MAX_GAP + 4
        #: The list whose block is open (array segments), if any.
        self.block: Hashable | None = None

    def group_of(self, slot_id: int) -> Hashable | None:
        """The list (array segments) whose field or item ``slot_id`` is, if any."""
        return self._groups.get(slot_id)

    def in_block(self, slot_id: int | None) -> bool:
        """Whether ``slot_id`` is a field (or the slot) of the open block's list."""
        return (
            slot_id is not None
            and self.block is not None
            and self._groups.get(slot_id) == self.block
        )

    def match(self, look: str) -> HeadMatch | None:
        found = self.find(look)
        return found.head if isinstance(found, ItemHead) else None

    def find(self, look: str) -> Opener | ItemHead | None:
        """What ``look`` starts, once it can be told (``None``: not yet or not)."""
        if look.startswith("-") and (found := self._dashed(look)) is not None:
            return found
        if self._openers and (m := self._opener.match(look)) is not None:
            return Opener(self._openers[m.group(1)], m.end())
        head = self._named.match(look)
        if head is None:
            return None
        if head.index is None and head.ref in self._scalar:
            # a scalar list's name: an item on the same line (v3) only once a value shows
            colon = len(head.ref)
            if _INLINE.match(look, colon + 1) is None:
                return None
        return ItemHead(head, new_item=False)

    def _dashed(self, look: str) -> ItemHead | None:
        slot_id = self._block_slot.get(self.block)
        if slot_id is not None:  # a scalar list's block: "- value"
            m = _SCALAR_DASH.match(look)
            if m is None:
                return None
            return ItemHead(HeadMatch(slot_id, None, m.end(), "-"), new_item=False)
        m = _DASH.match(look)
        if m is None:
            return None
        head = self._named.match(look[m.end() :])
        if head is None or head.slot not in self._object_fields:
            return None
        moved = HeadMatch(head.slot, head.index, head.end + m.end(), head.ref)
        return ItemHead(moved, new_item=head.index is None)

    def prefix(self, look: str) -> bool:
        if look.startswith("-") and self.block in self._block_slot:
            return look == "-" or self._named.prefix(look)
        if look.startswith("-"):
            m = _DASH_PREFIX.match(look)
            assert m is not None
            rest = look[m.end() :]
            if m.end() == len(look) or (m.end() > 1 and self._named.prefix(rest)):
                return True
        return (
            self._named.prefix(look)
            or look in self._opener_starts
            or self._opener_prefix.fullmatch(look) is not None
        )


class BlockLexer(LineLexer):
    """:class:`.lexer.LineLexer` with block lists (see the module docs)."""

    @property
    def _blocks(self) -> BlockHeads:
        heads = self._heads
        assert isinstance(heads, BlockHeads)
        return heads

    def _resolve_head(self, look: str, held: int, out: list[Token]) -> int | None:
        found = self._blocks.find(look)
        if found is None:
            return self._resolve_end(look, held, out)
        if isinstance(found, Opener):
            self._noise_run.end(out)
            self._blocks.block = found.block
            self._state = _START
            self._lead = 0
            self._line_off = self._head_off + found.end
            return found.end - held
        head = found.head
        slot_id = head.slot
        index = head.index
        if slot_id is not None:
            if found.new_item:
                self._blocks.block = self._blocks.group_of(slot_id)
            elif not self._blocks.in_block(slot_id):
                self._blocks.block = None
            explicit = self._counter.new_item(slot_id) if found.new_item else index
            index = self._counter.take(slot_id, explicit)
        self._open_frame(head, index, out)
        # a scalar list's name was held with the blanks after its colon until a value
        # showed: those blanks are before the value, where it skips them anyway
        return max(head.end - held, 0)


class BlockSyntax(LineSyntax):
    """The block syntax (``v4``): named v3 lines, lists written as blocks.

    Any text value may be written as a JSON string (``title: "Lisbon on a budget"``
    reads ``Lisbon on a budget``); with ``quoted_items`` (``v4-quoted``) an item of a
    list of texts must be one (see the module docs)."""

    def __init__(
        self, name: str, *, templates: str, summary: str, quoted_items: bool = False
    ) -> None:
        super().__init__(name, ids="named", quoted=False, templates=templates, summary=summary)
        self.quoted_items = quoted_items

    def quotes(self, slot: Slot) -> bool:
        array = slot.array
        return (
            self.quoted_items
            and slot.kind == "string"
            and array is not None
            and not array.items_are_objects
        )

    def may_quote(self, slot: Slot) -> bool:
        return slot.kind == "string"

    def follow_up_quotes(self, slot: Slot) -> bool:
        """Only with ``quoted_items``: v4's follow-up keeps v3's raw line, which starts
        with neither a quote nor a bracket (a quoted copy is what a small model asked
        again reaches for)."""
        return self.quoted_items and self.may_quote(slot)

    def value_text(self, frame: FrameValue) -> str:
        """A frame's value as written: a JSON string where :meth:`quotes`, or where raw
        text would read otherwise (it starts with ``"``, or is ``null`` in a nullable
        slot)."""
        slot, value = frame.slot, frame.value
        if isinstance(value, str) and self.may_quote(slot):
            raw_reads_otherwise = value.startswith('"') or (slot.nullable and value == "null")
            if self.quotes(slot) or raw_reads_otherwise:
                return json.dumps(value, ensure_ascii=False)
        return super().value_text(frame)

    def list_ref(self, plan: SlotPlan, array: ArrayNode) -> str:
        """The line that opens ``array``'s block, without its colon."""
        if array.items_are_objects:
            return list_names(plan)[array.segments]
        slot = next(
            s for s in plan.slots if s.array is not None and s.array.segments == array.segments
        )
        return slot_names(plan)[slot.id]

    def make_lexer(
        self, plan: SlotPlan, *, multiline: frozenset[int], quoted: frozenset[int]
    ) -> FrameLexer:
        return BlockLexer(
            BlockHeads(plan), groups=slot_groups(plan.slots), multiline=multiline, quoted=quoted
        )

    def write(self, plan: SlotPlan, frames: Iterable[FrameValue]) -> str:
        frames = list(frames)
        counter = ItemCounter(slot_groups(f.slot for f in frames))
        block: Hashable | None = None
        parts: list[str] = []
        for frame in frames:
            slot, index, array = frame.slot, frame.index, frame.slot.array
            head = self.head(plan, slot, None)
            dashed = False
            if array is None or index is None:
                block = None
            elif not array.items_are_objects and counter.implicit(slot.id) == index:
                dashed, head = True, "-"
            elif array.items_are_objects and counter.new_item(slot.id) == index:
                dashed, head = True, f"- {head}"
            elif not (array.items_are_objects and counter.implicit(slot.id) == index):
                head = self.head(plan, slot, index)  # v3's explicit index
            if array is not None and dashed and block != array.segments:
                parts.append(f"{self.list_ref(plan, array)}:\n")
                block = array.segments
            elif array is not None and block != array.segments:
                block = None
            counter.take(slot.id, index)
            self.write_line(head, frame, parts)
        parts.append(END_LINE + "\n")
        return "".join(parts)

    def grammar_type(self) -> type[LineGrammar]:
        return _BlockGrammar


class _BlockGrammar(LineGrammar):
    """v3's line grammar with every list a block: its opening line, then items; an
    item of a list of objects starts with a dashed line. A follow-up's single item
    fields keep v3's form (``owner[1]: …``)."""

    syntax: BlockSyntax

    def _block(self, array: ArrayNode, made: Unit | None, key: int) -> Unit | None:
        if made is None:
            return None
        name = f"block{key}"
        opener = literal(self.syntax.list_ref(self.plan, array) + ":\n")
        self.rules[name] = f"{opener} {made.present}"
        return Unit(name, made.optional)

    def text_body(self, slot: Slot, nonempty: bool) -> str:
        """A quoted item's JSON string; where text may be quoted, a JSON string or a
        raw line that does not start with a quote. Neither starts with ``<`` (v4's rule
        against copying the form's placeholder). A follow-up writes a JSON string only
        where :meth:`BlockSyntax.follow_up_quotes`."""
        if not self.syntax.may_quote(slot) or (
            self.only is not None and not self.syntax.follow_up_quotes(slot)
        ):
            return super().text_body(slot, nonempty)
        quoted = self.quoted_text(slot, nonempty, placeholder=False)
        if self.syntax.quotes(slot):
            return quoted
        first = RETRY_LINE_FIRST if self.only is not None else UNQUOTED_LINE_FIRST
        short = self.short_string(slot)
        if short is not None:
            return f"{quoted} | {first} [^\\r\\n]{{{short[0] - 1},{short[1] - 1}}}"
        self.need("line")
        return f'" " {quoted} | " " {first} line ("\\n|" line)*'

    def value_body(self, slot: Slot) -> str:
        if not self.syntax.may_quote(slot):
            return super().value_body(slot)
        body = self.text_body(slot, True)
        if self.syntax.quotes(slot) or self.short_string(slot) is not None:
            body = f'" " ({body})'
        # raw text can write null; a quoted item cannot
        return f'{body} | " null"' if slot.nullable and self.syntax.quotes(slot) else body

    def scalar_item(self, slot: Slot, index: int) -> str:
        name = f"d{slot.id}"
        if name not in self.rules:
            self.rules[name] = f'"-" {self.value(slot)} "\\n"'
        return name

    def _scalar_array(self, unit: ScalarArray) -> Unit | None:
        array = unit.slot.array
        assert array is not None
        return self._block(array, super()._scalar_array(unit), unit.slot.id)

    def _object_array(self, unit: ObjectArray) -> Unit | None:
        first = unit.item.slots()[0].id
        return self._block(unit.array, super()._object_array(unit), first)

    def target_form(self, form: str, slot: Slot, index: int | None, counters: Counters) -> str:
        """Also a dashed line (after the list's opening line, which the writer leaves out
        in an open block) where it would start the item asked for."""
        form = super().target_form(form, slot, index, counters)
        array = slot.array
        if index is None or array is None or not array.items_are_objects:
            return form
        states = dict(counters)
        group = repr(array.segments)
        state = states.get(group, (-1, frozenset()))
        if state is None or state[0] + 1 != index:
            return form
        opener = literal(self.syntax.list_ref(self.plan, array) + ":\n")
        return f"({form} | {opener}? {self._dashed(slot)})"

    def _dashed(self, slot: Slot) -> str:
        """The rule of ``slot``'s line when it starts an item: ``- name: value``."""
        name = f"i{slot.id}"
        if name not in self.rules:
            head = literal("- " + self.syntax.head(self.plan, slot, None))
            self.rules[name] = f'{head} {self.value(slot)} "\\n"'
        return name

    def leaf(self, slot: Slot, index: int | None) -> Unit:
        plain = self.frame(slot, None)
        if index is None:
            return Unit(plain, not slot.required)
        return Unit(plain, not slot.required, opener=self._dashed(slot))

    def object_unit(self, group: Group, index: int | None) -> Unit | None:
        made = super().object_unit(group, index)
        if made is None or index != 0:
            return made
        opener = self._nonempty(self._units(group, index), opening=True)
        return Unit(made.present, made.optional, opener=opener)
