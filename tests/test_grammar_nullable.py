"""A slot is nullable only where ``null`` passes its ``type``, ``enum`` and ``const``
together: a ``"null"`` type beside an enum or const without null offers no ``null``
the schema would then refuse (in the grammar, the prompt or the reading).
"""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest

from slotflight.plan.compiler import compile as compile_schema
from slotflight.syntax import SYNTAXES, grammar, render_frames
from tests.grammar_support import GrammarEngine


def _schema(kind: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"kind": kind},
        "required": ["kind"],
        "additionalProperties": False,
    }


@pytest.mark.parametrize(
    ("kind", "nullable"),
    [
        ({"type": ["string", "null"], "enum": ["Pod"]}, False),
        ({"type": ["string", "null"], "const": "Pod"}, False),
        ({"type": ["integer", "null"], "enum": [1, 2]}, False),
        ({"type": "string", "enum": ["Pod", None]}, False),
        ({"type": ["string", "null"], "enum": ["Pod", None]}, True),
        ({"enum": ["Pod", None]}, True),
        ({"type": ["string", "null"]}, True),
        ({"anyOf": [{"type": "string", "enum": ["Pod"]}, {"type": "null"}]}, True),
    ],
)
def test_a_slot_is_nullable_only_where_null_is_valid(kind: dict[str, Any], nullable: bool) -> None:
    schema = _schema(kind)
    (slot,) = compile_schema(schema).slots
    assert slot.nullable is nullable
    assert jsonschema.Draft202012Validator(schema).is_valid({"kind": None}) is nullable


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_the_grammar_offers_no_null_an_enum_refuses(engine: GrammarEngine, syntax: str) -> None:
    plan = compile_schema(_schema({"type": ["string", "null"], "enum": ["Pod", "Job"]}))
    g = grammar(plan, syntax)
    text = render_frames(plan, {"kind": "Pod"}, syntax)
    assert engine.accepts(g, text)
    assert not engine.accepts(g, text.replace("Pod", "null"))
    nullable = compile_schema(_schema({"type": ["string", "null"], "enum": ["Pod", None]}))
    assert engine.accepts(
        grammar(nullable, syntax), render_frames(nullable, {"kind": None}, syntax)
    )
