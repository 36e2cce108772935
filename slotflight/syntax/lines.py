"""Frame syntax v2: one line per value, designed to cost fewer tokens than JSON.

::

    1 Export job failed for large workspaces
    3 4
    6 export
    6 bug
    7 Ada Lovelace
    8 2025-02-01
    7 Grace Hopper
    2 First line of a longer text
    |its second line
    end

Rules (see ``docs/protocol.md``, "Frame syntax v2"):

- A frame line is the slot id, one blank, then the value's first line. Spaces and tabs
  may come before the id (at most 32); ``ID:INDEX`` gives an index explicitly. The id
  must be followed by a blank or the end of the line (``3.5 stars``, ``2024-05-01`` and
  ``1)`` are not frame lines).
- A string or JSON value continues on the following lines that start with ``|`` (after
  optional blanks); the text after the ``|`` is the next line of the value. Blank lines
  inside such a value are skipped. Any other value ends at its newline.
- A repeatable slot takes its index from the line order unless one is written. Each
  array counts its own items: a scalar-array slot starts a new item with every line; in
  an array of objects a new item starts when a field of the current item comes again
  (``7 a`` ``8 b`` ``7 c`` are two items). An explicit index moves the array to that
  item. The assembler thus always receives explicit indexes.
- ``end`` alone on a line ends the output: everything after it is ignored (reported
  once), and an array with no line is an empty array even if the stream is then cut.
- Every other line is noise: blank lines are ignored, other lines (chatter, code
  fences, a ``|`` line with no text value open) are counted and reported once per run.
  A noise line also ends the value before it.

Complexity goal: O(total characters). Value text is emitted as it arrives, split at
newlines once. Only the start of a line is held back while it may still become a frame
line (at most nine digits, ``:``, nine more, or ``end`` and its trailing blanks: a
bounded prefix); leading blanks are only counted. A string's newline is owed, not
held, until the next line shows whether it continues the value.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Final

from .base import CLOSE, DIAG, END, OPEN, TEXT, NoiseRun, Token

if TYPE_CHECKING:
    from ..plan.model import Slot, SlotPlan
    from .render import FrameValue

__all__ = [
    "END_LINE",
    "ItemCounter",
    "LineLexer",
    "always_in_item",
    "format_v2",
    "line_heads",
    "multiline_ids",
    "slot_groups",
]

#: The line that ends the output.
END_LINE: Final = "end"

_MAX_BLANK: Final = 32
_MAX_HOLD: Final = 64
#: Kinds whose value may continue on ``|`` lines.
_MULTILINE_KINDS: Final = frozenset({"string", "json"})

_HEAD_STARTS: Final = frozenset("0123456789e")
_BLANKS = re.compile(r"[ \t]*")
_HEADER = re.compile(r"(\d{1,9})(?::(\d{1,9}))?(?=[ \t\n])")
_END = re.compile(rf"end[ \t]{{0,{_MAX_BLANK}}}\n")
_HEAD_PREFIX = re.compile(rf"\d{{1,9}}(?::\d{{0,9}})?|e(?:n(?:d[ \t]{{0,{_MAX_BLANK}}})?)?")

# line states
_START: Final = 0  # at the start of a line, counting blanks
_HEAD: Final = 1  # holding a possible frame line start
_VALUE: Final = 2  # inside a value line
_NOISE: Final = 3  # the rest of the line is noise
_DONE: Final = 4  # after the end line


def slot_groups(slots: Iterable[Slot]) -> dict[int, Hashable]:
    """Which array each repeatable slot counts items in (slot id -> array key)."""
    return {s.id: s.array.segments for s in slots if s.array is not None}


def multiline_ids(slots: Iterable[Slot]) -> frozenset[int]:
    """The slots whose value may continue on ``|`` lines (strings and JSON)."""
    return frozenset(s.id for s in slots if s.kind in _MULTILINE_KINDS)


class ItemCounter:
    """The item-grouping rule: which index a frame line without one gets.

    Shared by the lexer (to read) and the writer (to decide when an index must be
    written). Memory is bounded by the number of slots.
    """

    def __init__(self, groups: Mapping[int, Hashable]) -> None:
        self._groups = groups
        self._item: dict[Hashable, int] = {}
        self._fields: dict[Hashable, set[int]] = {}

    def implicit(self, slot_id: int) -> int | None:
        """The index a line for ``slot_id`` without an index would get now."""
        group = self._groups.get(slot_id)
        if group is None:
            return None
        current = self._item.get(group)
        if current is None:
            return 0
        return current + 1 if slot_id in self._fields[group] else current

    def take(self, slot_id: int, explicit: int | None) -> int | None:
        """Record a line for ``slot_id`` (index as written); return its index."""
        group = self._groups.get(slot_id)
        if group is None:
            return explicit
        index = self.implicit(slot_id) if explicit is None else explicit
        assert index is not None
        fields = self._fields.setdefault(group, set())
        if index != self._item.get(group):
            fields.clear()
            self._item[group] = index
        fields.add(slot_id)
        return index


def _index(text: str | None) -> int | None:
    return None if text is None else int(text)


class LineLexer:
    """Lexer for v2 line frames. See the module docstring for the rules.

    ``groups`` maps each repeatable slot id to its array (:func:`slot_groups`);
    ``multiline`` lists the ids whose value may continue on ``|`` lines
    (:func:`multiline_ids`; default: every id). Unknown ids always may.
    """

    def __init__(
        self,
        known_ids: frozenset[int],
        *,
        groups: Mapping[int, Hashable] | None = None,
        multiline: frozenset[int] | None = None,
    ) -> None:
        self._known = known_ids
        self._multiline = known_ids if multiline is None else multiline
        self._counter = ItemCounter(groups or {})
        self._state = _START
        self._base = 0  # offset of the current chunk's first character
        self._line_off = 0  # offset where the current line starts
        self._lead = 0  # blanks counted at the start of the current line
        self._head = ""  # held start of a possible frame line
        self._head_off = 0
        self._in = False  # a frame is open
        self._multi = False  # the open frame's value may continue on "|" lines
        self._owed = False  # the open value's line ended; a continuation may follow
        self._nl_off = 0  # offset of that newline
        self._noise_run = NoiseRun()
        self._after = 0  # characters after the end line
        self._after_off = 0

    @classmethod
    def for_plan(cls, plan: SlotPlan) -> LineLexer:
        """A lexer knowing ``plan``'s ids, arrays and multi-line kinds."""
        return cls(
            frozenset(s.id for s in plan.slots),
            groups=slot_groups(plan.slots),
            multiline=multiline_ids(plan.slots),
        )

    @property
    def in_frame(self) -> bool:
        return self._in

    def feed(self, text: str) -> list[Token]:
        out: list[Token] = []
        pos, n = 0, len(text)
        while pos < n:
            state = self._state
            if state == _VALUE:
                pos = self._feed_value(text, pos, out)
            elif state == _START:
                pos = self._feed_start(text, pos, out)
            elif state == _HEAD:
                pos = self._feed_head(text, pos, out)
            elif state == _NOISE:
                pos = self._feed_noise(text, pos, out)
            else:
                self._after += n - pos
                pos = n
        self._base += n
        return out

    def close(self) -> list[Token]:
        out: list[Token] = []
        if self._state == _HEAD:
            head, self._head = self._head, ""
            if self._resolve_head(head + "\n", len(head), out) is None:
                self._noise(self._lead + len(head), out)
        if self._in:
            out.append((CLOSE, None, None, self._base))
            self._in = False
        self._noise_run.end(out)
        if self._after:
            out.append(
                (
                    DIAG,
                    "after_end",
                    f"{self._after} characters after the end line ignored",
                    self._after_off,
                )
            )
            self._after = 0
        return out

    # -- line starts -------------------------------------------------------------------

    def _feed_start(self, text: str, pos: int, out: list[Token]) -> int:
        m = _BLANKS.match(text, pos)
        assert m is not None
        i = m.end()
        self._lead += i - pos
        if self._lead > _MAX_BLANK:
            self._end_value(out)
            self._noise(self._lead, out)
            self._state = _NOISE
            return i
        if i == len(text):
            return i
        ch = text[i]
        if ch == "\n":  # a blank line: skipped, even inside a value
            self._new_line(i + 1)
            return i + 1
        if ch == "|" and self._owed:
            self._owed = False
            out.append((TEXT, "\n"))
            self._state = _VALUE
            return i + 1
        self._end_value(out)
        if ch in _HEAD_STARTS:
            self._state = _HEAD
            self._head_off = self._base + i
            return i
        self._noise(self._lead, out)
        self._state = _NOISE
        return i

    def _new_line(self, at: int) -> None:
        self._state = _START
        self._lead = 0
        self._line_off = self._base + at

    def _end_value(self, out: list[Token]) -> None:
        """A line that does not continue the open value ends it."""
        if self._owed:
            self._owed = False
            self._in = False
            out.append((CLOSE, None, None, self._nl_off))

    # -- frame line starts -------------------------------------------------------------

    def _feed_head(self, text: str, pos: int, out: list[Token]) -> int:
        nl = text.find("\n", pos)
        stop = len(text) if nl < 0 else nl + 1
        held = len(self._head)
        piece = text[pos : min(stop, pos + _MAX_HOLD)]
        look = self._head + piece
        self._head = ""
        used = self._resolve_head(look, held, out)
        if used is not None:
            return pos + used
        if nl < 0 and pos + len(piece) == len(text) and _HEAD_PREFIX.fullmatch(look):
            self._head = look
            return len(text)
        self._noise(self._lead + held, out)
        self._state = _NOISE
        return pos

    def _resolve_head(self, look: str, held: int, out: list[Token]) -> int | None:
        """Open a frame or end the output if ``look`` starts one; ``None`` if not.

        Returns how many characters past the ``held`` ones were used (0 or more).
        """
        m = _HEADER.match(look)
        if m is not None:
            used = m.end()
            if look[used] in " \t":
                used += 1  # the blank between the id and the value
            self._noise_run.end(out)
            slot_id = int(m.group(1))
            index = self._counter.take(slot_id, _index(m.group(2)))
            out.append((OPEN, slot_id, index, self._head_off))
            self._in = True
            self._multi = slot_id in self._multiline or slot_id not in self._known
            self._state = _VALUE
            return used - held
        m = _END.match(look)
        if m is not None:
            self._noise_run.end(out)
            out.append((END, self._head_off))
            self._state = _DONE
            self._after_off = self._line_off + self._lead + m.end()
            return m.end() - held
        return None

    # -- values and noise --------------------------------------------------------------

    def _feed_value(self, text: str, pos: int, out: list[Token]) -> int:
        nl = text.find("\n", pos)
        if nl < 0:
            out.append((TEXT, text[pos:]))
            return len(text)
        if nl > pos:
            out.append((TEXT, text[pos:nl]))
        if self._multi:
            self._owed = True
            self._nl_off = self._base + nl
        else:
            self._in = False
            out.append((CLOSE, None, None, self._base + nl))
        self._new_line(nl + 1)
        return nl + 1

    def _feed_noise(self, text: str, pos: int, out: list[Token]) -> int:
        nl = text.find("\n", pos)
        if nl < 0:
            self._noise(len(text) - pos, out)
            return len(text)
        self._noise(nl + 1 - pos, out)
        self._new_line(nl + 1)
        return nl + 1

    def _noise(self, count: int, out: list[Token]) -> None:
        self._noise_run.add(count, self._line_off, out)


