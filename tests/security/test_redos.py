"""Issue 15, item 4: no regex backtracks.

``^(a+)+$`` against 28 ``a`` and ``!`` took 18 s with Python's ``re`` (each further ``a``
doubles it); these inputs use 60, which would not finish. Every pattern runs on a
linear-time engine: slot constraints, patterns inside JSON slots, ``patternProperties``
(also where ``additionalProperties`` consults them) and the ``regex`` format. A pattern
that engine cannot run is refused when the schema compiles.
"""

from __future__ import annotations

from typing import Any

import pytest

from slotflight import SchemaError, compile, render_frames
from slotflight.plan.validators import pattern_search
from tests.schema_support import SYNTAXES, assemble

EVIL = "^(a+)+$"
ATTACK = "a" * 60 + "!"


def _obj(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "additionalProperties": False}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("syntax", SYNTAXES)
@pytest.mark.parametrize(
    ("schema", "instance", "attack"),
    [
        (_obj(s={"type": "string", "pattern": EVIL}), {"s": "aaa"}, {"s": ATTACK}),
        (
            _obj(j={"type": "array", "items": {"type": "array", "items": {"pattern": EVIL}}}),
            {"j": [["aa"]]},
            {"j": [[ATTACK]]},
        ),
        (
            _obj(m={"type": "object", "patternProperties": {EVIL: {"type": "integer"}}}),
            {"m": {"aa": 1}},
            {"m": {ATTACK: "x", "aa": "y"}},
        ),
        (
            _obj(
                m={
                    "type": "object",
                    "patternProperties": {EVIL: {}},
                    "additionalProperties": False,
                }
            ),
            {"m": {"a": 1}},
            {"m": {ATTACK: 1}},
        ),
        (_obj(r={"type": "string", "format": "regex"}), {"r": "^a+$"}, {"r": "(?=a)"}),
    ],
)
def test_patterns_run_in_linear_time(
    syntax: str, schema: dict[str, Any], instance: dict[str, Any], attack: dict[str, Any]
) -> None:
    plan = compile(schema)
    assert assemble(plan, render_frames(plan, instance, syntax), syntax).asm.outcome.ok
    fed = assemble(plan, render_frames(plan, attack, syntax), syntax)
    assert not fed.asm.outcome.ok and fed.state == {}


@pytest.mark.timeout(60)
def test_the_engine_is_linear_and_refuses_what_it_cannot_run() -> None:
    assert not pattern_search(EVIL, "a" * 10_000 + "!")
    assert pattern_search(EVIL, "a" * 10_000)
    for pattern in ("(?<=a)b", "(a)\\1", "(?!x)"):
        schema = _obj(m={"type": "object", "patternProperties": {pattern: {}}})
        with pytest.raises(SchemaError, match="linear-time"):
            compile(schema)
