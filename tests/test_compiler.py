"""The schema compiler: each construct, and invalid schemas."""

from __future__ import annotations

import datetime as dt
import enum
import uuid
from typing import Annotated, Any, Literal

import jsonschema
import pytest
from pydantic import BaseModel, Field, HttpUrl

from slotflight._errors import SchemaError
from slotflight.plan.compiler import compile
from slotflight.plan.model import INDEX, MISSING, Slot, SlotPlan


def slot(plan: SlotPlan, path: str) -> Slot:
    return plan.by_path(path)


class Address(BaseModel):
    street: str
    city: str = Field(description="City name.")


class Person(BaseModel):
    name: str
    address: Address
    age: int


def test_nested_model_ids_follow_document_order() -> None:
    plan = compile(Person)
    assert [(s.id, s.pointer) for s in plan.slots] == [
        (1, "/name"),
        (2, "/address/street"),
        (3, "/address/city"),
        (4, "/age"),
    ]
    street = slot(plan, "address.street")
    assert [p.pointer for p in street.parents] == ["/address"]
    assert street.parents[0].required and not street.parents[0].nullable
    assert plan.objects == (street.parents[0],)
    assert plan.title == "Person"
    assert plan.model is Person


def test_scalar_kinds_and_required() -> None:
    class M(BaseModel):
        text: str
        count: int
        ratio: float
        flag: bool
        maybe: int = 3

    plan = compile(M)
    assert [s.kind for s in plan.slots] == ["string", "integer", "number", "boolean", "integer"]
    assert [s.required for s in plan.slots] == [True, True, True, True, False]
    assert all(not s.repeatable and s.array is None for s in plan.slots)
    assert slot(plan, "maybe").default == 3
    assert slot(plan, "count").default is MISSING


def test_list_of_scalars_is_one_repeatable_slot() -> None:
    class M(BaseModel):
        tags: Annotated[list[str], Field(min_length=1, max_length=5)]
        scores: list[int] = []

    plan = compile(M)
    tags, scores = plan.slots
    assert tags.segments == ("tags", INDEX)
    assert tags.pointer == "/tags/-"
    assert tags.repeatable and tags.kind == "string"
    assert tags.array is not None and not tags.array.items_are_objects
    assert (tags.array.min_items, tags.array.max_items, tags.array.required) == (1, 5, True)
    assert scores.kind == "integer"
    assert scores.array is not None and scores.array.default == []
    assert not scores.array.required
    assert plan.arrays == (tags.array, scores.array)


def test_list_of_enum_items() -> None:
    class M(BaseModel):
        levels: list[Literal["a", "b"]]

    (levels,) = compile(M).slots
    assert levels.kind == "enum" and levels.enum == ("a", "b") and levels.repeatable


class Task(BaseModel):
    owner: str
    due: dt.date | None = None
    place: Address | None = None


class Project(BaseModel):
    name: str
    tasks: Annotated[list[Task], Field(max_length=4)]
    done: bool


def test_list_of_models_expands_item_fields() -> None:
    plan = compile(Project)
    assert [s.path for s in plan.slots] == [
        "name",
        "tasks[].owner",
        "tasks[].due",
        "tasks[].place.street",
        "tasks[].place.city",
        "done",
    ]
    owner = slot(plan, "tasks[].owner")
    assert owner.segments == ("tasks", INDEX, "owner")
    assert owner.pointer == "/tasks/{i}/owner"
    assert owner.concrete_pointer(2) == "/tasks/2/owner"
    assert owner.repeatable and owner.required
    assert owner.array is not None and owner.array.items_are_objects and owner.array.max_items == 4
    item = owner.parents[-1]
    assert item.segments == ("tasks", INDEX) and item.required
    due = slot(plan, "tasks[].due")
    assert due.kind == "date" and due.nullable and not due.required and due.default is None
    street = slot(plan, "tasks[].place.street")
    assert [p.pointer for p in street.parents] == ["/tasks/{i}", "/tasks/{i}/place"]
    assert street.parents[1].nullable and not street.parents[1].required
    assert slot(plan, "done").repeatable is False


def test_optional_scalars_and_models() -> None:
    class M(BaseModel):
        note: str | None = None
        count: int | None
        home: Address | None = None

    plan = compile(M)
    note, count = slot(plan, "note"), slot(plan, "count")
    assert note.kind == "string" and note.nullable and not note.required and note.default is None
    assert count.kind == "integer" and count.nullable and count.required
    home = slot(plan, "home.street").parents[0]
    assert home.nullable and not home.required and home.default is None


def test_literal_and_enum() -> None:
    class Color(enum.Enum):
        RED = "red"
        GREEN = "green"

    class Size(enum.IntEnum):
        S = 1
        L = 3

    class M(BaseModel):
        mood: Literal["happy", "sad"]
        color: Color
        size: Size = Size.L
        maybe: Color | None = None

    plan = compile(M)
    assert slot(plan, "mood").enum == ("happy", "sad")
    color = slot(plan, "color")
    assert color.kind == "enum" and color.enum == ("red", "green")
    assert color.instruction.startswith("Color")
    size = slot(plan, "size")
    assert size.enum == (1, 3) and size.default == 3
    maybe = slot(plan, "maybe")
    assert maybe.kind == "enum" and maybe.nullable and maybe.enum == ("red", "green")
    assert maybe.instruction.startswith("Maybe")


