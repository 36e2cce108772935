"""An optional object whose fields are all optional: its grammar matches the fields in
order with at least one present, in rules linear in the number of fields, so llama.cpp
loads it however many fields there are (written inline, the choices grew with the
square of the fields and llama.cpp refused an optional group of 45 of them).
"""

from __future__ import annotations

from typing import Any

import pytest

from slotflight.plan.compiler import compile as compile_schema
from slotflight.syntax import SYNTAXES, grammar, render_frames
from tests.grammar_support import GrammarEngine

_FIELDS = 60


def _schema(fields: int) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "meta": {
                "type": "object",
                "properties": {f"f{i}": {"type": "boolean"} for i in range(fields)},
                "additionalProperties": False,
            },
        },
        "required": ["name"],
        "additionalProperties": False,
    }


def _split(syntax: str, *fields: int) -> tuple[str, list[str], str]:
    """The frames of ``fields`` set to ``true``, each on its own, and the text around
    them: ``(before, frames, after)``."""
    plan = compile_schema(_schema(_FIELDS))
    base = render_frames(plan, {"name": "x"}, syntax)
    texts = [
        render_frames(plan, {"name": "x", "meta": {f"f{field}": True}}, syntax) for field in fields
    ]
    start = min(
        next((i for i, (a, b) in enumerate(zip(base, text, strict=False)) if a != b), len(base))
        for text in texts
    )
    after = base[start:]
    assert all(text.endswith(after) for text in texts)
    return base[:start], [text[start : len(text) - len(after)] for text in texts], after


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_an_optional_object_of_many_optional_fields_loads_and_keeps_their_order(
    engine: GrammarEngine, syntax: str
) -> None:
    plan = compile_schema(_schema(_FIELDS))
    g = grammar(plan, syntax)
    assert engine.loads(g)
    for meta in [
        {},
        {"f0": True},
        {"f31": False},
        {f"f{_FIELDS - 1}": True},
        {"f0": True, "f30": False, f"f{_FIELDS - 1}": True},
        {f"f{i}": i % 2 == 0 for i in range(_FIELDS)},
    ]:
        data: dict[str, Any] = {"name": "x", "meta": meta} if meta else {"name": "x"}
        assert engine.accepts(g, render_frames(plan, data, syntax)), meta
    before, (first, middle, last), after = _split(syntax, 0, 30, _FIELDS - 1)
    assert engine.accepts(g, before + first + middle + last + after)
    for frames in [(middle, first), (last, middle), (middle, middle), (first, last, first)]:
        assert not engine.accepts(g, before + "".join(frames) + after), frames


def test_the_grammar_grows_linearly_with_the_fields() -> None:
    for syntax in SYNTAXES:
        sizes = [len(grammar(compile_schema(_schema(n)), syntax)) for n in (60, 120, 240)]
        assert sizes[2] - sizes[1] < 2.5 * (sizes[1] - sizes[0]), (syntax, sizes)


def _nested(depth: int) -> dict[str, Any]:
    node: dict[str, Any] = {
        "type": "object",
        "properties": {f"f{i}": {"type": "string"} for i in range(4)},
        "additionalProperties": False,
    }
    for _ in range(depth):
        node = {
            "type": "object",
            "properties": {**{f"f{i}": {"type": "string"} for i in range(3)}, "inner": node},
            "additionalProperties": False,
        }
    return node


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_optional_objects_nested_in_list_items_make_a_small_grammar(
    engine: GrammarEngine, syntax: str
) -> None:
    """An item's opener form asks for its units again; made once, nesting twelve
    optional objects of optional fields neither multiplies the grammar nor the work."""
    schema = {
        "type": "object",
        "properties": {"xs": {"type": "array", "items": _nested(12), "maxItems": 3}},
        "additionalProperties": False,
    }
    plan = compile_schema(schema)
    g = grammar(plan, syntax)
    assert len(g) < 100_000
    assert engine.loads(g)
    deep: dict[str, Any] = {"f3": "deep"}
    for _ in range(12):
        deep = {"inner": deep}
    data = {"xs": [{"f0": "a"}, deep, {"f2": "b", "inner": {"f1": "c"}}]}
    assert engine.accepts(g, render_frames(plan, data, syntax))
