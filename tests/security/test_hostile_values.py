"""Issue 15, item 5 (the core part): no exception and no non-JSON value out of the core.

The compiler refuses what it cannot validate (:class:`SchemaError`); the assembler turns
every bad value into a slot failure. The state and every event stay strict JSON:
no ``NaN``/``Infinity`` (``1e999``), no lone surrogates.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from slotflight import Assembler, SchemaError, compile, render_frames
from tests.schema_support import SYNTAXES, assemble, raw_frame, strict_json


def _obj(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "additionalProperties": False}


PLAN_SCHEMA = _obj(
    i={"type": "integer"},
    n={"type": "number", "maximum": 10},
    j={"type": "array", "items": {"type": "array"}},
    m={"type": "number", "multipleOf": 0.5},
)


@pytest.mark.parametrize("syntax", SYNTAXES)
@pytest.mark.parametrize(
    ("slot", "body", "code"),
    [
        (1, "9" * 5_000, "int_parsing"),
        (2, "1e999", "float_parsing"),
        (2, "-1e999", "float_parsing"),
        (2, "9" * 5_000, "int_parsing"),
        (2, "NaN", "float_parsing"),
        (3, "[" * 1_000 + "]" * 1_000, "json_too_deep"),
        (3, "[[" + "9" * 5_000 + "]]", "json_invalid"),
        (3, "[[1e999]]", "json_invalid"),
        (3, "[[NaN, Infinity]]", "json_invalid"),
        (4, "1" + "0" * 400, "float_parsing"),  # beyond a double, as 1e999
    ],
)
def test_bad_values_fail_their_slot_and_everything_stays_json(
    syntax: str, slot: int, body: str, code: str
) -> None:
    plan = compile(PLAN_SCHEMA)
    fed = assemble(plan, raw_frame(plan, slot, body, syntax), syntax)
    assert [e.error.code for e in fed.of_type("slot-failed")] == [code]
    assert fed.state == {}
    for event in fed.events:
        strict_json(event.to_json())


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_lone_surrogates_in_text_input_become_replacement_characters(syntax: str) -> None:
    plan = compile(_obj(s={"type": "string"}))
    asm = Assembler(plan, syntax=syntax)  # text, not bytes: surrogates can only come so
    events = asm.feed(render_frames(plan, {"s": "ab"}, syntax).replace("ab", "a\ud800b"))
    events += asm.close()
    assert asm.state == {"s": "a\ufffdb"}
    for event in events:
        strict_json(event.to_json())


@pytest.mark.parametrize(
    ("schema", "location"),
    [
        (_obj(a={"type": "string", "pattern": "("}), "/properties/a/pattern"),
        (_obj(a={"type": "number", "multipleOf": 1e-320}), "/properties/a/multipleOf"),
        (_obj(a={"type": "number", "maximum": float("inf")}), "/properties/a/maximum"),
        (_obj(a={"enum": [1, float("nan")]}), "/properties/a/enum/1"),
        (_obj(a={"const": 10**5000}), "/properties/a/const"),
        (
            {"$id": "http://example.invalid/a.json", **_obj(a={"$ref": "b.json"})},
            "/properties/a/$ref",
        ),
        (
            json.loads('{"type": "object", "properties": {"a": {"default": 1e999}}}'),
            "/properties/a/default",
        ),
    ],
)
def test_what_cannot_be_validated_is_refused_when_compiling(
    schema: dict[str, Any], location: str
) -> None:
    with pytest.raises(SchemaError) as info:
        compile(schema)
    assert info.value.location == location


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_float_counts_and_deep_schemas_compile_or_are_refused_cleanly(syntax: str) -> None:
    plan = compile(_obj(a={"type": "string", "maxLength": 5.0, "minLength": 1.0}))
    assert plan.slots[0].constraints == {"maxLength": 5, "minLength": 1}
    deep: dict[str, Any] = {"type": "string"}
    for _ in range(1_000):
        deep = {"type": "object", "properties": {"x": deep}}
    with pytest.raises(SchemaError, match="max_schema_depth"):
        compile(deep)
