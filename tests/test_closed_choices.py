"""Closed choices of a plan (``slotflight.syntax.closed_choices``): which fields are
closed, how each option is written in every registered syntax, and that each option
line reads back as its value; the content-free messages and the request field."""

from __future__ import annotations

import copy
from typing import Any, Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field, create_model

from slotflight.assemble.assembler import Assembler
from slotflight.assemble.events import SlotComplete
from slotflight.plan.compiler import compile as compile_schema
from slotflight.plan.instance import FrameValue
from slotflight.plan.model import SlotPlan
from slotflight.syntax import SYNTAXES, get_syntax
from slotflight.syntax.base import Syntax
from slotflight.syntax.closed_choices import (
    CONTENT_FREE_TEXT,
    MAX_CLOSED_FIELDS,
    MAX_CLOSED_OPTION_CHARS,
    MAX_CLOSED_OPTIONS,
    MAX_CLOSED_TEXT,
    MAX_RANGE,
    ClosedChoice,
    closed_choices,
    closed_choices_field,
    content_free_messages,
)

#: The syntaxes that write each value on a line of its own after ``name:``.
NAMED_LINES = ("v3", "v3-quoted", "v4", "v4-quoted")


class Inner(BaseModel):
    colour: Literal["red", "blue"]


class Form(BaseModel):
    mood: Literal["happy", "sad", "meh"]
    urgent: bool
    priority: int = Field(ge=1, le=5)
    score: int = Field(ge=0, le=10)  # 11 values: more than MAX_RANGE
    rank: int = Field(ge=1, le=10)  # " 1" begins " 10"
    maybe: Literal["a", "b"] | None
    moods: list[Literal["x", "y"]]
    inner: Inner
    mixed: Literal[1, "one"]
    note: str


FORM = compile_schema(Form)
#: The values of each closed field of :class:`Form`, in enum order.
CLOSED: dict[str, tuple[Any, ...]] = {
    "mood": ("happy", "sad", "meh"),
    "urgent": (True, False),
    "priority": (1, 2, 3, 4, 5),
    "rank": tuple(range(1, 11)),
}


def read_back(plan: SlotPlan, syntax: Syntax, text: str) -> list[tuple[str, Any]]:
    """The slots ``text`` completes, fed whole to an :class:`Assembler` and closed."""
    assembler = Assembler(plan, syntax=syntax)
    events = assembler.feed(text) + assembler.close(complete=False)
    return [(e.path, e.value) for e in events if isinstance(e, SlotComplete)]


def first_line(plan: SlotPlan, syntax: Syntax, path: str, value: Any) -> str:
    """The first line ``syntax`` writes for ``value`` of the slot at ``path``."""
    text = syntax.write(plan, [FrameValue(plan.by_path(path), None, value)])
    return text.split("\n", 1)[0]


def assert_round_trip(plan: SlotPlan, syntax: Syntax, choice: ClosedChoice) -> None:
    """Each option of ``choice`` is what ``syntax`` writes first for its value, and its
    line reads back as that value, in enum order."""
    slot = plan.by_path(choice.path)
    pointer = slot.concrete_pointer(None)
    values = CLOSED.get(choice.path) if plan is FORM else tuple(slot.enum or ())
    assert values is not None
    assert len(choice.options) == len(values)
    for value, option in zip(values, choice.options, strict=True):
        assert first_line(plan, syntax, choice.path, value) == choice.after + option
        line = choice.after + option + (choice.end or "\n")
        assert read_back(plan, syntax, line) == [(pointer, value)]


@pytest.mark.parametrize("name", sorted(SYNTAXES))
def test_the_closed_fields_of_a_form_in_every_syntax(name: str) -> None:
    syntax = get_syntax(name)
    found = closed_choices(FORM, syntax)
    if name not in NAMED_LINES:
        assert found == ()
        return
    assert [c.path for c in found] == list(CLOSED)
    for choice in found:
        assert choice.after == syntax.ref(FORM, FORM.by_path(choice.path)) + ":"
        assert len(set(choice.options)) == len(choice.options)
        assert_round_trip(FORM, syntax, choice)


