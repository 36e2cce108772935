"""What a line start is (a frame line, the end line, a blank line or noise) does not depend
on where the chunks end, in every registered syntax: the text a lexer holds at a line
start reaches as far as each rule looks (``end`` with its 32 trailing blanks and its
newline; a blank line of at most 32 blanks in v1)."""

from __future__ import annotations

from typing import Any

import pytest

from slotflight.assemble.events import Diagnostic
from slotflight.plan.compiler import compile as compile_schema
from tests.assembler_support import SYNTAXES, Run, drive, end_marker, frames

#: Short names, so that no head needs a longer hold than the end line does.
PLAN = compile_schema(
    {
        "type": "object",
        "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
        "required": ["a"],
        "additionalProperties": False,
    }
)
LINE_SYNTAXES = [s for s in SYNTAXES if end_marker(s, PLAN).strip() == "end"]


def _chunkings(text: str, at: int) -> list[list[str]]:
    """The whole text, every character alone, and cuts around ``at``."""
    return [[text], list(text), *([text[:c], text[c:]] for c in range(at - 2, at + 40, 3))]


def _outcome(run: Run) -> tuple[Any, ...]:
    return run.non_delta(), run.deltas(), run.final


def _codes(run: Run) -> list[str]:
    return [e.code for e in run.events if isinstance(e, Diagnostic)]


def test_every_line_syntax_ends_with_an_end_line() -> None:
    assert set(LINE_SYNTAXES) == set(SYNTAXES) - {"v1"}


@pytest.mark.parametrize("syntax", LINE_SYNTAXES)
@pytest.mark.parametrize("blanks", [0, 1, 13, 14, 20, 31, 32, 33, 40])
def test_end_line_with_trailing_blanks_is_read_alike_in_any_chunks(
    syntax: str, blanks: int
) -> None:
    head = frames([("1", "x")], syntax, PLAN)
    text = head + "end" + " " * blanks + "\n" + frames([("2", "y")], syntax, PLAN)
    runs = [drive(chunks, PLAN, syntax=syntax) for chunks in _chunkings(text, len(head))]
    assert all(_outcome(run) == _outcome(runs[0]) for run in runs)
    if blanks <= 32:  # the end line: what follows is ignored
        assert runs[0].final == {"a": "x"}
        assert "after_end" in _codes(runs[0]) and "noise" not in _codes(runs[0])
    else:  # noise: the next frame is read
        assert runs[0].final == {"a": "x", "b": "y"}
        assert "noise" in _codes(runs[0])


@pytest.mark.parametrize("blanks", [0, 1, 31, 32, 33, 40, 63, 64, 70])
def test_v1_blank_line_between_frames_is_read_alike_in_any_chunks(blanks: int) -> None:
    head = frames([("1", "x")], "v1", PLAN)
    text = head + " " * blanks + "\n" + frames([("2", "y")], "v1", PLAN)
    runs = [drive(chunks, PLAN, syntax="v1") for chunks in _chunkings(text, len(head))]
    assert all(_outcome(run) == _outcome(runs[0]) for run in runs)
    assert runs[0].final == {"a": "x", "b": "y"}
    # a blank line has at most the 32 blanks an open tag may follow; more is noise
    assert ("noise" in _codes(runs[0])) == (blanks > 32)
