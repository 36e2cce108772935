"""The v2 GBNF grammar, checked with llama.cpp's own grammar engine (see grammar_support.py);
the tests that hold for every syntax are in test_grammar.py."""

from __future__ import annotations

from typing import Any

import pytest

from slotflight.assemble.assembler import Assembler
from slotflight.plan.compiler import compile
from slotflight.syntax import grammar, render_frames
from tests.grammar_support import PLAN_DATA, GrammarEngine, Plan, grammar_engine, plan_text
from tests.test_frames_v2 import Log

# a text line starting with the continuation marker must still read as text
DATA: dict[str, Any] = {**PLAN_DATA, "summary": f"{PLAN_DATA['summary']}\n| not a marker here"}


def _text(**changes: Any) -> str:
    return plan_text("v2", DATA, **changes)


GOOD = _text()


@pytest.fixture(scope="module")
def engine() -> GrammarEngine:
    return grammar_engine()


def test_rendered_frames_are_accepted(engine: GrammarEngine) -> None:
    g = grammar(compile(Plan), "v2")
    assert "\n|" in GOOD
    assert engine.accepts(g, GOOD)
    assert engine.accepts(g, GOOD.removesuffix("\n"))  # the end line may end the output
    assert engine.accepts(g, _text(place=None, ref=None, steps=[], summary=""))


def test_items_opening_with_an_optional_field_need_their_index(engine: GrammarEngine) -> None:
    plan = compile(Log)
    g = grammar(plan, "v2")
    text = render_frames(
        plan, {"entries": [{"when": "2025-01-01"}, {"note": "n", "when": "2025-01-02"}]}, "v2"
    )
    assert "1:1 n" in text
    assert engine.accepts(g, text)
    merged = text.replace("1:1 n", "1 n")
    assert not engine.accepts(g, merged)
    # what the grammar refuses is exactly what the parser would read differently
    asm = Assembler(plan, syntax="v2")
    asm.feed(merged)
    asm.close()
    assert asm.state["entries"][0] == {"note": "n", "when": "2025-01-01"}


@pytest.mark.parametrize(
    ("description", "broken"),
    [
        ("no end line", GOOD.removesuffix("end\n")),
        ("chatter after the end line", GOOD + "Done!\n"),
        ("chatter before the lines", "Sure:\n" + GOOD),
        ("a marker before the id", GOOD.replace("2 2\n", "@2 2\n")),
        ("a v1 frame", GOOD.replace("2 2\n", "<2>\n2\n</2>\n")),
        ("wrong enum value", GOOD.replace("6 angry\n", "6 furious\n")),
        ("letters in an integer", GOOD.replace("3 -3\n", "3 -3x\n")),
        ("no blank after the id", GOOD.replace("3 -3\n", "3-3\n")),
        ("a continuation after a scalar", GOOD.replace("3 -3\n", "3 -3\n|4\n")),
        ("an index on a scalar-list item", GOOD.replace("7 export", "7:0 export")),
        ("an index on a plain slot", GOOD.replace("2 2\n", "2:0 2\n")),
        ("missing required slot", GOOD.replace("3 -3\n", "")),
        ("unknown id", GOOD.replace("end\n", "99 x\nend\n")),
        ("too many scalar items", _text(tags=["a", "b", "c", "d"])),
        ("too many object items", _text(steps=[{"owner": "x", "hours": 1}] * 3)),
        ("json over two lines", _text(extra={"a": 1}).replace('{"a":1}', '{"a":\n|1}')),
        ("non-nullable null", GOOD.replace("2 2\n", "2 null\n")),
        ("stream ends inside a value", GOOD[: GOOD.index("6 angry") + 4]),
    ],
)
def test_malformed_lines_are_rejected(engine: GrammarEngine, description: str, broken: str) -> None:
    assert broken != GOOD, description
    assert not engine.accepts(grammar(compile(Plan), "v2"), broken), description