@pytest.mark.parametrize("name", NAMED_LINES)
def test_how_the_options_are_written(name: str) -> None:
    by_path = {c.path: c for c in closed_choices(FORM, get_syntax(name))}
    mood = (' "happy"', ' "sad"', ' "meh"') if name == "v3-quoted" else (" happy", " sad", " meh")
    assert by_path["mood"] == ClosedChoice("mood", "mood:", mood, "")
    assert by_path["urgent"] == ClosedChoice("urgent", "urgent:", (" true", " false"), "")
    assert by_path["priority"] == ClosedChoice(
        "priority", "priority:", (" 1", " 2", " 3", " 4", " 5"), ""
    )
    # " 1" begins " 10": every option is scored with the line break after it
    assert by_path["rank"] == ClosedChoice(
        "rank", "rank:", tuple(f" {i}" for i in range(1, 11)), "\n"
    )


def test_an_integer_range_is_closed_up_to_max_range_values() -> None:
    def closed(low: int, high: int) -> tuple[ClosedChoice, ...]:
        model = create_model("Ranged", n=(int, Field(ge=low, le=high)))
        return closed_choices(compile_schema(model), get_syntax("v4"))

    assert MAX_RANGE == 10
    assert [c.options for c in closed(-2, 2)] == [(" -2", " -1", " 0", " 1", " 2")]
    assert len(closed(0, MAX_RANGE - 1)[0].options) == MAX_RANGE
    assert closed(0, MAX_RANGE) == ()
    assert closed(3, 3) == ()  # one value: nothing to choose


@pytest.mark.parametrize(
    "field",
    [
        (int, Field(ge=1)),  # no maximum
        (int, Field(gt=0, lt=4)),  # exclusive bounds
        (str, ...),
        (float, Field(ge=0, le=1)),
        (Literal["only"], ...),  # one option
    ],
    ids=["open-integer", "exclusive-bounds", "text", "number", "one-option"],
)
def test_fields_that_are_not_closed(field: Any) -> None:
    plan = compile_schema(create_model("Open", value=field))
    for name in NAMED_LINES:
        assert closed_choices(plan, get_syntax(name)) == ()


def test_to_json_is_the_request_shape() -> None:
    choice = ClosedChoice("rank", "rank:", (" 1", " 10"), "\n")
    assert choice.to_json() == {"after": "rank:", "options": [" 1", " 10"], "end": "\n"}


def test_a_prefix_shared_by_enum_texts_scores_with_the_line_break() -> None:
    model = create_model("Prefixed", pick=(Literal["a", "ab"], ...))
    plan = compile_schema(model)
    for name in NAMED_LINES:
        syntax = get_syntax(name)
        (choice,) = closed_choices(plan, syntax)
        prefixed = any(a != b and b.startswith(a) for a in choice.options for b in choice.options)
        assert choice.end == ("\n" if prefixed else "")
        assert_round_trip(plan, syntax, choice)
    # quoted, the closing quote tells them apart
    (quoted,) = closed_choices(plan, get_syntax("v3-quoted"))
    assert quoted.options == (' "a"', ' "ab"') and quoted.end == ""


ENUM_TEXT = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=0, max_size=10
)


@settings(max_examples=60, deadline=None)
@given(values=st.lists(ENUM_TEXT, min_size=2, max_size=6, unique=True))
def test_any_enum_of_texts_round_trips_in_every_syntax(values: list[str]) -> None:
    """Whatever the texts, every option a syntax gives reads back as its value, the
    options differ and follow the enum's order; plain words are always closed."""
    plan = compile_schema(create_model("Picked", pick=(Literal[tuple(values)], ...)))
    words = all(v.isascii() and v.isalpha() for v in values)
    for name, syntax in SYNTAXES.items():
        found = closed_choices(plan, syntax)
        if name not in NAMED_LINES:
            assert found == ()
            continue
        assert len(found) <= 1
        if words:
            assert len(found) == 1
        for choice in found:
            assert len(set(choice.options)) == len(choice.options)
            assert_round_trip(plan, syntax, choice)