def test_string_formats() -> None:
    class M(BaseModel):
        day: dt.date
        at: dt.datetime
        clock: dt.time
        ident: uuid.UUID
        site: HttpUrl

    plan = compile(M)
    assert [s.kind for s in plan.slots] == ["date", "datetime", "time", "uuid", "string"]
    assert "format" not in slot(plan, "day").constraints
    site = slot(plan, "site")
    assert site.constraints["format"] == "uri"
    assert site.constraints["maxLength"] == 2083


def test_annotated_constraints() -> None:
    class M(BaseModel):
        code: Annotated[str, Field(min_length=2, max_length=8, pattern=r"^[A-Z]+$")]
        level: Annotated[int, Field(ge=1, le=5)]
        ratio: Annotated[float, Field(gt=0, lt=1, multiple_of=0.25)]

    plan = compile(M)
    assert dict(slot(plan, "code").constraints) == {
        "minLength": 2,
        "maxLength": 8,
        "pattern": "^[A-Z]+$",
    }
    assert dict(slot(plan, "level").constraints) == {"minimum": 1, "maximum": 5}
    assert dict(slot(plan, "ratio").constraints) == {
        "exclusiveMinimum": 0,
        "exclusiveMaximum": 1,
        "multipleOf": 0.25,
    }


def test_instruction_prefers_description_then_title_then_name() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "string", "description": "  Described.  ", "title": "Ignored"},
            "b": {"type": "integer", "title": "Priority", "minimum": 1, "maximum": 5},
            "due_date": {"type": "string", "format": "date"},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
        "additionalProperties": False,
    }
    plan = compile(schema)
    assert [s.instruction for s in plan.slots] == [
        "Described.",
        "Priority (integer 1-5)",
        "Due date (date)",
        "Tags (list of text)",
    ]
    assert slot(plan, "b").title == "Priority"
    assert slot(plan, "a").description == "  Described.  "


def test_plan_title_and_description() -> None:
    class Ticket(BaseModel):
        """Support ticket."""

        summary: str

    plan = compile(Ticket)
    assert (plan.title, plan.description) == ("Ticket", "Support ticket.")
    assert compile({"type": "object", "properties": {}}).title == "Output"


def test_json_schema_with_refs_and_definitions() -> None:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "home": {"$ref": "#/$defs/Place"},
            "work": {"allOf": [{"$ref": "#/definitions/Place"}], "description": "Office."},
        },
        "required": ["home"],
        "additionalProperties": False,
        "$defs": {
            "Place": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "additionalProperties": False,
            }
        },
        "definitions": {
            "Place": {
                "type": "object",
                "properties": {"zip": {"type": "string"}},
                "additionalProperties": False,
            }
        },
    }
    plan = compile(schema)
    assert [s.pointer for s in plan.slots] == ["/home/city", "/work/zip"]
    assert plan.model is None
    assert plan.schema is schema
    assert slot(plan, "home.city").parents[0].required
    assert not slot(plan, "work.zip").parents[0].required


def test_anyof_null_enum_const_and_type_lists() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"anyOf": [{"type": "number"}, {"type": "null"}]},
            "b": {"enum": ["x", "y", None]},
            "c": {"const": "fixed"},
            "d": {"type": ["string", "null"], "maxLength": 3},
            "e": {"oneOf": [{"type": "null"}, {"type": "boolean"}]},
        },
        "required": ["a", "c"],
        "additionalProperties": False,
    }
    plan = compile(schema)
    a, b, c, d, e = plan.slots
    assert (a.kind, a.nullable, a.required) == ("number", True, True)
    assert (b.kind, b.enum, b.nullable) == ("enum", ("x", "y"), True)
    assert (c.kind, c.enum, c.required) == ("enum", ("fixed",), True)
    assert (d.kind, d.nullable, dict(d.constraints)) == ("string", True, {"maxLength": 3})
    assert (e.kind, e.nullable) == ("boolean", True)


def test_dict_union_nested_list_and_recursion_become_json_slots() -> None:
    class Cat(BaseModel):
        meow: str

    class Dog(BaseModel):
        bark: int

    class Node(BaseModel):
        label: str
        children: list[Node] = []

    class M(BaseModel):
        counts: dict[str, int]
        pet: Cat | Dog
        grid: list[list[int]]
        tree: Node
        anything: Any = None

    plan = compile(M)
    by_path = {s.path: s for s in plan.slots}
    assert by_path["counts"].kind == "json"
    assert by_path["counts"].schema["additionalProperties"] == {"type": "integer"}
    pet = by_path["pet"]
    assert pet.kind == "json" and set(pet.schema["$defs"]) == {"Cat", "Dog"}
    assert by_path["grid"].kind == "json"
    # the recursive model expands once; the recursion point is a JSON slot
    assert by_path["tree.label"].kind == "string"
    children = by_path["tree.children"]
    assert children.kind == "json" and not children.repeatable
    assert set(children.schema["$defs"]) == {"Node"}
    assert by_path["anything"].kind == "json" and by_path["anything"].nullable
    for s in plan.slots:
        if s.kind == "json":
            jsonschema.Draft202012Validator.check_schema(s.schema)


