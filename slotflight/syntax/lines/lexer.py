"""Reading line frames: one line per value, the slot's id first.

::

    summary: Export job failed for large workspaces       (named ids)
    tags: export
    tags: bug
    3 4                                                   (numeric ids, v2)
    2 First line of a longer text
    |its second line
    end

Rules (see ``docs/protocol.md``, "Line syntaxes"):

- A frame line is a head, then the value's first line. Spaces and tabs may come before
  the head (at most 32). Numeric heads are the id and one blank (``3 value``;
  ``ID:INDEX`` gives an index explicitly); the id must be followed by a blank or the end
  of the line (``3.5 stars``, ``2024-05-01`` and ``1)`` are not frame lines). Named
  heads are a known slot name and a colon (``owner: value``; ``owner[2]:`` gives an
  index), one blank after the colon is not part of the value; a line whose start is not
  a known name is not a frame line.
- Raw values: a string or JSON value continues on the following lines that start with
  ``|`` (after optional blanks); the text after the ``|`` is the next line of the value.
  Blank lines inside such a value are skipped. Any other value ends at its newline.
- Quoted values (syntaxes with ``quoted`` strings): a value of a ``quoted`` slot that
  starts with ``"`` is a JSON string, decoded as it arrives, and ends at its closing
  quote; the rest of its line is ignored. A stream that ends inside it leaves the frame
  open (truncated). Any other value of it is raw, continued on ``|`` lines only where
  the slot's raw values are (``multiline``). (A JSON slot is not ``quoted``: its value
  is JSON text, and a JSON string is kept as written.)
- Indexes follow the item-grouping rule of :mod:`.items`, so the assembler always
  receives explicit indexes.
- ``end`` alone on a line ends the output: everything after it is ignored (reported
  once), and an array with no line is an empty array even if the stream is then cut.
- Every other line is noise: blank lines are ignored, other lines (chatter, code
  fences, a ``|`` line with no value open) are counted and reported once per run. A
  noise line also ends the value before it.

Complexity goal: O(total characters). Value text is emitted as it arrives, split at
newlines (and, in quoted values, at quotes and escapes) once. Only the start of a line
is held back while it may still become a frame line (a bounded prefix: a head, or
``end`` and its trailing blanks); leading blanks are only counted. A raw string's
newline is owed, not held, until the next line shows whether it continues the value.
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Final, Protocol

from ..base import Close, Diag, End, NoiseTracker, Open, Text, Token
from .items import ItemCounter

__all__ = [
    "END_LINE",
    "HeadMatch",
    "Heads",
    "LineLexer",
    "NamePrefixes",
    "NamedHeads",
    "NumericHeads",
]

#: The line that ends the output.
END_LINE: Final = "end"

_MAX_BLANK: Final = 32
#: The longest end line: ``end``, its trailing blanks and the newline that tells it.
_END_HOLD: Final = len(END_LINE) + _MAX_BLANK + 1
_BLANKS = re.compile(r"[ \t]*")
_END = re.compile(rf"end[ \t]{{0,{_MAX_BLANK}}}\n")
_END_PREFIX = re.compile(rf"e(?:n(?:d[ \t]{{0,{_MAX_BLANK}}})?)?")
_QUOTED_STOP = re.compile(r'["\\\n]')

# line states
_START: Final = 0  # at the start of a line, counting blanks
_HEAD: Final = 1  # holding a possible frame line start
_VALUE: Final = 2  # inside a raw value line
_NOISE: Final = 3  # the rest of the line is noise
_DONE: Final = 4  # after the end line
_QUOTE_OPEN: Final = 5  # a quoted value may start here
_QUOTED: Final = 6  # inside a quoted value
_TRAIL: Final = 7  # after a quoted value's closing quote: the rest of the line


@dataclass(frozen=True, slots=True)
class HeadMatch:
    """A frame line's head: the slot (``None`` when unknown), the index as written,
    where the value starts in the looked-at text, and the id as written."""

    slot: int | None
    index: int | None
    end: int
    ref: str


class NumericHeads:
    """``3 value`` / ``3:1 value``: the v2 heads."""

    starts: Final = frozenset("0123456789")
    max_hold: Final = 64
    _HEAD = re.compile(r"(\d{1,9})(?::(\d{1,9}))?(?=[ \t\n])")
    _PREFIX = re.compile(r"\d{1,9}(?::\d{0,9})?")

    def __init__(self, known: frozenset[int]) -> None:
        self._known = known

    def match(self, look: str) -> HeadMatch | None:
        m = self._HEAD.match(look)
        if m is None:
            return None
        end = m.end()
        if look[end] in " \t":
            end += 1  # the blank between the id and the value
        slot_id = int(m.group(1))
        index = None if m.group(2) is None else int(m.group(2))
        return HeadMatch(slot_id if slot_id in self._known else None, index, end, m.group(1))

    def prefix(self, look: str) -> bool:
        return self._PREFIX.fullmatch(look) is not None


class NamePrefixes:
    """Whether a text is the start of one of ``names``: by a binary search over the
    sorted names, O(log n + len(text)), and O(total length of the names) to hold (a set
    of every prefix would hold the square of a long name's length)."""

    def __init__(self, names: Iterable[str]) -> None:
        self._names = sorted(set(names))

    def __contains__(self, look: str) -> bool:
        if not look:
            return False
        # The names starting with ``look`` are the first ones not below it, if any.
        at = bisect.bisect_left(self._names, look)
        return at < len(self._names) and self._names[at].startswith(look)


class NamedHeads:
    """``owner: value`` / ``owner[1]: value``: heads that name the slot."""

    def __init__(self, names: Mapping[int, str]) -> None:
        self._ids = {name: slot_id for slot_id, name in names.items()}
        self._prefixes = NamePrefixes(self._ids)
        self.starts = frozenset(n[0] for n in self._ids)
        longest = max((len(n) for n in self._ids), default=0)
        self.max_hold = longest + 16
        alternatives = "|".join(re.escape(n) for n in sorted(self._ids, key=len, reverse=True))
        # the character after the colon must have arrived: a blank there is not
        # part of the value, so a head is never matched at the end of the text seen
        self._head = re.compile(rf"({alternatives})(?:\[(\d{{1,9}})\])?:(?:[ \t]|(?=[^ \t]))")
        self._after_name = re.compile(rf"(?:{alternatives})(?:\[\d{{0,9}}\]?)?:?")

    def match(self, look: str) -> HeadMatch | None:
        if not self._ids:
            return None
        m = self._head.match(look)
        if m is None:
            return None
        index = None if m.group(2) is None else int(m.group(2))
        return HeadMatch(self._ids[m.group(1)], index, m.end(), m.group(1))

    def prefix(self, look: str) -> bool:
        return look in self._prefixes or (
            bool(self._ids) and self._after_name.fullmatch(look) is not None
        )


class Heads(Protocol):
    """How a line syntax reads a frame line's head (:class:`NumericHeads`,
    :class:`NamedHeads`)."""

    @property
    def starts(self) -> frozenset[str]:
        """The characters a head can start with."""
        ...

    @property
    def max_hold(self) -> int:
        """The most characters of a line start held while it may still become a head."""
        ...

    def match(self, look: str) -> HeadMatch | None:
        """The head ``look`` starts with, once it can be told (``None``: not yet or not)."""
        ...

    def prefix(self, look: str) -> bool:
        """Whether ``look`` may still become a head."""
        ...


class LineLexer:
    """Lexer for line frames (see the module docstring).

    ``heads`` reads a line's head; ``groups`` maps each repeatable slot id to its array
    (:func:`.items.slot_groups`); ``multiline`` lists the ids whose raw value may
    continue on ``|`` lines (an unknown id's may); ``quoted`` lists the ids whose value
    is a JSON string when it starts with ``"``.
    """

    def __init__(
        self,
        heads: Heads,
        *,
        groups: Mapping[int, Hashable],
        multiline: frozenset[int],
        quoted: frozenset[int] = frozenset(),
    ) -> None:
        self._heads = heads
        self._starts = heads.starts | {"e"}
        # whatever may still become a head or the end line is held, however the text
        # was split, so the look at a line start must reach as far as either needs
        self._hold = max(heads.max_hold, _END_HOLD)
        self._multiline = multiline
        self._quoted = quoted
        self._counter = ItemCounter(groups)
        self._state = _START
        self._base = 0  # offset of the current chunk's first character
        self._line_off = 0  # offset where the current line starts
        self._lead = 0  # blanks counted at the start of the current line
        self._head = ""  # held start of a possible frame line
        self._head_off = 0
        self._open = False  # a frame is open
        self._continues = False  # the open raw value may continue on "|" lines
        self._line_ended = False  # the open value's line ended; a "|" line may follow
        self._nl_off = 0  # offset of that newline
        self._escape = ""  # held start of an escape sequence in a quoted value
        self._trail = 0  # characters after a quoted value's closing quote
        self._trail_text = False  # some of them are not blanks
        self._trail_off = 0
        self._noise_run = NoiseTracker()
        self._after = 0  # characters after the end line
        self._after_off = 0

    def feed(self, text: str) -> list[Token]:
        out: list[Token] = []
        pos, n = 0, len(text)
        while pos < n:
            state = self._state
            if state == _VALUE:
                pos = self._feed_value(text, pos, out)
            elif state == _QUOTED:
                pos = self._feed_quoted(text, pos, out)
            elif state == _START:
                pos = self._feed_start(text, pos, out)
            elif state == _HEAD:
                pos = self._feed_head(text, pos, out)
            elif state == _NOISE:
                pos = self._feed_noise(text, pos, out)
            elif state == _QUOTE_OPEN:
                pos = self._feed_quote_open(text, pos)
            elif state == _TRAIL:
                pos = self._feed_trail(text, pos, out)
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
        if self._state == _TRAIL:
            self._end_trail(out)
        if self._open and self._state != _QUOTED:
            out.append(Close(self._base))
            self._open = False
        self._noise_run.end(out)
        if self._after:
            out.append(
                Diag(
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
        if ch == "|" and self._line_ended:
            self._line_ended = False
            out.append(Text("\n"))
            self._state = _VALUE
            return i + 1
        self._end_value(out)
        if ch in self._starts:
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
        if self._line_ended:
            self._line_ended = False
            self._open = False
            out.append(Close(self._nl_off))

    # -- frame line starts -------------------------------------------------------------

    def _feed_head(self, text: str, pos: int, out: list[Token]) -> int:
        nl = text.find("\n", pos)
        stop = len(text) if nl < 0 else nl + 1
        held = len(self._head)
        piece = text[pos : min(stop, pos + self._hold)]
        look = self._head + piece
        self._head = ""
        used = self._resolve_head(look, held, out)
        if used is not None:
            return pos + used
        if (
            nl < 0
            and pos + len(piece) == len(text)
            and (self._heads.prefix(look) or _END_PREFIX.fullmatch(look) is not None)
        ):
            self._head = look
            return len(text)
        self._noise(self._lead + held, out)
        self._state = _NOISE
        return pos

    def _resolve_head(self, look: str, held: int, out: list[Token]) -> int | None:
        """Open a frame or end the output if ``look`` starts one; ``None`` if not.

        Returns how many characters past the ``held`` ones were used (0 or more).
        """
        head = self._heads.match(look)
        if head is not None:
            slot_id = head.slot
            index = head.index if slot_id is None else self._counter.take(slot_id, head.index)
            self._open_frame(head, index, out)
            return head.end - held
        return self._resolve_end(look, held, out)

    def _open_frame(self, head: HeadMatch, index: int | None, out: list[Token]) -> None:
        """Open the frame ``head`` starts, at item ``index``."""
        self._noise_run.end(out)
        slot_id = head.slot
        out.append(Open(slot_id, index, self._head_off, head.ref, self._head_off + head.end))
        self._open = True
        self._continues = slot_id is None or slot_id in self._multiline
        self._state = _QUOTE_OPEN if slot_id in self._quoted else _VALUE

    def _resolve_end(self, look: str, held: int, out: list[Token]) -> int | None:
        """End the output if ``look`` is the end line (see :meth:`_resolve_head`)."""
        m = _END.match(look)
        if m is not None:
            self._noise_run.end(out)
            out.append(End(self._head_off))
            self._state = _DONE
            self._after_off = self._line_off + self._lead + m.end()
            return m.end() - held
        return None

    # -- values and noise --------------------------------------------------------------

    def _feed_value(self, text: str, pos: int, out: list[Token]) -> int:
        nl = text.find("\n", pos)
        if nl < 0:
            out.append(Text(text[pos:]))
            return len(text)
        if nl > pos:
            out.append(Text(text[pos:nl]))
        if self._continues:
            self._line_ended = True
            self._nl_off = self._base + nl
        else:
            self._open = False
            out.append(Close(self._base + nl))
        self._new_line(nl + 1)
        return nl + 1

    def _feed_quote_open(self, text: str, pos: int) -> int:
        if text[pos] in " \t":  # blanks before the value
            m = _BLANKS.match(text, pos)
            assert m is not None
            return m.end()
        if text[pos] == '"':
            self._state = _QUOTED
            return pos + 1
        self._state = _VALUE  # a raw value: continued on | lines where its slot's are
        return pos

    def _feed_quoted(self, text: str, pos: int, out: list[Token]) -> int:
        if self._escape:
            return self._feed_escape(text, pos, out)
        m = _QUOTED_STOP.search(text, pos)
        if m is None:
            out.append(Text(text[pos:]))
            return len(text)
        stop = m.start()
        if stop > pos:
            out.append(Text(text[pos:stop]))
        ch = text[stop]
        if ch == '"':
            self._open = False
            out.append(Close(self._base + stop, quoted=True))
            self._state = _TRAIL
            self._trail_off = self._base + stop + 1
            return stop + 1
        if ch == "\n":
            self._open = False
            out.append(
                Diag(
                    "unterminated_string",
                    "a quoted value ended at its line's end without a closing quote",
                    self._base + stop,
                )
            )
            out.append(Close(self._base + stop))
            self._new_line(stop + 1)
            return stop + 1
        self._escape = "\\"
        return self._feed_escape(text, stop + 1, out)

    def _feed_escape(self, text: str, pos: int, out: list[Token]) -> int:
        """Complete the held escape sequence (at most 12 characters), decode it, go on."""
        held = self._escape
        work = held + text[pos : pos + 12]
        step = _escape_step(work)
        if step is None:  # the text ran out inside the escape
            self._escape = work
            return len(text)
        decoded, used = step
        out.append(Text(decoded))
        if used >= len(held):
            self._escape = ""
            return pos + used - len(held)
        self._escape = held[used:]  # a new escape began inside the held text
        return pos

    def _feed_trail(self, text: str, pos: int, out: list[Token]) -> int:
        nl = text.find("\n", pos)
        end = len(text) if nl < 0 else nl
        self._trail += end - pos
        if not self._trail_text and text[pos:end].strip(" \t"):
            self._trail_text = True
        if nl < 0:
            return len(text)
        self._end_trail(out)
        self._new_line(nl + 1)
        return nl + 1

    def _end_trail(self, out: list[Token]) -> None:
        """Report what followed a quoted value on its line, unless only blanks did."""
        if self._trail_text:
            out.append(
                Diag(
                    "after_value",
                    f"{self._trail} characters after a quoted value ignored",
                    self._trail_off,
                )
            )
        self._trail = 0
        self._trail_text = False

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


_HEX: Final = frozenset("0123456789abcdefABCDEF")
_SIMPLE_ESCAPES: Final = frozenset('"\\/bfnrt')
_LOW_HALF: Final = ("\\", "u", "dD", "cdefCDEF", _HEX, _HEX)


def _escape_step(text: str) -> tuple[str, int] | None:
    """Decode the escape sequence ``text`` starts with: ``(decoded, characters used)``,
    or ``None`` when more characters are needed. Invalid escapes and lone surrogates
    decode to U+FFFD and use only what was invalid."""
    if len(text) < 2:
        return None
    if text[1] in _SIMPLE_ESCAPES:
        decoded: str = json.loads(f'"{text[:2]}"')
        return decoded, 2
    if text[1] != "u":
        return "\ufffd", 2
    for k in range(2, min(len(text), 6)):
        if text[k] not in _HEX:
            return "\ufffd", k
    if len(text) < 6:
        return None
    code = int(text[2:6], 16)
    if 0xDC00 <= code <= 0xDFFF:
        return "\ufffd", 6
    if not 0xD800 <= code <= 0xDBFF:
        return chr(code), 6
    for k in range(6, min(len(text), 12)):
        if text[k] not in _LOW_HALF[k - 6]:
            return "\ufffd", 6
    if len(text) < 12:
        return None
    low = int(text[8:12], 16)
    return chr(0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)), 12
