"""The GBNF grammar, checked with llama.cpp's own grammar engine (see grammar_support.py).

The tests that hold for every syntax run for each; the rest are about v1 frames (the v2
line syntax has its own in test_grammar_v2.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from pydantic import BaseModel, Field
from slotflight.syntax.grammar import UNBOUNDED_ITEMS, grammar, literal

from slotflight.bench.models import SCHEMAS
from slotflight.plan.compiler import compile
from slotflight.prompting.prompt import example_instance
from slotflight.syntax import render_frames
from tests.golden_models import GOLDEN_MODELS
from tests.grammar_support import (
    GrammarEngine,
    Place,
    Plan,
    Step,
    grammar_engine,
    llama_cpp,
    plan_text,
)
from tests.strategies import Case, model_and_instance, writes_every_item
from tests.test_frames_v2 import Log

SYNTAXES = ["v1", "v2"]


@pytest.fixture(scope="module")
def engine() -> GrammarEngine:
    return grammar_engine()


def _plan_text(**changes: Any) -> str:
    return plan_text("v1", **changes)


GOOD = _plan_text()


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_every_grammar_loads(engine: GrammarEngine, syntax: str) -> None:
    assert llama_cpp is not None
    models: list[type[BaseModel]] = [
        Plan,
        Step,
        Place,
        Log,
        *GOLDEN_MODELS.values(),
        *SCHEMAS.values(),
    ]
    for model in models:
        text = grammar(compile(model), syntax)
        llama_cpp.LlamaGrammar.from_string(text, verbose=False)
        assert engine.loads(text), text
    assert engine.loads(grammar(compile({"type": "object", "properties": {}}), syntax))
    assert not engine.loads("root ::= undefined-rule")


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_benchmark_instances_are_accepted(engine: GrammarEngine, syntax: str) -> None:
    path = Path(__file__).parent.parent / "benchmarks" / "instances.jsonl"
    for line in path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        plan = compile(SCHEMAS[row["schema"]])
        assert engine.accepts(grammar(plan, syntax), render_frames(plan, row["output"], syntax))


def test_valid_frames_are_accepted(engine: GrammarEngine) -> None:
    g = grammar(compile(Plan))
    assert engine.accepts(g, GOOD)
    # optional slots and the optional object may be left out; nullable ones may be null
    assert engine.accepts(g, _plan_text(place=None, ref=None, steps=[]))
    minimal = {"summary": "s", "priority": 5, "delta": 0, "ratio": 1e-05, "urgent": False}
    minimal |= {"mood": "calm", "tags": ["a", "b", "c"], "steps": []}
    assert engine.accepts(g, render_frames(compile(Plan), minimal))


@pytest.mark.parametrize(
    ("description", "broken"),
    [
        ("wrong enum value", GOOD.replace("<6>\nangry\n", "<6>\nfurious\n")),
        ("letters in an integer", GOOD.replace("<3>\n-3\n", "<3>\n-3x\n")),
        ("negative where minimum is 1", GOOD.replace("<2>\n2\n", "<2>\n-2\n")),
        ("boolean spelled yes", GOOD.replace("<5>\ntrue\n", "<5>\nyes\n")),
        ("number with a comma", GOOD.replace("<4>\n0.25\n", "<4>\n0,25\n")),
        ("month 13", GOOD.replace("2025-01-31\n</10:0>", "2025-13-31\n</10:0>")),
        ("bad uuid", GOOD.replace("3f2b8c1e-", "3f2b8c1g-")),
        ("missing required slot", GOOD.replace("<3>\n-3\n</3>\n", "")),
        ("unknown id", GOOD + "<99>\nx\n</99>\n"),
        ("too many scalar items", _plan_text(tags=["a", "b", "c", "d"])),
        ("too many object items", _plan_text(steps=[{"owner": "x", "hours": 1}] * 3)),
        ("index gap", GOOD.replace("<7:0>", "<7:1>").replace("</7:0>", "</7:1>")),
        ("slots out of order", GOOD.replace("<1>", "<0>", 1)),
        ("json over two lines", _plan_text(extra={"a": 1}).replace('{"a":1}', '{"a":\n1}')),
        ("text line starting with <", _plan_text(summary="ok\n<2>")),
        ("non-nullable null", GOOD.replace("<2>\n2\n", "<2>\nnull\n")),
        ("close tag on the value line", GOOD.replace("\n</1>\n", "</1>\n")),
        ("optional object without its required field", _plan_text(place={"zip": "69001"})),
        ("chatter after the frames", GOOD + "Done!\n"),
        ("stream ends inside a frame", GOOD[: GOOD.index("</2>")]),
    ],
)
def test_malformed_frames_are_rejected(
    engine: GrammarEngine, description: str, broken: str
) -> None:
    assert broken != GOOD, description
    assert not engine.accepts(grammar(compile(Plan)), broken), description


def test_object_items_must_be_grouped_by_index(engine: GrammarEngine) -> None:
    g = grammar(compile(Plan))
    start = GOOD.index("<8:0>")
    end = GOOD.index("<11>") if "<11>" in GOOD else GOOD.index("<13>")
    items = GOOD[start:end]
    frames = [f"<{chunk}" for chunk in items.split("<")[1:] if not chunk.startswith("/")]
    assert frames[0].startswith("<8:0>") and any(f.startswith("<8:1>") for f in frames)
    interleaved = items.replace("<9:0>\n3\n</9:0>\n", "").replace(
        "<8:1>", "<9:0>\n3\n</9:0>\n<8:1>"
    )
    assert interleaved != items
    assert not engine.accepts(g, GOOD.replace(items, interleaved))


def test_unbounded_arrays_are_capped(engine: GrammarEngine) -> None:
    class Bag(BaseModel):
        words: list[str]

    g = grammar(compile(Bag))
    plan = compile(Bag)
    assert engine.accepts(g, render_frames(plan, {"words": ["w"] * UNBOUNDED_ITEMS}))
    assert not engine.accepts(g, render_frames(plan, {"words": ["w"] * (UNBOUNDED_ITEMS + 1)}))
    assert engine.accepts(g, "")


def test_min_items_above_the_cap_are_spelled_out(engine: GrammarEngine) -> None:
    class Many(BaseModel):
        n: Annotated[list[int], Field(min_length=10)]

    plan = compile(Many)
    g = grammar(plan)
    assert engine.accepts(g, render_frames(plan, {"n": list(range(10))}))
    assert not engine.accepts(g, render_frames(plan, {"n": list(range(9))}))


def test_optional_items_need_at_least_one_frame(engine: GrammarEngine) -> None:
    class Note(BaseModel):
        a: str | None = None
        b: int | None = None

    class Notes(BaseModel):
        notes: list[Note]

    plan = compile(Notes)
    g = grammar(plan)
    assert engine.accepts(g, render_frames(plan, {"notes": [{"b": 1}, {"a": "x", "b": None}]}))
    assert not engine.accepts(g, "<2:0>\n1\n</2:0>\n<2:0>\n1\n</2:0>\n")


def test_enum_literals_are_escaped(engine: GrammarEngine) -> None:
    schema = {
        "type": "object",
        "properties": {"q": {"enum": ['say "hi"', "back\\slash", "two\nlines", 3, True]}},
        "required": ["q"],
    }
    plan = compile(schema)
    g = grammar(plan)
    for value in schema["properties"]["q"]["enum"]:  # type: ignore[index]
        assert engine.accepts(g, render_frames(plan, {"q": value})), value
    written = render_frames(plan, {"q": 3})  # the renderer refuses a value outside the enum
    assert not engine.accepts(g, written.replace("\n3\n", "\nsay hi\n"))
    assert literal('a"b\\c\n\x01') == '"a\\"b\\\\c\\n\\x01"'


def test_unknown_syntax_is_rejected() -> None:
    with pytest.raises(ValueError, match="syntax"):
        grammar(compile(Plan), syntax="v9")


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(model_and_instance())
@pytest.mark.parametrize("syntax", SYNTAXES)
def test_grammar_accepts_rendered_random_instances(
    engine: GrammarEngine, syntax: str, case: Case
) -> None:
    assume(writes_every_item(case.spec, case.instance))
    plan = compile(case.model)
    g = grammar(plan, syntax)
    assert engine.accepts(g, render_frames(plan, case.instance, syntax))
    assert engine.accepts(g, render_frames(plan, example_instance(plan), syntax))