def test_json_slot_schemas_validate_values() -> None:
    class Node(BaseModel):
        label: str
        children: list[Node] = []

    class M(BaseModel):
        tree: Node

    children = compile(M).by_path("tree.children")
    validator = jsonschema.Draft202012Validator(children.schema)
    assert validator.is_valid([{"label": "a", "children": [{"label": "b"}]}])
    assert not validator.is_valid([{"children": []}])


def test_arrays_inside_array_items_are_json_slots() -> None:
    class Section(BaseModel):
        heading: str
        bullets: list[str]
        extra: dict[str, str] = {}

    class Outline(BaseModel):
        sections: list[Section]

    plan = compile(Outline)
    bullets = plan.by_path("sections[].bullets")
    assert bullets.kind == "json" and bullets.repeatable
    assert bullets.pointer == "/sections/{i}/bullets"
    assert bullets.array is not None and bullets.array.items_are_objects
    assert plan.by_path("sections[].extra").kind == "json"


def test_tuples_and_untyped_arrays_are_json_slots() -> None:
    schema = {
        "type": "object",
        "properties": {
            "pair": {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}]},
            "bag": {"type": "array"},
            "mixed": {
                "type": "array",
                "items": {"anyOf": [{"type": "integer"}, {"type": "string"}]},
            },
            "empty": {"type": "object", "properties": {}},
        },
        "additionalProperties": False,
    }
    plan = compile(schema)
    assert [s.kind for s in plan.slots] == ["json", "json", "json", "json"]


def test_recursive_root_model_compiles() -> None:
    class Tree(BaseModel):
        name: str
        kids: list[Tree] = []
        parent: Tree | None = None

    plan = compile(Tree)
    assert [(s.path, s.kind) for s in plan.slots] == [
        ("name", "string"),
        ("kids", "json"),
        ("parent", "json"),
    ]
    assert plan.by_path("parent").nullable


def test_non_defs_refs_are_bundled() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "object", "additionalProperties": {"type": "integer"}},
            "b": {"$ref": "#/properties/a"},
        },
    }
    b = compile(schema).by_path("b")
    assert b.kind == "json"
    assert b.schema["$ref"].startswith("#/$defs/")
    validator = jsonschema.Draft202012Validator(b.schema)
    assert validator.is_valid({"x": 1}) and not validator.is_valid({"x": "no"})


@pytest.mark.parametrize(
    ("schema", "location"),
    [
        ({"type": "object", "properties": {"a": {"$ref": "#/$defs/Nope"}}}, "/properties/a/$ref"),
        ({"type": "object", "properties": {"a": {"$ref": "other.json#/x"}}}, "/properties/a/$ref"),
        ({"type": "object", "properties": {"a": {"type": "thing"}}}, "/properties/a/type"),
        ({"type": "object", "properties": []}, "/properties"),
        ({"type": "object", "properties": {"a": {"enum": []}}}, "/properties/a/enum"),
        (
            {
                "type": "object",
                "properties": {
                    "a": {
                        "type": "array",
                        "items": {"type": "string"},
                        "minItems": 3,
                        "maxItems": 1,
                    }
                },
            },
            "/properties/a/minItems",
        ),
        ({"type": "object", "required": "a"}, "/required"),
        (
            {
                "type": "object",
                "properties": {"a": {"$ref": "#/$defs/A"}},
                "$defs": {"A": {"enum": []}},
            },
            "/$defs/A/enum",
        ),
    ],
)
def test_invalid_schemas_raise_schema_error_with_location(
    schema: dict[str, Any], location: str
) -> None:
    with pytest.raises(SchemaError) as info:
        compile(schema)
    assert info.value.location == location
    assert info.value.code == "invalid_schema"


@pytest.mark.parametrize("value", [42, "schema", ["a"], None, int])
def test_non_schema_input_raises_schema_error(value: Any) -> None:
    with pytest.raises(SchemaError):
        compile(value)


def test_every_slot_has_a_self_contained_schema() -> None:
    plan = compile(Project)
    for s in plan.slots:
        jsonschema.Draft202012Validator.check_schema(s.schema)
    assert plan.by_path("tasks[].due").schema["anyOf"][0] == {"format": "date", "type": "string"}


def test_plan_to_json_lists_slots() -> None:
    data = compile(Project).to_json()
    assert data["title"] == "Project"
    assert [s["pointer"] for s in data["slots"]] == [
        "/name",
        "/tasks/{i}/owner",
        "/tasks/{i}/due",
        "/tasks/{i}/place/street",
        "/tasks/{i}/place/city",
        "/done",
    ]
