"""Issue 15, item 2 (the core part): every amplification is bounded before the work.

A few hundred bytes of schema must not become minutes of CPU, millions of slots, a
megabyte prompt or an exponential grammar: each bound of :class:`CompileLimits` stops
the compiler (or the prompt and grammar builders) with a :class:`SchemaError` whose code
is ``schema_too_large`` and whose message names the bound.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from slotflight import CompileLimits, SchemaError, compile, grammar, prompt


def _refused(schema: dict[str, Any], bound: str, limits: CompileLimits | None = None) -> None:
    with pytest.raises(SchemaError) as info:
        compile(schema, limits=limits)
    assert info.value.code == "schema_too_large"
    assert f"({bound})" in info.value.message


def _obj(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "additionalProperties": False}


def test_sizes_the_schema_asks_to_generate_are_bounded() -> None:
    _refused(_obj(a={"type": "string", "minLength": 2_000_000}), "max_string_length")
    _refused({"type": "string", "minLength": 2_000_000}, "max_string_length")
    _refused(
        _obj(a={"type": "array", "items": {"type": "integer"}, "minItems": 200_000}),
        "max_min_items",
    )


def test_a_reference_dag_stops_at_the_slot_bound_while_expanding() -> None:
    """17 levels, each referring twice to the next: 2**17 slots if expanded."""
    defs: dict[str, Any] = {"L17": _obj(leaf={"type": "string"})}
    for level in range(16, -1, -1):
        child = {"$ref": f"#/$defs/L{level + 1}"}
        defs[f"L{level}"] = _obj(left=child, right=child)
    _refused({"$ref": "#/$defs/L0", "$defs": defs}, "max_slots")


def test_many_properties_and_the_configured_bounds() -> None:
    wide = _obj(**{f"p{i}": {"type": "string"} for i in range(8_800)})
    _refused(wide, "max_slots")
    small = _obj(a={"type": "string"}, b={"type": "string"})
    _refused(small, "max_slots", CompileLimits(max_slots=1))
    _refused(small, "max_compile_seconds", CompileLimits(max_compile_seconds=0))
    assert len(compile(small, limits=CompileLimits(max_slots=2)).slots) == 2


def test_the_prompt_is_bounded_before_it_is_written() -> None:
    fields = {f"p{i}": {"type": "string", "minLength": 90_000} for i in range(6)}
    _refused(_obj(**fields), "max_prompt_chars")
    long_text = compile(_obj(a={"type": "string", "minLength": 99_999}))
    assert len(prompt(long_text, "v2")) < 2 * 99_999 + 10_000  # built in linear time
    plan = replace(compile(_obj(a={"type": "string"})), limits=CompileLimits(max_prompt_chars=100))
    with pytest.raises(SchemaError, match="max_prompt_chars"):
        prompt(plan)  # the text itself is checked too


def test_the_grammar_of_nested_optional_objects_is_bounded() -> None:
    """Optional objects of optional fields nest: written as a list of alternatives, the
    grammar multiplied at every level; written as a chain of rules, it grows with the
    fields, and the bound still stops a grammar over it."""
    node: dict[str, Any] = _obj(**{f"f{i}": {"type": "string"} for i in range(4)})
    for _ in range(12):
        node = _obj(**{f"f{i}": {"type": "string"} for i in range(3)}, inner=node)
    plan = compile(node)
    small = compile(node, limits=CompileLimits(max_grammar_chars=2000))
    for syntax in ("v1", "v2", "v3", "v4"):
        assert len(grammar(plan, syntax)) < 300 * len(plan.slots)
        with pytest.raises(SchemaError) as info:
            grammar(small, syntax)
        assert "(max_grammar_chars)" in info.value.message