# -- writing ---------------------------------------------------------------------------


def always_in_item(slot: Slot) -> bool:
    """Whether every item of ``slot``'s object array has a line for ``slot``.

    True for a required field whose objects between the item and it are required and
    not nullable. An item that opens with such a field is a new item without an
    index (the field repeats); any other item opener needs one.
    """
    if not slot.required:
        return False
    inside = False
    for node in slot.parents:
        if inside and (not node.required or node.nullable):
            return False
        if node.segments and not isinstance(node.segments[-1], str):
            inside = True
    return True


def line_heads(frames: Sequence[FrameValue]) -> list[str]:
    """What starts each frame's line: ``5``, or ``5:2`` where an index must be written.

    An index is written where the grouping rule would give another one, and on the
    first line of every later item of an object array when that line is for a field
    not every item has (:func:`always_in_item`), so a grammar can require it there.
    """
    counter = ItemCounter(slot_groups(f.slot for f in frames))
    current: dict[Hashable, int] = {}
    heads: list[str] = []
    for frame in frames:
        slot, index = frame.slot, frame.index
        explicit = counter.implicit(slot.id) != index
        array = slot.array
        if array is not None and array.items_are_objects and index is not None:
            opens = current.get(array.segments) != index
            current[array.segments] = index
            if opens and index > 0 and not always_in_item(slot):
                explicit = True
        counter.take(slot.id, index if explicit else None)
        heads.append(f"{slot.id}:{index}" if explicit else str(slot.id))
    return heads


def format_v2(frames: Iterable[FrameValue]) -> str:
    """v2 lines (heads from :func:`line_heads`), ``|`` continuation lines, the end line."""
    frames = list(frames)
    parts: list[str] = []
    for frame, head in zip(frames, line_heads(frames), strict=True):
        first, *rest = frame.text.split("\n")
        parts.append(f"{head} {first}" if first else head)
        parts.extend(f"\n|{line}" for line in rest)
        parts.append("\n")
    parts.append(END_LINE + "\n")
    return "".join(parts)
