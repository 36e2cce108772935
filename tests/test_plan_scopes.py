"""Slot schemas copied out of the document keep every ``$id`` scope, and enum members
written the same way each come back as themselves, in every syntax."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest

import slotflight
from slotflight.plan.compiler import compile
from slotflight.syntax import render_frames
from tests.grammar_support import grammar_engine
from tests.schema_support import assemble, round_trip

SYNTAXES = sorted(slotflight.SYNTAXES)
ROOT = "http://example.com/root.json"


def _scoped(keyword: str, inner: Any) -> dict[str, Any]:
    """``inner`` under ``keyword`` of property ``a``, with an ``$id`` of its own whose
    ``$defs/x`` is an integer (the root's ``$defs/x`` is a string)."""
    sub = {"$id": "sub.json", **inner, "$defs": {"x": {"allOf": [{"type": "integer"}]}}}
    node: dict[str, Any] = {"type": "object" if keyword == "additionalProperties" else "array"}
    node[keyword] = sub
    return {
        "$id": ROOT,
        "type": "object",
        "properties": {"a": node},
        "$defs": {"x": {"allOf": [{"type": "string"}]}},
    }


@pytest.mark.parametrize(
    ("schema", "valid", "invalid"),
    [
        (_scoped("additionalProperties", {"$ref": "#/$defs/x/allOf/0"}), {"k": 1}, {"k": "s"}),
        (_scoped("items", {"type": "array", "items": {"$ref": "#/$defs/x"}}), [[1, 2]], [["s"]]),
        (_scoped("items", {"not": {"$ref": "#/$defs/x"}}), [["s"], {}], [3]),
    ],
    ids=["additionalProperties", "items", "items-not"],
)
def test_an_id_under_a_single_schema_keyword_scopes_its_references(
    schema: dict[str, Any], valid: Any, invalid: Any
) -> None:
    checker = jsonschema.Draft202012Validator(schema)
    assert checker.is_valid({"a": valid}) and not checker.is_valid({"a": invalid})
    plan = compile(schema)
    slot = next(s for s in plan.slots if s.path.startswith("a"))
    assert "$id" not in str(slot.schema)  # self-contained: every reference rewritten
    round_trip(plan, {"a": valid}, "v4")
    text = render_frames(plan, {"a": invalid}, "v4")
    assert not assemble(plan, text, "v4").asm.outcome.ok


def test_an_id_under_items_resolves_its_own_definitions() -> None:
    schema = _scoped("items", {"type": "array", "items": {"$ref": "#/$defs/y"}})
    schema["properties"]["a"]["items"]["$defs"] = {"y": {"type": "integer"}}
    plan = compile(schema)  # the root has no $defs/y
    round_trip(plan, {"a": [[1, 2]]})


# -- enum members written alike -------------------------------------------------------------

COLLIDING = [
    ["1", 1],
    [1, "1"],
    [True, "true"],
    [1.5, "1.5"],
    ["null", None],
    ['"a"', "a"],
    ['"a"'],
    [1, "1", '"1"'],
    ["x y", 2.0, "2.0", 2],
    # members that would not read back bare: white space around them, empty, a
    # control character (a line break, a NUL no grammar matches)
    ["a", "a "],
    [" a"],
    ["", "b"],
    ["\t", "a\u00a0", "\u3000"],
    ["a\x00b", "a\nb", "a\x1fb"],
]


def _enum_schema(members: list[Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"a": {"enum": members}, "b": {"type": "array", "items": {"enum": members}}},
        "required": ["a"],
        "additionalProperties": False,
    }


@pytest.mark.parametrize("syntax", SYNTAXES)
@pytest.mark.parametrize("members", COLLIDING, ids=str)
def test_enum_members_written_alike_read_back_as_themselves(
    members: list[Any], syntax: str
) -> None:
    plan = compile(_enum_schema(members))
    for member in members:
        fed = round_trip(plan, {"a": member, "b": [member, member]}, syntax)
        kinds = {type(fed.state["a"]), *(type(item) for item in fed.state["b"])}
        assert kinds == {type(member)}, (member, fed.state)


def test_only_a_colliding_text_member_is_written_as_a_json_string() -> None:
    plan = compile(_enum_schema(["1", 1, "a", '"b"', '"a"']))
    assert '<a; "1" | 1 | a | "b" | "\\"a\\"">' in slotflight.prompt(plan, "v4")
    assert render_frames(plan, {"a": "a"}, "v4").startswith("a: a\n")
    assert render_frames(plan, {"a": "1"}, "v4").startswith('a: "1"\n')
    assert render_frames(plan, {"a": '"b"'}, "v4").startswith('a: "b"\n')


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_the_grammar_admits_every_member_as_written(syntax: str) -> None:
    engine = grammar_engine()
    for members in COLLIDING:
        plan = compile(_enum_schema(members))
        gbnf = slotflight.grammar(plan, syntax)
        for member in members:
            text = render_frames(plan, {"a": member, "b": [member]}, syntax)
            assert engine.accepts(gbnf, text), (members, member, text)
