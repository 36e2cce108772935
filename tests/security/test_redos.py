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

from slotflight import Assembler, CheckSettings, SchemaError, compile, render_frames
from slotflight.assemble.events import SlotRejected
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


@pytest.mark.timeout(60)
def test_the_schema_copy_check_reads_a_long_word_in_linear_time() -> None:
    """A field's name with an index (``owner[1]``) was searched for from every position
    of a run of word characters: 300,000 of them took minutes (40,000 took 5.7 s)."""
    schema = _obj(owner={"type": "string"}, note={"type": "string"})
    plan = compile(schema)
    word = "a" * 300_000
    for value, copied in ((word, False), (f"{word} owner[1]", True)):
        assembler = Assembler(plan, checks=CheckSettings())
        events = assembler.feed(render_frames(plan, {"owner": "Ada", "note": value}))
        events += assembler.close()
        codes = [e.code for e in events if isinstance(e, SlotRejected)]
        assert codes == (["schema_copy"] if copied else [])


@pytest.mark.timeout(60)
def test_a_fenced_json_value_is_read_in_linear_time() -> None:
    """A JSON slot's value opening a code fence with a long run of letters was read with
    the language name given back a letter at a time, each try scanning the rest again:
    40,000 letters took 10 s. A fence that closes is still read through."""
    plan = compile(_obj(data={"type": "object"}))
    letters = "a" * 300_000
    for value, ok in ((f"```{letters}", False), ('```json {"k": 1}```', True)):
        assembler = Assembler(plan)
        assembler.feed(f"data: {value}\nend\n")
        assembler.close()
        assert assembler.outcome.ok is ok
        assert (assembler.state == {"data": {"k": 1}}) is ok
