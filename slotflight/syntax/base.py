"""What a frame syntax is: the :class:`Syntax` contract and the tokens a lexer emits.

A syntax owns everything about the text of frames: how a slot is named on the wire
(:meth:`Syntax.ref`), reading (:meth:`Syntax.lexer`), writing (:meth:`Syntax.write`),
constraining (:meth:`Syntax.grammar`) and teaching it (its prompt templates in
``prompts/<Syntax.templates>/``). The assembler, the prompt and the SDK only ever call
these; they never format a syntax's wire text themselves.

A lexer turns decoded text into a flat sequence of tokens; everything else (state,
validation, bounds, diagnostics about meaning) is the assembler's, shared by every
syntax:

- :class:`Open`: a frame for a slot starts (``slot`` is ``None`` for an id the plan does
  not know; ``ref`` is the id as written, for diagnostics).
- :class:`Text`: body text of the open frame, in order.
- :class:`Close`: the open frame ended.
- :class:`Noise`: characters outside any frame were skipped; :class:`NoiseRun`: a run of
  skipped text ended (one diagnostic per run).
- :class:`Diag`: the lexer tolerated something.
- :class:`End`: an explicit end-of-output marker: the output is complete.

Offsets are character offsets in the decoded, CRLF-normalised stream, so they do not
depend on how the stream was chunked.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

from ..plan.instance import FrameValue
from ..plan.model import ArrayNode, Slot, SlotPlan
from .gbnf import Target

__all__ = [
    "Close",
    "Diag",
    "End",
    "FrameLexer",
    "Noise",
    "NoiseRun",
    "NoiseTracker",
    "Open",
    "Syntax",
    "Text",
    "Token",
]


@dataclass(frozen=True, slots=True)
class Open:
    slot: int | None
    index: int | None
    offset: int
    ref: str
    #: Where the value starts (after the head), when the lexer knows; else ``-1``.
    body: int = field(default=-1, compare=False)


@dataclass(frozen=True, slots=True)
class Text:
    text: str


@dataclass(frozen=True, slots=True)
class Close:
    offset: int
    #: The value was written as a quoted string (text, never ``null``).
    quoted: bool = False


@dataclass(frozen=True, slots=True)
class Noise:
    count: int


@dataclass(frozen=True, slots=True)
class NoiseRun:
    count: int
    offset: int


@dataclass(frozen=True, slots=True)
class Diag:
    code: str
    message: str
    offset: int


@dataclass(frozen=True, slots=True)
class End:
    offset: int


Token = Open | Text | Close | Noise | NoiseRun | Diag | End


class FrameLexer(Protocol):
    """Reads one pass of frame text. Sans-I/O: text in, tokens out."""

    def feed(self, text: str) -> list[Token]:
        """Lex more decoded text (CRLF already normalised to LF)."""
        ...

    def close(self) -> list[Token]:
        """The stream ended: resolve anything held back."""
        ...


class NoiseTracker:
    """The run of skipped text a lexer is in: :class:`Noise` per piece, :class:`NoiseRun`
    once when the run ends."""

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
        out.append(Noise(count))

    def end(self, out: list[Token]) -> None:
        """Frame text or the stream's end follows: report the run, if any."""
        if self.count:
            out.append(NoiseRun(self.count, self.offset))
            self.count = 0


class Syntax(ABC):
    """A frame syntax. Register instances in :mod:`slotflight.syntax`.

    The contract, tested for every registered syntax by one suite: text that
    :meth:`write` produced lexes back to the same values under any chunking; the
    grammar admits what :meth:`write` writes; the example in the prompt parses.
    """

    #: The name users pass as ``syntax=``.
    name: str
    #: The template folder under ``prompts/``.
    templates: str
    #: One line for listings (``slotflight compile --help``, docs).
    summary: str
    #: Whether the syntax has an explicit end-of-output marker (:class:`End`). Output
    #: that lacks it was cut short, whatever the server said.
    end_marker: bool = False

    @abstractmethod
    def ref(self, plan: SlotPlan, slot: Slot, index: int | None = None) -> str:
        """How frames name ``slot`` (at item ``index``): ``<3:1>``, ``3``, ``owner``."""

    def quotes(self, slot: Slot) -> bool:
        """Whether ``slot``'s value is always written as a JSON string (the prompt's form
        shows its placeholder in double quotes)."""
        return False

    def list_ref(self, plan: SlotPlan, array: ArrayNode) -> str:
        """How prompts name the list ``array`` (its path; a syntax that writes a list's
        name on the wire names it so)."""
        return array.path

    @abstractmethod
    def lexer(
        self, plan: SlotPlan, *, grammar: bool = False, max_string_chars: int | None = None
    ) -> FrameLexer:
        """A lexer reading one pass of frames for ``plan``.

        ``grammar``: the output is written under this syntax's :meth:`grammar` for
        ``plan``, built with ``max_string_chars``, so the lexer may rely on what that
        grammar rules out: a value the grammar keeps to one line ends at its newline
        instead of when the next line shows it does not continue. Output that breaks
        the grammar is still read, as noise where the rule it relied on was broken.
        """

    @abstractmethod
    def write(self, plan: SlotPlan, frames: Iterable[FrameValue]) -> str:
        """The frame text of ``frames`` (in plan order, items grouped by index),
        including any end marker the syntax has."""

    @abstractmethod
    def grammar(
        self,
        plan: SlotPlan,
        *,
        max_string_chars: int | None = None,
        only: Iterable[Target] | None = None,
    ) -> str:
        """The GBNF grammar (root rule ``root``) of the frame streams valid for ``plan``.

        ``only``: a follow-up pass's targets, ``(slot, index, required)`` with ``index``
        ``None`` for a whole slot or scalar list; the grammar then admits those frames,
        in that order, and nothing else.
        """

    def __repr__(self) -> str:
        return f"<frame syntax {self.name!r}>"
