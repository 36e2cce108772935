"""The frame-syntax seam: what a frame parser hands to the assembler.

A syntax (v1 tags, v2 compact lines) is only a lexer: it turns decoded text into a
flat sequence of tokens. Everything else (ids, indexes, state, validation, bounds,
diagnostics about meaning) is the assembler's, shared by every syntax.

Tokens are plain tuples for speed; the first item is the kind:

- ``(OPEN, slot_id, index_or_None, offset)``: a frame for ``slot_id`` starts.
- ``(TEXT, text)``: body text of the open frame, in order.
- ``(CLOSE, slot_id_or_None, index_or_None, offset)``: the open frame ends. ``slot_id``
  is what the closing tag named (``None`` when the syntax closes implicitly).
- ``(NOISE, count)``: ``count`` characters outside any frame were skipped.
- ``(NOISE_RUN, count, offset)``: a run of skipped text ended (one diagnostic each).
- ``(DIAG, code, message, offset)``: the lexer tolerated something.
- ``(END, offset)``: an explicit end-of-output marker: the output is complete.

Offsets are character offsets in the decoded, CRLF-normalised stream, so they do not
depend on how the stream was chunked.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, Protocol

if TYPE_CHECKING:
    from ..plan.model import SlotPlan

OPEN: Final = 0
TEXT: Final = 1
CLOSE: Final = 2
NOISE: Final = 3
NOISE_RUN: Final = 4
DIAG: Final = 5
END: Final = 6

#: Every registered frame syntax, by name: the one list to iterate over (``make_lexer``,
#: ``formatter`` and ``grammar`` each accept exactly these names).
SYNTAXES: Final = ("v1", "v2")

Token = tuple[Any, ...]


class FrameLexer(Protocol):
    """What a frame syntax implements. Sans-I/O: text in, tokens out."""

    def feed(self, text: str) -> list[Token]:
        """Lex more decoded text (CRLF already normalised to LF)."""
        ...

    def close(self) -> list[Token]:
        """The stream ended: resolve anything held back."""
        ...

    @property
    def in_frame(self) -> bool:
        """Whether a frame is open."""
        ...


class NoiseRun:
    """The run of skipped text a lexer is in: ``NOISE`` per piece, ``NOISE_RUN`` once."""

    __slots__ = ("count", "offset")

    def __init__(self) -> None:
        self.count = 0
        self.offset = 0

    def add(self, count: int, line_offset: int, out: list[Token]) -> None:
        """``count`` more characters skipped on the line starting at ``line_offset``."""
        if count <= 0:
            return
        if self.count == 0:
            self.offset = line_offset
        self.count += count
        out.append((NOISE, count))

    def end(self, out: list[Token]) -> None:
        """Frame text or the stream's end follows: report the run, if any."""
        if self.count:
            out.append((NOISE_RUN, self.count, self.offset))
            self.count = 0


def make_lexer(syntax: str, plan: SlotPlan) -> FrameLexer:
    """A lexer for ``syntax`` (``"v1"`` or ``"v2"``) reading frames for ``plan``."""
    if syntax == "v1":
        from .tags import TagLexer

        return TagLexer(frozenset(s.id for s in plan.slots))
    if syntax == "v2":
        from .lines import LineLexer

        return LineLexer.for_plan(plan)
    raise ValueError(f"unknown frame syntax {syntax!r} (expected 'v1' or 'v2')")
