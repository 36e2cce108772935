"""Frame syntax v1: tag frames, wire-compatible with slot-flight.

::

    <1>
    value, possibly over several lines
    </1>
    <3:0>
    first item
    </3:0>

Rules (see ``docs/protocol.md``):

- An open tag ``<id>`` / ``<id:index>`` starts a line (spaces and tabs before it are
  allowed). Text after it on the same line is already part of the value, so the inline
  form ``<1>value</1>`` works too.
- A closing tag closes the open frame when it ends its line (only spaces or tabs after
  it) and either stands alone on the line or names the open frame: ``value</1>``
  closes; ``a </1> b`` is value text.
- A line that is only an open tag of a known id, inside a frame, closes that frame
  implicitly (diagnostic ``nested_open``) and opens the new one.
- Anything else outside a frame is noise: blank lines (at most 32 spaces or tabs) are
  ignored, other lines (chatter, code fences, a line of more blanks) are counted and
  reported once per run.

Complexity goal: O(total characters). Inside a frame, each chunk is split at newlines
once; of the current line only the text from its last ``<`` is held back (at most a
tag's length plus trailing blanks), everything before it is emitted at once. Outside a
frame only a possible open-tag prefix of the current line is held (bounded likewise).
Nothing is ever re-scanned, except the bounded held text.
"""

from __future__ import annotations

import re
from typing import Final

from ..base import Close, Diag, NoiseTracker, Open, Text, Token

__all__ = ["TagLexer"]

_MAX_BLANK: Final = 32
_MAX_HOLD: Final = 64

_BLANKS = rf"[ \t]{{0,{_MAX_BLANK}}}"
_OPEN_TAG = re.compile(_BLANKS + r"<(\d{1,9})(?::(\d{1,9}))?>")
_OPEN_PREFIX = re.compile(_BLANKS + r"(?:<(?:\d{1,9}(?::\d{0,9})?)?)?")
_TAG = re.compile(r"<(/?)(\d{1,9})(?::(\d{1,9}))?>" + _BLANKS)
_TAG_PREFIX = re.compile(r"<(?:/?(?:\d{1,9}(?::\d{0,9})?(?:>" + _BLANKS + r")?)?)?")


def _index(text: str | None) -> int | None:
    return None if text is None else int(text)


