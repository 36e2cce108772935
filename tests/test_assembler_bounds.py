"""The pass-wide and frame bounds do not depend on chunking: a chunk that crosses
``max_total_chars`` is read up to the bound, and a body over ``max_frame_chars`` is read
up to it before its slot fails, whatever the chunks."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slotflight.assemble.assembler import Limits
from slotflight.assemble.events import PassFailed, SlotFailed
from slotflight.plan.compiler import compile as compile_schema
from tests.assembler_support import SYNTAXES, Run, drive, frame, frames, split_at

PLAN = compile_schema(
    {
        "type": "object",
        "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
        "required": ["a"],
    }
)


def _a_then_long_b(syntax: str) -> tuple[str, str]:
    """The frame of ``a``, and the whole text: ``a``'s frame then a long ``b``."""
    head = frames([("1", "x")], syntax, PLAN)
    return head, head + frames([("2", "y" * 100)], syntax, PLAN)


def _outcome(run: Run) -> tuple[list[dict[str, Any]], dict[str, str], Any]:
    return run.non_delta(), run.deltas(), run.final


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_a_whole_reply_over_the_total_bound_keeps_the_slots_before_it(syntax: str) -> None:
    head, text = _a_then_long_b(syntax)
    limits = Limits(max_total_chars=len(head) + 20)
    whole = drive([text], PLAN, syntax=syntax, limits=limits)
    assert whole.final == {"a": "x"}
    failed = [e for e in whole.events if isinstance(e, PassFailed)]
    assert [e.error.code for e in failed] == ["limit_exceeded"]
    chunked = drive([head, text[len(head) :]], PLAN, syntax=syntax, limits=limits)
    assert _outcome(whole) == _outcome(chunked)


@pytest.mark.parametrize("syntax", SYNTAXES)
@settings(max_examples=60, deadline=None)
@given(bound=st.integers(0, 140), cuts=st.lists(st.integers(0, 140), max_size=6))
def test_total_bound_is_chunk_invariant(syntax: str, bound: int, cuts: list[int]) -> None:
    _, text = _a_then_long_b(syntax)
    limits = Limits(max_total_chars=bound)
    whole = drive([text], PLAN, syntax=syntax, limits=limits)
    chunked = drive(split_at(text, cuts), PLAN, syntax=syntax, limits=limits)
    assert _outcome(whole) == _outcome(chunked)


@pytest.mark.parametrize("syntax", SYNTAXES)
@settings(max_examples=60, deadline=None)
@given(bound=st.integers(1, 120), cuts=st.lists(st.integers(0, 160), max_size=8))
def test_frame_too_large_is_chunk_invariant(syntax: str, bound: int, cuts: list[int]) -> None:
    text = frame("1", "y" * 60 + " z" * 20, syntax=syntax) + frame("2", "3", syntax=syntax)
    limits = Limits(max_frame_chars=bound)
    whole = drive([text], syntax=syntax, limits=limits)
    chunked = drive(split_at(text, cuts), syntax=syntax, limits=limits)
    assert _outcome(whole) == _outcome(chunked)


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_frame_too_large_quotes_the_body_read_up_to_the_bound(syntax: str) -> None:
    text = frame("1", "y" * 100, syntax=syntax)
    limits = Limits(max_frame_chars=50)
    for chunks in ([text], [text[i : i + 10] for i in range(0, len(text), 10)]):
        run = drive(chunks, syntax=syntax, limits=limits)
        failed = [
            e for e in run.events if isinstance(e, SlotFailed) and e.error.code == "frame_too_large"
        ]
        assert len(failed) == 1
        quoted = failed[0].error.input or ""
        assert set(quoted) == {"y"} and 40 <= len(quoted) <= 50, quoted
        assert "summary" not in run.final
