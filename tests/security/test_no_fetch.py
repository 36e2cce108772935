"""Issue 15, item 1: no code path fetches anything a schema names.

Every schema refers to a trap server on 127.0.0.1; the trap must get no request while the
schema is compiled and while model output is validated against it. References the
compiler cannot resolve inside the document are a :class:`SchemaError` naming the
``$ref``; a validator built by hand around such a reference fails the slot instead.
"""

from __future__ import annotations

import urllib.request
from typing import Any

import httpx
import pytest

from slotflight import Assembler, SchemaError, Slot, SlotPlan, compile, render_frames
from slotflight.testing import AppServer, ScriptedServer
from slotflight.web import create_app
from tests.schema_support import SYNTAXES, assemble, round_trip
from tests.security.trap import Trap


def test_the_trap_counts_what_reaches_it(trap: Trap) -> None:
    with urllib.request.urlopen(trap.ref("probe"), timeout=5) as response:
        assert b"INTERNAL-SECRET-42" in response.read()
    assert trap.requests == ["GET /probe"]


def _hostile(trap: Trap) -> list[tuple[dict[str, Any], str]]:
    """(schema, location of the offending $ref): the positions the attack used."""
    return [
        (
            {
                "type": "object",
                "properties": {"a": {"anyOf": [{"$ref": trap.ref()}, {"type": "integer"}]}},
            },
            "/properties/a/anyOf/0/$ref",
        ),
        (
            {
                "type": "object",
                "properties": {
                    "grid": {
                        "type": "array",
                        "items": {"type": "array", "items": {"$ref": trap.ref()}},
                    }
                },
            },
            "/properties/grid/items/items/$ref",
        ),
        (
            {
                "$id": trap.ref("root.json"),
                "type": "object",
                "properties": {"a": {"$ref": "other.json"}},
            },
            "/properties/a/$ref",
        ),
        ({"$ref": trap.ref()}, "/$ref"),
    ]


def test_a_remote_reference_is_a_schema_error_and_nothing_is_fetched(trap: Trap) -> None:
    for schema, location in _hostile(trap):
        with pytest.raises(SchemaError) as info:
            compile(schema)
        assert info.value.location == location
        assert "nothing is fetched" in info.value.message
    assert trap.requests == []


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_a_root_id_with_relative_references_resolves_locally(trap: Trap, syntax: str) -> None:
    schema = {
        "$id": trap.ref("schemas/root.json"),
        "type": "object",
        "properties": {
            "grid": {
                "type": "array",
                "items": {"type": "array", "items": {"$ref": "root.json#/$defs/N"}},
            },
            "n": {"$ref": "#/$defs/N"},
        },
        "$defs": {"N": {"enum": [1, 2]}},
        "additionalProperties": False,
    }
    plan = compile(schema)
    round_trip(plan, {"grid": [[1, 2]], "n": 2}, syntax)
    text = render_frames(plan, {"grid": [[1]]}, syntax).replace("[[1]]", '[["guess"]]')
    failed = assemble(plan, text, syntax).of_type("slot-failed")
    assert [e.error.code for e in failed] == ["json_schema"]
    assert "SECRET" not in failed[0].error.message
    assert trap.requests == []


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_validators_never_fetch_even_for_a_plan_built_by_hand(trap: Trap, syntax: str) -> None:
    """A plan that never went through the compiler still validates with local references
    only: the remote reference fails the slot, then the whole-object check."""
    remote = {"$ref": trap.ref()}
    slot = Slot(1, ("a",), "json", True, False, "A", schema=remote)
    plan = SlotPlan(slots=(slot,), schema={"type": "object", "properties": {"a": remote}})
    asm = Assembler(plan, syntax=syntax)
    asm.feed(render_frames(plan, {"a": "guess"}, syntax))
    asm.close()
    assert [e.code for e in asm.outcome.errors] == ["validation_error"]
    checked = SlotPlan(slots=(Slot(1, ("a",), "string", True, False, "A"),), schema=plan.schema)
    asm = Assembler(checked, syntax=syntax)
    asm.feed(render_frames(checked, {"a": "guess"}, syntax))
    asm.close()
    assert [e.code for e in asm.outcome.errors] == ["model_invalid"]
    assert trap.requests == []


async def test_the_gateway_answers_a_hostile_reference_with_a_json_422(trap: Trap) -> None:
    body = {
        "model": "scripted",
        "messages": [{"role": "user", "content": "hi"}],
        "schema": {
            "type": "object",
            "properties": {"a": {"anyOf": [{"$ref": trap.ref()}, {"type": "integer"}]}},
        },
    }
    async with (
        ScriptedServer() as upstream,
        AppServer(create_app(upstream.base_url)) as app,
        httpx.AsyncClient(base_url=app.url, timeout=30) as client,
    ):
        response = await client.post("/v1/slot-streams", json=body)
        assert response.status_code == 422
        assert response.headers["content-type"].startswith("application/json")
        error = response.json()["error"]
        assert error["location"] == "/properties/a/anyOf/0/$ref"
        assert (await client.get("/health")).status_code == 200
        assert upstream.requests == []
    assert trap.requests == []
