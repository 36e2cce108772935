"""Issue 15, item 8 (second half): diagnostics cannot flood.

250 KB of unknown-id and duplicate frames used to make one event each (50,000 SSE
messages). Per pass, at most ``Limits.max_diagnostics_per_code`` diagnostics of one code
are emitted; the rest are counted and reported once, as ``diagnostics_suppressed``, when
the pass ends. The assembler keeps at most 1,000 diagnostics in memory.
"""

from __future__ import annotations

import pytest

from slotflight import Assembler, Limits, compile
from slotflight.syntax import get_syntax
from tests.schema_support import SYNTAXES, raw_frame, stray_frame

SCHEMA = {
    "type": "object",
    "properties": {"a": {"type": "string"}},
    "additionalProperties": False,
}


def _flood(syntax: str, count: int) -> str:
    """A good frame, then ``count`` times a stray frame and a duplicate of the first."""
    plan = compile(SCHEMA)
    good = raw_frame(plan, 1, "x", syntax, end=False)
    stray, _ = stray_frame(syntax)
    end = "end\n" if get_syntax(syntax).end_marker else ""
    return good + (stray + raw_frame(plan, 1, "y", syntax, end=False)) * count + end


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_diagnostics_are_coalesced_per_code_per_pass(syntax: str) -> None:
    plan = compile(SCHEMA)
    asm = Assembler(plan, syntax=syntax)
    events = []
    text = _flood(syntax, 12_000)
    for start in range(0, len(text), 4096):
        events += asm.feed(text[start : start + 4096])
    events += asm.close()
    diagnostics = [e for e in events if e.type == "diagnostic"]
    by_code: dict[str, int] = {}
    for event in diagnostics:
        by_code[event.code] = by_code.get(event.code, 0) + 1  # type: ignore[attr-defined]
    _, stray_code = stray_frame(syntax)
    assert by_code == {stray_code: 20, "duplicate_frame": 20, "diagnostics_suppressed": 2}
    summaries = [e.message for e in diagnostics if e.code == "diagnostics_suppressed"]  # type: ignore[attr-defined]
    assert sorted(summaries) == sorted(
        f"11980 more {code!r} diagnostics in this pass were not reported one by one"
        for code in ("duplicate_frame", stray_code)
    )
    assert len(asm.diagnostics) <= 1000
    assert asm.outcome.ok and asm.state == {"a": "x"}


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_the_bound_is_configurable_and_counts_again_in_a_new_pass(syntax: str) -> None:
    plan = compile(
        {
            **SCHEMA,
            "properties": {**SCHEMA["properties"], "b": {"type": "integer"}},
            "required": ["a", "b"],
        }
    )
    asm = Assembler(plan, syntax=syntax, limits=Limits(max_diagnostics_per_code=2))
    text = _flood(syntax, 5)
    events = asm.feed(text) + asm.close()
    stray, stray_code = stray_frame(syntax)
    assert [e.code for e in events if e.type == "diagnostic"].count(stray_code) == 2  # type: ignore[attr-defined]
    _, _retry_events = asm.begin_retry()
    again = asm.feed(stray) + asm.close()
    assert [e.code for e in again if e.type == "diagnostic"][:1] == [stray_code]  # type: ignore[attr-defined]
