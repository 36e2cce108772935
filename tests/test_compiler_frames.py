"""Walking an instance into frames (syntax-neutral), and the compile → walk property over
random models. How each syntax writes the frames is in ``tests/syntax/``."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any, Literal

import jsonpointer
import pytest
from hypothesis import HealthCheck, assume, given, settings
from pydantic import BaseModel

from slotflight.plan.compiler import compile
from slotflight.plan.instance import FrameValue, walk_instance
from slotflight.plan.model import SlotPlan
from slotflight.prompting.prompt import example_instance
from slotflight.syntax import get_syntax, render_frames
from tests.strategies import (
    Case,
    expected_pointers,
    model_and_instance,
    model_with_examples,
    writes_every_item,
)


class Item(BaseModel):
    owner: str
    hours: float
    due: dt.date | None = None


class Ticket(BaseModel):
    summary: str
    priority: int
    urgent: bool
    mood: Literal["calm", "angry"]
    tags: list[str]
    items: list[Item]
    note: str | None = None
    extra: dict[str, Any] = {}


def sample_ticket() -> Ticket:
    """A ticket with every kind of field set: multi-line text, lists, items, JSON."""
    return Ticket(
        summary="Export fails\nsince Monday",
        priority=2,
        urgent=False,
        mood="angry",
        tags=["export", "ui"],
        items=[Item(owner="ada", hours=1.5, due=dt.date(2025, 1, 31)), Item(owner="bob", hours=2)],
        extra={"é": [1, None]},
    )


def _walked(plan: SlotPlan, instance: Any) -> list[tuple[str, str]]:
    return [(f.pointer, f.text) for f in walk_instance(plan, instance)]


def test_walk_groups_items_by_index_and_formats_values() -> None:
    plan = compile(Ticket)
    ticket = sample_ticket()
    assert _walked(plan, ticket) == [
        ("/summary", "Export fails\nsince Monday"),
        ("/priority", "2"),
        ("/urgent", "false"),
        ("/mood", "angry"),
        ("/tags/0", "export"),
        ("/tags/1", "ui"),
        ("/items/0/owner", "ada"),
        ("/items/0/hours", "1.5"),
        ("/items/0/due", "2025-01-31"),
        ("/items/1/owner", "bob"),
        ("/items/1/hours", "2.0"),
        ("/items/1/due", "null"),
        ("/note", "null"),
        ("/extra", '{"é":[1,null]}'),
    ]
    assert render_frames(plan, ticket) == get_syntax().write(plan, walk_instance(plan, ticket))


def test_walk_omits_absent_optional_fields_of_a_mapping() -> None:
    plan = compile(Ticket)
    data = {"summary": "s", "priority": 1, "urgent": True, "mood": "calm", "tags": [], "items": []}
    walked = _walked(plan, data)
    assert [p for p, _ in walked] == ["/summary", "/priority", "/urgent", "/mood"]
    assert walked[2][1] == "true"


def test_null_optional_object_writes_no_frames() -> None:
    class Place(BaseModel):
        city: str

    class M(BaseModel):
        name: str
        place: Place | None = None

    plan = compile(M)
    assert _walked(plan, M(name="x")) == [("/name", "x")]
    assert _walked(plan, M(name="x", place=Place(city="y"))) == [
        ("/name", "x"),
        ("/place/city", "y"),
    ]


def test_unknown_syntax_and_bad_instances_are_rejected() -> None:
    plan = compile(Ticket)
    with pytest.raises(ValueError, match="syntax"):
        render_frames(plan, {"summary": "s"}, syntax="v9")
    with pytest.raises(TypeError):
        render_frames(plan, {"tags": "not a list"})
    with pytest.raises(TypeError):
        render_frames(plan, ["not", "a", "mapping"])  # type: ignore[arg-type]


def _check_round_trip(
    plan: SlotPlan, instance: dict[str, Any], frames: list[FrameValue]
) -> set[str]:
    pointers: set[str] = set()
    for f in frames:
        pointer = f.pointer
        assert pointer not in pointers, f"{pointer} written twice"
        pointers.add(pointer)
        value = jsonpointer.resolve_pointer(instance, pointer)
        if f.slot.kind == "json":
            assert json.loads(f.text) == value
        elif value is None:
            assert f.text == "null"
        elif isinstance(value, bool):
            assert f.text == ("true" if value else "false")
        elif isinstance(value, (int, float)):
            assert float(f.text) == value
        else:
            assert f.text == value
    return pointers


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model_and_instance())
def test_walked_frames_fill_exactly_the_instance_leaves(case: Case) -> None:
    assume(writes_every_item(case.spec, case.instance))  # an empty item cannot be written
    plan = compile(case.model)
    frames = list(walk_instance(plan, case.instance))
    pointers = _check_round_trip(plan, case.instance, frames)
    assert pointers == expected_pointers(case.spec, case.instance)
    # a model instance walks into the same frames as its JSON-mode dump
    model = case.model.model_validate(case.instance)
    dumped = model.model_dump(mode="json")
    model_frames = list(walk_instance(plan, model))
    assert _check_round_trip(plan, dumped, model_frames) == expected_pointers(case.spec, dumped)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model_and_instance())
def test_without_schema_examples_an_example_holds_only_defaults(case: Case) -> None:
    """No made-up values: an example is made of the schema's own examples and defaults
    only, and random models carry no examples."""
    plan = compile(case.model)
    example = example_instance(plan)
    if example is None:
        return
    for f in walk_instance(plan, example):
        assert f.slot.has_default and f.value == f.slot.default, (f.pointer, f.value)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model_with_examples())
def test_example_instance_is_valid_and_made_of_the_schema_examples(model: type[BaseModel]) -> None:
    plan = compile(model)
    example = example_instance(plan)
    assert example is not None
    model.model_validate(example)
    for f in walk_instance(plan, example):
        allowed = [*f.slot.schema.get("examples", []), f.slot.default]
        assert f.value in allowed, (f.pointer, f.value, allowed)
