"""A rest slot's keys are checked against the object's declared fields in O(1) each:
its work grows with the keys written plus the fields, never with their product, and its
verdict is the one its schema gives."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from slotflight import Assembler, compile, render_frames
from slotflight.assemble.validation import validator_for
from tests.schema_support import CountedName


def _compares(fields: int, keys: int) -> int:
    """Comparisons of field names while reading a rest slot of ``keys`` other keys, in
    an object of ``fields`` declared fields."""
    plan = compile(
        {
            "type": "object",
            "properties": {CountedName(f"p{i}"): {"type": "string"} for i in range(fields)},
        }
    )
    instance = {"p0": "x", **{f"k{i}": i for i in range(keys)}}
    text = render_frames(plan, instance, "v4")
    CountedName.compared = 0
    assembler = Assembler(plan, syntax="v4")
    assembler.feed(text)
    assembler.close()
    assert assembler.outcome.ok and assembler.state == instance
    return CountedName.compared


def test_a_rest_slot_s_keys_are_not_compared_with_every_field() -> None:
    assert _compares(200, 2000) <= 200 + 2000


_OPEN: dict[str, Any] = {
    "type": "object",
    "properties": {"a": {"type": "string"}, "b": {"type": "integer"}},
    "required": ["q"],
    "patternProperties": {"^x": {"type": "integer"}},
    "propertyNames": {"maxLength": 3},
}


@pytest.mark.parametrize(
    "rest",
    [
        {"c": 1},
        {"a": "y"},
        {"b": 2, "c": 1},
        {"q": 1},
        {"xy": 1},
        {"xy": "no"},
        {"long": 1},
        {"c": 1, "a": "y"},
        {},
    ],
)
def test_a_rest_slot_s_verdict_is_its_schema_s(rest: dict[str, Any]) -> None:
    plan = compile(_OPEN)
    slot = next(s for s in plan.slots if s.is_rest)
    expected = jsonschema.Draft202012Validator(slot.schema).is_valid(rest)
    value, error = validator_for(plan, slot)(json.dumps(rest))
    assert (error is None) is expected, error
    if error is None:
        assert value == rest


def test_a_declared_field_in_the_rest_slot_is_named() -> None:
    plan = compile(_OPEN)
    slot = next(s for s in plan.slots if s.is_rest)
    _, error = validator_for(plan, slot)('{"c": 1, "b": 2}')
    assert error is not None and error.code == "json_schema"
    assert "'b'" in error.message
