"""Wire names of the named line syntaxes (:mod:`slotflight.syntax.lines.names`): the
shortest unambiguous dotted path, collisions, unsafe characters, a key named ``end``."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from slotflight.plan.compiler import compile as compile_schema
from slotflight.syntax import SYNTAXES, render_frames
from slotflight.syntax.lines import LineSyntax
from slotflight.syntax.lines.names import NAME_CHARS, slot_names
from tests.assembler_support import drive
from tests.strategies import Case, model_and_instance

NAMED = [n for n, s in SYNTAXES.items() if isinstance(s, LineSyntax) and s.ids == "named"]


def _obj(**properties: Any) -> dict[str, Any]:
    # closed: an open object also gets a slot for its other keys
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


TEXT = {"type": "string"}


def _names(schema: dict[str, Any]) -> dict[str, str]:
    """Slot path → wire name."""
    plan = compile_schema(schema)
    names = slot_names(plan)
    return {slot.path: names[slot.id] for slot in plan.slots}


def test_a_name_is_the_shortest_suffix_no_other_path_ends_with() -> None:
    schema = _obj(
        summary=TEXT,
        action_items={"type": "array", "items": _obj(owner=TEXT, due=TEXT)},
        team=_obj(name=TEXT, lead=_obj(name=TEXT)),
    )
    assert _names(schema) == {
        "summary": "summary",
        "action_items[].owner": "owner",
        "action_items[].due": "due",
        "team.name": "team.name",
        "team.lead.name": "lead.name",
    }


def test_a_path_that_ends_another_path_is_named_in_full() -> None:
    schema = _obj(owner=_obj(name=TEXT), team=_obj(owner=_obj(name=TEXT)))
    assert _names(schema) == {
        "owner.name": "owner.name",  # also the end of team.owner.name: its whole path
        "team.owner.name": "team.owner.name",
    }


def test_unsafe_characters_become_underscores_and_collisions_get_a_number() -> None:
    schema = _obj(**{"a b": TEXT, "a_b": TEXT, "x:y": TEXT, "": TEXT, "é": TEXT, "n\nend": TEXT})
    names = _names(schema)
    assert names["a b"] == "a_b" and names["a_b"] == "a_b_2"
    assert names["x:y"] == "x_y" and names[""] == "_" and names["é"] == "é"
    assert names["n\nend"] == "n_end"
    assert len(set(names.values())) == len(names)
    for name in names.values():
        assert re.fullmatch(f"{NAME_CHARS}+", name), name


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=model_and_instance())
def test_names_are_unique_and_safe_for_random_models(case: Case) -> None:
    names = slot_names(compile_schema(case.model))
    assert len(set(names.values())) == len(names)
    for name in names.values():
        assert re.fullmatch(f"{NAME_CHARS}+", name) and name != "end", name


SCHEMA = _obj(
    end=TEXT,
    endless=TEXT,
    **{"a b": TEXT, "a_b": {"type": "integer"}},
    items={"type": "array", "items": _obj(end={"type": "integer"})},
)
VALUE = {
    "end": "not the end",
    "endless": "",
    "a b": "x",
    "a_b": 3,
    "items": [{"end": 1}, {"end": 2}],
}


@pytest.mark.parametrize("syntax", NAMED)
def test_a_key_named_end_is_a_field_not_the_end_line(syntax: str) -> None:
    plan = compile_schema(SCHEMA)
    assert slot_names(plan)[1] == "end"
    text = render_frames(plan, VALUE, syntax)
    assert text.startswith("end: ") and text.endswith("\nend\n")
    whole = drive([text], plan, syntax=syntax)
    assert whole.asm is not None and whole.asm.outcome.ok, whole.asm.outcome.errors
    assert whole.final == VALUE and not whole.asm.diagnostics
    for cut in range(1, len(text)):
        run = drive([text[:cut], text[cut:]], plan, syntax=syntax, check=False)
        assert run.non_delta() == whole.non_delta(), cut
        assert run.final == VALUE, cut
    assert drive(list(text), plan, syntax=syntax).final == VALUE
