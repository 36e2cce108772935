"""The frame renderer, and the compile → render property over random models."""

from __future__ import annotations

import datetime as dt
import json
import re
from typing import Any, Literal

import jsonpointer
import pytest
from hypothesis import HealthCheck, assume, given, settings
from pydantic import BaseModel

from slotflight.plan.compiler import compile
from slotflight.plan.instance import walk_instance
from slotflight.plan.model import SlotPlan
from slotflight.prompting.prompt import example_instance
from slotflight.syntax import render_frames
from tests.strategies import Case, expected_pointers, model_and_instance, writes_every_item

_OPEN = re.compile(r"<(\d+)(?::(\d+))?>")


def parse_frames(text: str) -> list[tuple[int, int | None, str]]:
    """A strict reader of canonical v1 text: (id, index, body) per frame."""
    frames: list[tuple[int, int | None, str]] = []
    lines = text.split("\n")
    assert lines[-1] == "", "frame text ends with a newline"
    i = 0
    while i < len(lines) - 1:
        match = _OPEN.fullmatch(lines[i])
        assert match, f"line {i} is not an open tag: {lines[i]!r}"
        close = f"</{match.group(0)[1:]}"
        j = lines.index(close, i + 1)
        index = None if match.group(2) is None else int(match.group(2))
        frames.append((int(match.group(1)), index, "\n".join(lines[i + 1 : j])))
        i = j + 1
    return frames


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


def test_render_groups_items_by_index_and_formats_values() -> None:
    plan = compile(Ticket)
    ticket = Ticket(
        summary="Export fails\nsince Monday",
        priority=2,
        urgent=False,
        mood="angry",
        tags=["export", "ui"],
        items=[Item(owner="ada", hours=1.5, due=dt.date(2025, 1, 31)), Item(owner="bob", hours=2)],
        extra={"é": [1, None]},
    )
    assert render_frames(plan, ticket) == (
        "<1>\nExport fails\nsince Monday\n</1>\n"
        "<2>\n2\n</2>\n"
        "<3>\nfalse\n</3>\n"
        "<4>\nangry\n</4>\n"
        "<5:0>\nexport\n</5:0>\n<5:1>\nui\n</5:1>\n"
        "<6:0>\nada\n</6:0>\n<7:0>\n1.5\n</7:0>\n<8:0>\n2025-01-31\n</8:0>\n"
        "<6:1>\nbob\n</6:1>\n<7:1>\n2.0\n</7:1>\n<8:1>\nnull\n</8:1>\n"
        "<9>\nnull\n</9>\n"
        '<10>\n{"é":[1,null]}\n</10>\n'
    )


def test_render_omits_absent_optional_fields_of_a_mapping() -> None:
    plan = compile(Ticket)
    data = {"summary": "s", "priority": 1, "urgent": True, "mood": "calm", "tags": [], "items": []}
    frames = parse_frames(render_frames(plan, data))
    assert [(i, idx) for i, idx, _ in frames] == [(1, None), (2, None), (3, None), (4, None)]
    assert frames[2][2] == "true"


def test_null_optional_object_writes_no_frames() -> None:
    class Place(BaseModel):
        city: str

    class M(BaseModel):
        name: str
        place: Place | None = None

    plan = compile(M)
    assert render_frames(plan, M(name="x")) == "<1>\nx\n</1>\n"
    assert render_frames(plan, M(name="x", place=Place(city="y"))).endswith("<2>\ny\n</2>\n")


def test_unknown_syntax_and_bad_instances_are_rejected() -> None:
    plan = compile(Ticket)
    with pytest.raises(ValueError, match="syntax"):
        render_frames(plan, {"summary": "s"}, syntax="v9")
    with pytest.raises(TypeError):
        render_frames(plan, {"tags": "not a list"})
    with pytest.raises(TypeError):
        render_frames(plan, ["not", "a", "mapping"])  # type: ignore[arg-type]


def _check_round_trip(plan: SlotPlan, instance: dict[str, Any], text: str) -> set[str]:
    pointers: set[str] = set()
    for slot_id, index, body in parse_frames(text):
        slot = plan[slot_id]
        pointer = slot.concrete_pointer(index)
        assert pointer not in pointers, f"{pointer} written twice"
        pointers.add(pointer)
        value = jsonpointer.resolve_pointer(instance, pointer)
        if slot.kind == "json":
            assert json.loads(body) == value
        elif value is None:
            assert body == "null"
        elif isinstance(value, bool):
            assert body == ("true" if value else "false")
        elif isinstance(value, (int, float)):
            assert float(body) == value
        else:
            assert body == value
    return pointers


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model_and_instance())
def test_rendered_frames_fill_exactly_the_instance_leaves(case: Case) -> None:
    assume(writes_every_item(case.spec, case.instance))  # an empty item cannot be written
    plan = compile(case.model)
    text = render_frames(plan, case.instance)
    pointers = _check_round_trip(plan, case.instance, text)
    assert pointers == expected_pointers(case.spec, case.instance)
    # a model instance renders the same frames as its JSON-mode dump
    model_text = render_frames(plan, case.model.model_validate(case.instance))
    dumped = case.model.model_validate(case.instance).model_dump(mode="json")
    assert _check_round_trip(plan, dumped, model_text) == expected_pointers(case.spec, dumped)
    assert {f.pointer for f in walk_instance(plan, case.instance)} == pointers


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model_and_instance())
def test_example_instance_is_valid_for_random_models(case: Case) -> None:
    plan = compile(case.model)
    example = example_instance(plan)
    case.model.model_validate(example)
    pointers = _check_round_trip(plan, example, render_frames(plan, example))
    assert pointers == expected_pointers(case.spec, example)