class TagLexer:
    """Lexer for v1 tag frames. See the module docstring for the rules."""

    def __init__(self, known_ids: frozenset[int]) -> None:
        self._known = known_ids
        self._in = False
        self._cur: tuple[int, int | None] = (0, None)
        self._base = 0  # offset of the current chunk's first character
        # Outside a frame.
        self._line = ""  # held start of the current line (a possible open tag)
        self._line_off = 0  # offset where the current line starts
        self._noise_line = False  # the rest of the current line is noise
        self._noise_run = NoiseTracker()
        # Inside a frame.
        self._tail = ""  # the current line from its last "<", while it may be a tag
        self._tail_off = 0
        self._line_text = False  # the current line has non-blank text before the tail

    @property
    def in_frame(self) -> bool:
        return self._in

    def feed(self, text: str) -> list[Token]:
        if self._in and not self._tail and "\n" not in text and "<" not in text:
            # the common case: more body text in the middle of a line
            self._base += len(text)
            if not self._line_text and text.strip(" \t"):
                self._line_text = True
            return [Text(text)]
        out: list[Token] = []
        pos, n = 0, len(text)
        while pos < n:
            pos = self._feed_in(text, pos, out) if self._in else self._feed_out(text, pos, out)
        self._base += n
        return out

    def close(self) -> list[Token]:
        out: list[Token] = []
        if self._in:
            self._end_line(out, final=True)
        elif self._line.strip(" \t"):
            self._noise(len(self._line), out)
        self._line = ""
        self._noise_run.end(out)
        return out

    # -- outside a frame ---------------------------------------------------------------

    def _feed_out(self, text: str, pos: int, out: list[Token]) -> int:
        nl = text.find("\n", pos)
        seg_end = len(text) if nl < 0 else nl
        if self._noise_line:
            end = len(text) if nl < 0 else nl + 1
            self._noise(end - pos, out)
            if nl >= 0:
                self._noise_line = False
                self._line_off = self._base + end
            return end
        held = len(self._line)
        look = self._line + text[pos : min(seg_end, pos + _MAX_HOLD)]
        m = _OPEN_TAG.match(look)
        if m is not None:
            self._noise_run.end(out)
            tag_off = self._line_off + look.index("<")
            self._line = ""
            self._open(m.group(1), m.group(2))
            out.append(self._open_token(tag_off))
            return pos + m.end() - held
        if nl < 0 and _OPEN_PREFIX.fullmatch(look) is not None:
            self._line = look
            return len(text)
        if nl >= 0 and held + nl - pos <= _MAX_BLANK and not look.strip(" \t"):
            # a blank line between frames: at most the blanks an open tag may follow,
            # as the held start of a line is, so that chunking cannot tell them apart
            self._line = ""
            self._line_off = self._base + nl + 1
            return nl + 1
        self._line = ""
        if nl < 0:
            self._noise_line = True
            self._noise(held + seg_end - pos, out)
            return len(text)
        self._noise(held + nl + 1 - pos, out)
        self._line_off = self._base + nl + 1
        return nl + 1

    def _noise(self, count: int, out: list[Token]) -> None:
        self._noise_run.add(count, self._line_off, out)

    def _open(self, slot_id: str, index: str | None) -> None:
        self._in = True
        self._cur = (int(slot_id), _index(index))
        self._tail = ""
        self._line_text = False

    # -- inside a frame ----------------------------------------------------------------

    def _feed_in(self, text: str, pos: int, out: list[Token]) -> int:
        nl = text.find("\n", pos)
        seg_end = len(text) if nl < 0 else nl
        piece = text[pos:seg_end]
        k = piece.rfind("<")
        if k >= 0:
            self._text(self._tail + piece[:k], out)
            self._tail = piece[k:]
            self._tail_off = self._base + pos + k
        elif self._tail:
            self._tail += piece
        else:
            self._text(piece, out)
        tail = self._tail
        if tail and (len(tail) > _MAX_HOLD or _TAG_PREFIX.fullmatch(tail) is None):
            self._tail = ""
            self._text(tail, out)
        if nl < 0:
            return len(text)
        self._end_line(out, final=False)
        if self._in:
            self._text("\n", out)
            self._line_text = False
        else:
            self._line_off = self._base + nl + 1
        return nl + 1

    def _end_line(self, out: list[Token], *, final: bool) -> None:
        """The current line ended (``final``: the stream ended): is its tail a tag?"""
        tail, self._tail = self._tail, ""
        if not tail:
            return
        m = _TAG.fullmatch(tail)
        if m is not None:
            closing = m.group(1) == "/"
            tag = (int(m.group(2)), _index(m.group(3)))
            at_line_start = not self._line_text
            if closing and (at_line_start or tag == self._cur):
                if tag != self._cur:
                    out.append(
                        Diag(
                            "mismatched_close",
                            f"closing tag </{_label(tag)[1:]} closed frame {_label(self._cur)}",
                            self._tail_off,
                        )
                    )
                out.append(Close(self._tail_off))
                self._in = False
                return
            if not closing and at_line_start and tag[0] in self._known and not final:
                cur = self._cur
                out.append(
                    Diag(
                        "nested_open",
                        f"frame {_label(cur)} was still open when {_label(tag)} opened;"
                        " it was closed there",
                        self._tail_off,
                    )
                )
                out.append(Close(self._tail_off))
                self._cur = tag
                out.append(self._open_token(self._tail_off))
                return
        self._text(tail, out)

    def _open_token(self, offset: int) -> Open:
        slot_id, index = self._cur
        return Open(slot_id if slot_id in self._known else None, index, offset, str(slot_id))

    def _text(self, text: str, out: list[Token]) -> None:
        if text:
            out.append(Text(text))
            if not self._line_text and text.strip(" \t"):
                self._line_text = True


def _label(tag: tuple[int, int | None]) -> str:
    return f"<{tag[0]}>" if tag[1] is None else f"<{tag[0]}:{tag[1]}>"
