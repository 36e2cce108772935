"""Slot values that must not reach the state as written: a lone surrogate an escape
writes in a ``json`` slot (it becomes U+FFFD, as in quoted text), and a number beyond a
double's range written out as an integer (it fails like ``1e999``)."""

from __future__ import annotations

import json
import math
import re
from typing import Any

import pytest
from pydantic import BaseModel

from slotflight.assemble.assembler import Assembler
from slotflight.assemble.decode import replace_surrogates_in
from slotflight.assemble.events import SlotFailed
from slotflight.plan.compiler import compile as compile_schema
from tests.assembler_support import SYNTAXES, drive, frames

_LONE = re.compile("[\ud800-\udfff]")

PLAN = compile_schema(
    {
        "type": "object",
        "properties": {"a": {"type": "string"}, "j": {"type": "object"}},
        "required": ["a"],
    }
)
REST = compile_schema(
    {
        "type": "object",
        "properties": {"a": {"type": "string"}},
        "additionalProperties": True,
        "required": ["a"],
    }
)


def _strict(value: Any) -> str:
    """``value`` as UTF-8 JSON, as a web layer sends it (raises on a lone surrogate)."""
    text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    text.encode("utf-8")
    assert _LONE.search(text) is None
    return text


@pytest.mark.parametrize("syntax", SYNTAXES)
@pytest.mark.parametrize(
    ("written", "expected"),
    [
        ('{"k": "\\ud800"}', {"k": "\ufffd"}),
        ('{"\\udfff": 1}', {"\ufffd": 1}),
        (
            '{"k": ["a\\ud83d", {"\\udc00x": "\\ud83d\\ude00"}]}',
            {"k": ["a\ufffd", {"\ufffdx": "😀"}]},
        ),
        ('{"\\ud800": 1, "\\udbff": 2}', {"\ufffd": 2}),
    ],
)
def test_json_slot_escaped_lone_surrogates_become_replacement_characters(
    syntax: str, written: str, expected: dict[str, Any]
) -> None:
    text = frames([("1", "x"), ("2", written)], syntax, PLAN)
    run = drive([text], PLAN, syntax=syntax)
    assert run.final == {"a": "x", "j": expected}
    _strict(run.final)
    for event in run.events:
        _strict(event.to_json())


@pytest.mark.parametrize("syntax", ["v3", "v4"])
def test_rest_slot_escaped_lone_surrogates_become_replacement_characters(syntax: str) -> None:
    run = drive(['a: x\nother_keys: {"\\ud800k": "v\\udfff"}\nend\n'], REST, syntax=syntax)
    assert run.final == {"a": "x", "\ufffdk": "v\ufffd"}
    _strict(run.final)


def test_a_model_field_of_any_json_takes_the_replaced_text() -> None:
    class Model(BaseModel):
        a: str
        j: dict[str, Any]

    asm = Assembler(compile_schema(Model), syntax="v4")
    asm.feed('a: x\nj: {"k": "\\ud800"}\nend\n')
    asm.close()
    assert asm.outcome.ok, asm.outcome.errors
    assert asm.result.j == {"k": "\ufffd"}


def test_replace_surrogates_in_leaves_clean_values_as_they_are() -> None:
    value = {"a": [1, "b", {"c": None, "d": True}], "e": 1.5}
    assert replace_surrogates_in(value) is value
    assert value == {"a": [1, "b", {"c": None, "d": True}], "e": 1.5}
    assert replace_surrogates_in("\ud800a") == "\ufffda"
    assert replace_surrogates_in(3) == 3


class Reading(BaseModel):
    x: float


BEYOND = ["1" + "0" * 400, "-" + "9" * 310, "2" + "0" * 308]
WITHIN = ["1" + "0" * 300, "-" + "1" * 308, "9007199254740993"]


@pytest.mark.parametrize("written", ["1e999", *BEYOND, "+2" + "0" * 308, "$2" + ",000" * 103])
def test_number_beyond_a_double_fails_its_slot_as_1e999_does(written: str) -> None:
    run = drive([f"x: {written}\nend\n"], compile_schema(Reading), syntax="v4")
    failed = [e.error.code for e in run.events if isinstance(e, SlotFailed)]
    assert failed[0] == "float_parsing"
    assert "x" not in run.final
    assert run.asm is not None and not run.asm.outcome.ok and run.asm.outcome.retryable


@pytest.mark.parametrize("written", WITHIN)
def test_integer_within_a_double_is_kept_as_written(written: str) -> None:
    run = drive([f"x: {written}\nend\n"], compile_schema(Reading), syntax="v4")
    assert run.final == {"x": int(written)}
    assert run.asm is not None and run.asm.outcome.ok
    assert math.isfinite(run.asm.result.x)


def test_number_over_the_digit_bound_still_fails_as_an_integer_text() -> None:
    run = drive([f"x: {'9' * 5000}\nend\n"], compile_schema(Reading), syntax="v4")
    failed = [e.error.code for e in run.events if isinstance(e, SlotFailed)]
    assert failed[0] == "int_parsing"


class Floats(BaseModel):
    j: dict[str, float]


@pytest.mark.parametrize("written", BEYOND)
def test_json_slot_integer_beyond_a_double_fails_the_slot(written: str) -> None:
    plan = compile_schema(Floats)
    run = drive([f'j: {{"a": [{written}]}}\nend\n'], plan, syntax="v4")
    failed = [e.error for e in run.events if isinstance(e, SlotFailed)]
    assert failed[0].code == "json_invalid" and "double" in failed[0].message
    assert run.asm is not None and run.asm.outcome.retryable


@pytest.mark.parametrize("written", WITHIN)
def test_json_slot_integer_within_a_double_is_kept_exact(written: str) -> None:
    run = drive([f'a: x\nj: {{"n": {written}}}\nend\n'], PLAN, syntax="v4")
    assert run.final == {"a": "x", "j": {"n": int(written)}}


class _Counted(BaseModel):
    title: str
    count: int


@pytest.mark.parametrize("written", ["2.0", "2.", "20e-1"])
def test_a_whole_number_with_a_fraction_is_a_models_int(written: str) -> None:
    """``2.0`` is an integer to JSON Schema; a Pydantic model's ``int`` field gets ``2``
    (the strict final check refuses the float ``2.0``, which failed every pass)."""
    asm = Assembler(compile_schema(_Counted))
    asm.feed(f"title: a\ncount: {written}\nend\n")
    asm.close()
    assert asm.outcome.ok
    assert asm.result == _Counted(title="a", count=2)
    assert type(asm.state["count"]) is int
    schema = compile_schema(_Counted.model_json_schema())
    plain = Assembler(schema)
    plain.feed(f"title: a\ncount: {written}\nend\n")
    plain.close()
    assert plain.outcome.ok and plain.state["count"] == 2.0
    assert type(plain.state["count"]) is float  # a JSON Schema's integer as written