@settings(max_examples=40, deadline=None)
@given(
    values=st.lists(
        st.text(alphabet="abcdefghij_", min_size=1, max_size=6), min_size=2, max_size=8, unique=True
    )
)
def test_bare_words_are_written_as_they_are(values: list[str]) -> None:
    plan = compile_schema(create_model("Worded", pick=(Literal[tuple(values)], ...)))
    for name in ("v3", "v4", "v4-quoted"):
        (choice,) = closed_choices(plan, get_syntax(name))
        assert choice.options == tuple(f" {v}" for v in values)
        prefixed = any(a != b and b.startswith(a) for a in values for b in values)
        assert choice.end == ("\n" if prefixed else "")


# -- the content-free messages and the request field ------------------------------------


def test_content_free_messages_replace_only_user_content() -> None:
    parts = [{"type": "text", "text": "Ticket: "}, {"type": "text", "text": "it breaks"}]
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "The export fails.", "name": "ada"},
        {"role": "assistant", "content": "Noted."},
        {"role": "developer", "content": "Answer in frames."},
        {"role": "user", "content": parts},
    ]
    before = copy.deepcopy(messages)
    free = content_free_messages(messages)
    assert free == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": CONTENT_FREE_TEXT, "name": "ada"},
        {"role": "assistant", "content": "Noted."},
        {"role": "developer", "content": "Answer in frames."},
        {"role": "user", "content": CONTENT_FREE_TEXT},
    ]
    assert CONTENT_FREE_TEXT == "N/A"
    assert messages == before  # the input is left as it was
    assert all(f is not m for f, m in zip(free, messages, strict=True))
    free[0]["content"] = "changed"
    assert messages[0]["content"] == "Be brief."


def test_content_free_messages_of_no_messages() -> None:
    assert content_free_messages([]) == []


def test_closed_choices_field_shape() -> None:
    choices = closed_choices(FORM, get_syntax("v4"))
    free = content_free_messages([{"role": "user", "content": "x"}])
    field = closed_choices_field(choices, free)
    assert set(field) == {"fields", "content_free"}
    assert field["fields"] == [c.to_json() for c in choices]
    assert field["fields"][0] == {
        "after": "mood:",
        "options": [" happy", " sad", " meh"],
        "end": "",
    }
    assert field["content_free"] == [{"role": "user", "content": "N/A"}]
    assert field["content_free"][0] is not free[0]


def test_a_multiple_of_keeps_only_the_values_it_allows() -> None:
    plan = compile_schema(create_model("Even", n=(int, Field(ge=2, le=10, multiple_of=2))))
    (choice,) = closed_choices(plan, get_syntax("v4"))
    assert choice.options == (" 2", " 4", " 6", " 8", " 10")


def test_fields_past_the_servers_bounds_are_left_out() -> None:
    many = Literal[tuple(f"v{i}" for i in range(MAX_CLOSED_OPTIONS + 1))]  # type: ignore[valid-type]
    fields: dict[str, Any] = {
        "wide": (many, ...),
        "x" * (MAX_CLOSED_TEXT + 1): (bool, ...),
        **{f"b{i}": (bool, ...) for i in range(MAX_CLOSED_FIELDS + 2)},
    }
    plan = compile_schema(create_model("Wide", **fields))
    found = closed_choices(plan, get_syntax("v4"))
    assert [c.path for c in found] == [f"b{i}" for i in range(MAX_CLOSED_FIELDS)]
    long_options = Literal[tuple("y" * 150 + str(i) for i in range(30))]  # type: ignore[valid-type]
    plan = compile_schema(create_model("Long", a=(long_options, ...), b=(bool, ...)))
    sizes = [
        sum(len(o) + len(c.end) for o in c.options) for c in closed_choices(plan, get_syntax("v4"))
    ]
    assert sum(sizes) <= MAX_CLOSED_OPTION_CHARS
    assert [c.path for c in closed_choices(plan, get_syntax("v4"))] == ["b"]
