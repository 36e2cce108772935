"""Real-world schema constructs (issue 13): each test is the minimal case of a defect seen
on the schema corpus, run in both frame syntaxes with random chunking."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict

from slotflight import Assembler, SchemaError, compile, grammar, prompt, render_frames
from slotflight.plan.instance import UnexpressibleValue
from slotflight.plan.model import REST
from tests.schema_support import SYNTAXES, assemble, round_trip

DRAFT4 = "http://json-schema.org/draft-04/schema#"
DRAFT7 = "http://json-schema.org/draft-07/schema#"


def swap(text: str, old: str, new: str) -> str:
    """``text`` with the frame value ``old`` written as ``new`` (either syntax)."""
    for before, after in (("\n", "\n"), (" ", "\n")):
        if f"{before}{old}{after}" in text:
            return text.replace(f"{before}{old}{after}", f"{before}{new}{after}", 1)
    raise AssertionError(f"no value {old!r} in {text!r}")


# -- a root that is not an object: the plan's single slot -----------------------------


@pytest.mark.parametrize("syntax", SYNTAXES)
@pytest.mark.parametrize(
    ("schema", "instance", "kind"),
    [
        ({"type": "string"}, "Export fails\nsince Monday", "string"),
        ({"type": "integer", "minimum": 0}, 42, "integer"),
        ({"enum": ["a", "b"]}, "b", "enum"),
        ({"type": "array", "items": {"type": "integer"}}, [1, 2, 3], "json"),
        (
            {
                "anyOf": [
                    {"type": "object", "properties": {"a": {"type": "string"}}},
                    {"type": "integer"},
                ]
            },
            {"a": "x"},
            "json",
        ),
        ({"allOf": [{"enum": [None]}, {"not": {"type": ["array", "object"]}}]}, None, "json"),
        ({"type": "array", "properties": {}, "items": {"type": "integer"}}, [7], "json"),
    ],
)
def test_a_root_that_is_not_an_object_is_one_slot(
    schema: dict[str, Any], instance: Any, kind: str, syntax: str
) -> None:
    plan = compile(schema)
    assert [(s.pointer, s.kind, s.required) for s in plan.slots] == [("", kind, True)]
    assert plan.root_slot is plan.slots[0]
    assert Assembler(plan, syntax=syntax).state is None  # null until the value is in
    round_trip(plan, instance, syntax, seed=3)
    assert prompt(plan, syntax) and grammar(plan, syntax)


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_a_string_root_streams_and_a_failed_root_goes_back_to_null(syntax: str) -> None:
    plan = compile({"type": "string", "maxLength": 5})
    text = render_frames(plan, "abc", syntax).replace("abc", "abcdefgh")
    fed = assemble(plan, text, syntax, seed=1)
    assert [s for s in fed.states if isinstance(s, str) and len(s) < 8]  # streamed prefixes
    assert fed.state is None and not fed.asm.outcome.ok
    failed = fed.of_type("slot-failed")[0]
    assert failed.error.code == "string_too_long"
    assert failed.patch == [{"op": "replace", "path": "", "value": None}]


# -- item 3: keys outside properties --------------------------------------------------


OPEN = {
    "type": "object",
    "properties": {"a": {"type": "string"}},
    "additionalProperties": {"type": "integer"},
}


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_keys_outside_properties_go_to_the_rest_slot_and_are_kept(syntax: str) -> None:
    plan = compile(OPEN)
    rest = plan.slots[-1]
    assert rest.is_rest and rest.segments == (REST,) and rest.kind == "json"
    assert (rest.pointer, rest.path, rest.required) == ("", "*", False)
    fed = round_trip(plan, {"a": "x", "b": 1, "c": 2}, syntax, seed=5)
    done = next(e for e in fed.of_type("slot-complete") if e.slot_id == rest.id)
    assert done.patch == [
        {"op": "add", "path": "/b", "value": 1},
        {"op": "add", "path": "/c", "value": 2},
    ]


@pytest.mark.parametrize("syntax", SYNTAXES)
@pytest.mark.parametrize(
    ("body", "code"),
    [('{"b": "no"}', "json_schema"), ('{"a": 1}', "json_schema"), ("[1]", "json_schema")],
)
def test_a_rest_value_is_checked_like_the_keys_it_holds(syntax: str, body: str, code: str) -> None:
    plan = compile(OPEN)
    text = render_frames(plan, {"a": "x", "z": 1}, syntax).replace('{"z":1}', body)
    fed = assemble(plan, text, syntax)
    assert [e.error.code for e in fed.of_type("slot-failed")] == [code]
    assert fed.state == {"a": "x"}


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_pattern_properties_with_closed_objects(syntax: str) -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"type": "string"}},
        "patternProperties": {"^x-": {"type": "integer"}},
        "additionalProperties": False,
    }
    plan = compile(schema)
    round_trip(plan, {"a": "s", "x-one": 1}, syntax)
    fed = assemble(plan, render_frames(plan, {"a": "s", "other": 1}, syntax), syntax)
    assert [e.error.code for e in fed.of_type("slot-failed")] == ["json_schema"]
    assert fed.state == {"a": "s"}


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_rest_slots_in_array_items_and_empty_items(syntax: str) -> None:
    schema = {
        "type": "object",
        "properties": {
            "items": {
                "type": "array",
                "items": {"type": "object", "properties": {"x": {"type": "integer"}}},
            }
        },
        "additionalProperties": False,
    }
    plan = compile(schema)
    assert [s.path for s in plan.slots] == ["items[].x", "items[].*"]
    round_trip(plan, {"items": [{"x": 1, "note": "n"}, {}, {"x": 3}]}, syntax, seed=9)


def test_pydantic_models_get_a_rest_slot_only_when_they_allow_extra_keys() -> None:
    class Closed(BaseModel):
        a: str

    class Open(BaseModel):
        model_config = ConfigDict(extra="allow")
        a: str

    assert [s.path for s in compile(Closed).slots] == ["a"]
    assert [s.path for s in compile(Open).slots] == ["a", "*"]
    assert [s.path for s in compile({**OPEN, "additionalProperties": False}).slots] == ["a"]


# -- item 4: defaults that break their own schema --------------------------------------


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_a_default_that_breaks_its_schema_is_never_filled_in(syntax: str) -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "string"},
            "tags": {"type": "array", "items": {"type": "string"}, "default": None},
            "n": {"type": "integer", "default": "seven"},
            "m": {"type": "integer", "default": 3},
        },
        "required": ["a"],
        "additionalProperties": False,
    }
    plan = compile(schema)
    assert plan.arrays[0].default is not None and not plan.by_path("n").has_default
    fed = assemble(plan, render_frames(plan, {"a": "x"}, syntax), syntax)
    assert fed.asm.outcome.ok and fed.state == {"a": "x", "m": 3}


# -- item 5: null for a required nullable object or array -----------------------------

NULLABLE = {
    "type": "object",
    "properties": {
        "a": {"type": "string"},
        "place": {
            "anyOf": [
                {
                    "type": "object",
                    "properties": {"city": {"type": "string"}},
                    "required": ["city"],
                    "additionalProperties": False,
                },
                {"type": "null"},
            ]
        },
        "tags": {"type": ["array", "null"], "items": {"type": "string"}, "minItems": 1},
    },
    "required": ["a", "place", "tags"],
    "additionalProperties": False,
}


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_a_required_nullable_object_or_array_can_be_null(syntax: str) -> None:
    plan = compile(NULLABLE)
    round_trip(plan, {"a": "x", "place": None, "tags": None}, syntax)
    round_trip(plan, {"a": "x", "place": {"city": "Oslo"}, "tags": ["t"]}, syntax)


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_a_cut_stream_asks_for_a_nullable_object_instead_of_making_it_null(syntax: str) -> None:
    plan = compile(NULLABLE)
    text = render_frames(plan, {"a": "x", "place": None, "tags": None}, syntax)
    if text.endswith("end\n"):
        text = text[: -len("end\n")]
    fed = assemble(plan, text, syntax, complete=False)
    assert not fed.asm.outcome.ok
    missing = {e.error.slot for e in fed.of_type("slot-failed") if e.error.code == "missing"}
    assert {"place.city", "tags"} <= missing
    assert "place" not in fed.state and "tags" not in fed.state


# -- item 6: BOM, temporal text, numeric enums, failed lone fields ---------------------


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_a_byte_order_mark_before_the_first_frame_is_dropped(syntax: str) -> None:
    plan = compile({**OPEN, "additionalProperties": False, "required": ["a"]})
    text = "\ufeff" + render_frames(plan, {"a": "x"}, syntax)
    for seed in range(5):  # the BOM's three bytes split every way
        assert assemble(plan, text, syntax, seed=seed).state == {"a": "x"}
    assert assemble(plan, text.encode("utf-8"), syntax).asm.outcome.ok


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_date_time_text_is_kept_as_written(syntax: str) -> None:
    schema = {
        "type": "object",
        "properties": {"at": {"type": "string", "format": "date-time"}},
        "additionalProperties": False,
    }
    plan = compile(schema)
    round_trip(plan, {"at": "2025-01-31T09:30:00.000Z"}, syntax)
    round_trip(plan, {"at": "2025-01-31T09:30:00+02:00"}, syntax)


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_numeric_enums_compare_as_numbers(syntax: str) -> None:
    schema = {
        "type": "object",
        "properties": {"v": {"enum": [1, 2, 2.5, True]}},
        "additionalProperties": False,
    }
    plan = compile(schema)
    for value in (1, 2, 2.5, True):
        round_trip(plan, {"v": value}, syntax)
    text = render_frames(plan, {"v": 2}, syntax).replace("2", "2.0", 1)
    state = assemble(plan, text, syntax).state
    assert state == {"v": 2} and isinstance(state["v"], float)  # the number as written
    with pytest.raises(UnexpressibleValue):
        render_frames(plan, {"v": 3}, syntax)


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_a_failed_lone_field_leaves_no_empty_item(syntax: str) -> None:
    schema = {
        "type": "object",
        "properties": {
            "items": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"n": {"type": "integer"}},
                    "additionalProperties": False,
                },
            }
        },
        "additionalProperties": False,
    }
    plan = compile(schema)
    text = swap(render_frames(plan, {"items": [{"n": 7}]}, syntax), "7", "seven")
    fed = assemble(plan, text, syntax)
    assert fed.of_type("slot-failed") and fed.state == {}
    assert fed.asm.retry_request() is not None


# -- item 7: what used to raise out of feed() / close() -------------------------------


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_constraints_of_another_type_are_ignored(syntax: str) -> None:
    schema = {
        "type": "object",
        "properties": {
            "n": {"type": "number", "minLength": 2},
            "s": {"type": "string", "minimum": 3},
            "i": {"type": "integer", "minimum": 1.5},
            "f": {"type": "string", "maxLength": 5.0},
        },
        "additionalProperties": False,
    }
    plan = compile(schema)
    assert plan.by_path("n").constraints == {} and plan.by_path("s").constraints == {}
    assert plan.by_path("f").constraints == {"maxLength": 5}
    round_trip(plan, {"n": 5, "s": "x", "i": 2, "f": "abcde"}, syntax)
    text = render_frames(plan, {"i": 2}, syntax).replace("2", "1")
    assert [e.error.code for e in assemble(plan, text, syntax).of_type("slot-failed")] == [
        "greater_than_equal"
    ]


def test_look_around_and_backreference_patterns_are_refused_when_compiling() -> None:
    for pattern in ("^(?=a)a$", "(a)\\1"):
        schema = {"type": "object", "properties": {"a": {"type": "string", "pattern": pattern}}}
        with pytest.raises(SchemaError) as info:
            compile(schema)
        assert info.value.location == "/properties/a/pattern"


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_two_whole_object_errors_on_one_slot_fail_it_once(syntax: str) -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"type": "string"}},
        "allOf": [
            {"properties": {"a": {"minLength": 5}}},
            {"properties": {"a": {"pattern": "^x"}}},
        ],
        "additionalProperties": False,
    }
    plan = compile(schema)
    fed = assemble(plan, render_frames(plan, {"a": "ab"}, syntax), syntax)
    assert len(fed.of_type("slot-failed")) == 1 and fed.state == {}
    assert fed.asm.retry_request() is not None


# A reference through the root ``$id`` from a JSON slot, and an absolute URL inside one:
# tests/security/test_no_fetch.py (with a trap server that must get no request).


# -- item 8: required names without a property, empty plans ---------------------------


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_a_required_name_without_a_property_is_a_required_json_slot(syntax: str) -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"type": "string"}},
        "patternProperties": {"^n": {"type": "integer"}},
        "required": ["a", "b", "n1"],
    }
    plan = compile(schema)
    b, n1 = plan.by_path("b"), plan.by_path("n1")
    assert (b.kind, b.required, n1.required, n1.schema) == ("json", True, True, {"type": "integer"})
    round_trip(plan, {"a": "x", "b": [1], "n1": 2, "other": True}, syntax)
    text = render_frames(plan, {"a": "x", "n1": 2}, syntax)
    fed = assemble(plan, text, syntax)
    assert [e.error.code for e in fed.of_type("slot-failed")] == ["missing"]


def test_required_names_an_object_forbids_are_schema_errors() -> None:
    closed = {
        "type": "object",
        "properties": {"a": {"type": "string"}},
        "additionalProperties": False,
    }
    with pytest.raises(SchemaError) as info:
        compile({**closed, "required": ["b"]})
    assert info.value.location == "/required"


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_an_object_with_nothing_to_generate_is_one_json_slot(syntax: str) -> None:
    class Empty(BaseModel):
        pass

    empty = {"type": "object", "properties": {}, "additionalProperties": False}
    for schema in (empty, Empty):
        plan = compile(schema)
        assert [(s.pointer, s.kind) for s in plan.slots] == [("", "json")]
        assert not plan.objects
        round_trip(plan, {}, syntax)
    plan = compile(empty)
    fed = assemble(plan, render_frames(plan, {"extra": 1}, syntax), syntax)
    assert not fed.asm.outcome.ok and fed.state is None


# -- item 9: one draft for compiling and validating ------------------------------------


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_draft_04_exclusive_bounds_are_booleans(syntax: str) -> None:
    schema = {
        "$schema": DRAFT4,
        "type": "object",
        "properties": {"n": {"type": "number", "minimum": 0, "exclusiveMinimum": True}},
        "additionalProperties": False,
    }
    plan = compile(schema)
    assert plan.by_path("n").constraints == {"exclusiveMinimum": 0}
    round_trip(plan, {"n": 0.5}, syntax)
    text = render_frames(plan, {"n": 0.5}, syntax).replace("0.5", "0")
    assert [e.error.code for e in assemble(plan, text, syntax).of_type("slot-failed")] == [
        "greater_than"
    ]


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_draft_07_ignores_what_stands_beside_ref(syntax: str) -> None:
    def schema(draft: str) -> dict[str, Any]:
        return {
            "$schema": draft,
            "type": "object",
            "properties": {"a": {"$ref": "#/definitions/S", "maxLength": 2}},
            "definitions": {"S": {"type": "string"}},
            "additionalProperties": False,
        }

    round_trip(compile(schema(DRAFT7)), {"a": "long text"}, syntax)
    modern = compile(schema("https://json-schema.org/draft/2020-12/schema"))
    text = render_frames(modern, {"a": "ab"}, syntax).replace("ab", "long text")
    assert not assemble(modern, text, syntax).asm.outcome.ok


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_typeless_properties_accept_any_value(syntax: str) -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"properties": {"b": {"type": "string"}}}},
        "additionalProperties": False,
    }
    plan = compile(schema)
    assert plan.by_path("a").kind == "json"
    for value in ({"b": "x"}, 5, "text"):
        round_trip(plan, {"a": value}, syntax)


# -- item 10: combinators beside a type ------------------------------------------------


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_a_type_list_beside_one_of_is_a_nullable_slot(syntax: str) -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {
                "type": ["string", "null"],
                "oneOf": [{"type": "null"}, {"type": "string", "minLength": 2}],
            }
        },
        "additionalProperties": False,
    }
    plan = compile(schema)
    a = plan.by_path("a")
    assert (a.kind, a.nullable) == ("string", True)
    round_trip(plan, {"a": "abc"}, syntax)
    round_trip(plan, {"a": None}, syntax)
    text = render_frames(plan, {"a": "abc"}, syntax).replace("abc", "q")
    assert not assemble(plan, text, syntax).asm.outcome.ok


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_an_object_root_with_one_of_expands_and_is_checked_whole(syntax: str) -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
        "oneOf": [{"required": ["a"]}, {"required": ["b"]}],
        "additionalProperties": False,
    }
    plan = compile(schema)
    assert [s.path for s in plan.slots] == ["a", "b"]
    round_trip(plan, {"a": "x"}, syntax)
    fed = assemble(plan, render_frames(plan, {"a": "x", "b": "y"}, syntax), syntax)
    assert [e.code for e in fed.asm.outcome.errors] == ["model_invalid"]


# -- issue 34: what the JSON Schema Test Suite showed ----------------------------------


@pytest.mark.parametrize("syntax", SYNTAXES)
@pytest.mark.parametrize(
    "meta",
    ["http://json-schema.org/draft-07/schema#", "https://json-schema.org/draft/2020-12/schema"],
)
def test_a_reference_to_a_meta_schema_resolves_locally(syntax: str, meta: str) -> None:
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "schema": {"$ref": meta}},
        "additionalProperties": False,
    }
    plan = compile(schema)
    assert plan.by_path("schema").schema == {"$ref": meta}
    round_trip(plan, {"name": "n", "schema": {"type": "integer", "minimum": 1}}, syntax)
    text = render_frames(plan, {"name": "n", "schema": {"minimum": "one"}}, syntax)
    assert not assemble(plan, text, syntax).asm.outcome.ok


DYNAMIC = {
    "$id": "https://example.com/strict-tree",
    "$dynamicAnchor": "node",
    "$ref": "#/$defs/tree",
    "unevaluatedProperties": False,
    "$defs": {
        "tree": {
            "$dynamicAnchor": "node",
            "type": "object",
            "properties": {
                "data": True,
                "children": {"type": "array", "items": {"$dynamicRef": "#node"}},
            },
        }
    },
}


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_a_document_with_dynamic_references_is_one_slot_checked_whole(syntax: str) -> None:
    plan = compile(DYNAMIC)
    assert [(s.pointer, s.kind) for s in plan.slots] == [("", "json")]
    good = {"data": 1, "children": [{"data": 2, "children": []}]}
    round_trip(plan, good, syntax)
    for bad in ({"daat": 1}, {"children": [5]}):
        assert not assemble(plan, render_frames(plan, bad, syntax), syntax).asm.outcome.ok


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_unevaluated_properties_admit_what_a_subschema_evaluates(syntax: str) -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"type": "string"}},
        "allOf": [{"properties": {"b": {"type": "integer"}}}],
        "unevaluatedProperties": False,
    }
    plan = compile(schema)
    assert plan.slots[-1].is_rest
    round_trip(plan, {"a": "x", "b": 2}, syntax)
    fed = assemble(plan, render_frames(plan, {"a": "x", "c": 2}, syntax), syntax)
    assert [e.code for e in fed.asm.outcome.errors] == ["model_invalid"]


@pytest.mark.parametrize("syntax", SYNTAXES)
@pytest.mark.parametrize(
    ("fmt", "good", "bad"),
    [
        ("date-time", "2025-01-31T09:30:00Z", "2025-01-31 09:30"),
        ("time", "09:30:00Z", "9.30"),
        ("hostname", "example.com", "-bad-.com"),
        ("uri", "https://example.com/a", "not a uri"),
        ("duration", "P1D", "1 day"),
    ],
)
def test_formats_are_checked_not_skipped(syntax: str, fmt: str, good: str, bad: str) -> None:
    schema = {
        "type": "object",
        "properties": {"v": {"type": "string", "format": fmt}},
        "required": ["v"],
        "additionalProperties": False,
    }
    plan = compile(schema)
    round_trip(plan, {"v": good}, syntax)
    assert not assemble(plan, render_frames(plan, {"v": bad}, syntax), syntax).asm.outcome.ok


class Moments(BaseModel):
    at: dt.time
    when: dt.datetime
    due: dt.datetime | None = None


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_a_models_naive_times_are_valid_and_a_json_schemas_are_not(syntax: str) -> None:
    """A Pydantic model writes and reads times and date-times without a zone, and its
    JSON Schema gives them the formats ``time`` and ``date-time``, which RFC 3339
    (JSON Schema's reading) refuses without one: a plan from the model checks them as
    the model does, a plan from the schema as JSON Schema does."""
    naive = Moments(at=dt.time(9, 30), when=dt.datetime(2025, 1, 31, 9, 30, 5))
    values = naive.model_dump(mode="json", exclude_none=True)
    assert values == {"at": "09:30:00", "when": "2025-01-31T09:30:05"}
    plan = compile(Moments)
    fed = assemble(plan, render_frames(plan, values, syntax), syntax)
    assert fed.asm.outcome.ok, fed.asm.outcome.errors
    assert Moments.model_validate(fed.state) == naive
    written = {"at": "09:30", "when": "2025-01-31 09:30", "due": "2025-02-01T10:00:00+01:00"}
    assert assemble(plan, render_frames(plan, written, syntax), syntax).asm.outcome.ok
    for bad in ({"at": "9.30"}, {"when": "1738315805"}, {"when": "2025-02-30T09:30:00"}):
        fed = assemble(plan, render_frames(plan, {**values, **bad}, syntax), syntax)
        assert [e.location for e in fed.asm.outcome.errors] == [f"/{next(iter(bad))}"], bad

    from_schema = compile(Moments.model_json_schema())
    fed = assemble(from_schema, render_frames(from_schema, values, syntax), syntax)
    assert sorted(e.location for e in fed.asm.outcome.errors) == ["/at", "/when"]
    zoned = {"at": "09:30:00Z", "when": "2025-01-31T09:30:05+01:00"}
    fed = assemble(from_schema, render_frames(from_schema, zoned, syntax), syntax)
    assert fed.asm.outcome.ok, fed.asm.outcome.errors
    assert fed.state == {**zoned, "due": None}
