"""Block lists (syntax ``v4``): opening lines, dashed items, where a block ends, what
is noise, list names, and the grammar's block shape and item counts.

The contract every syntax keeps (chunk invariance, round trips, grammar admits what is
written, prompts) runs over v4 in ``test_contract.py``; v3's rules that v4 keeps are in
``test_lines.py``.
"""

from __future__ import annotations

from typing import Any

import pytest

from slotflight.assemble.events import Diagnostic, SlotComplete
from slotflight.plan.compiler import compile as compile_schema
from slotflight.plan.model import SlotPlan
from slotflight.syntax import grammar, render_frames
from slotflight.syntax.lines.names import list_names
from tests.assembler_support import drive
from tests.grammar_support import GrammarEngine

MEETING = compile_schema(
    {
        "title": "Meeting",
        "type": "object",
        "properties": {
            "title": {"type": "string", "maxLength": 80},
            "attendees": {
                "type": "array",
                "items": {"type": "string", "maxLength": 60},
                "minItems": 1,
                "maxItems": 4,
            },
            "scores": {"type": "array", "items": {"type": "integer"}, "maxItems": 3},
            "action_items": {
                "type": "array",
                "maxItems": 3,
                "items": {
                    "type": "object",
                    "properties": {
                        "due": {"type": "string", "format": "date"},
                        "task": {"type": "string"},
                        "owner": {"type": "string"},
                    },
                    "required": ["task"],
                },
            },
            "next_meeting": {"type": ["string", "null"], "format": "date"},
        },
        "required": ["title", "attendees"],
    }
)

INSTANCE: dict[str, Any] = {
    "title": "Weekly product sync",
    "attendees": ["Hannah Schmidt", "Luis Ortega"],
    "scores": [-3, 4],
    "action_items": [
        {"due": "2024-03-15", "task": "Collect feedback from sales", "owner": "Hannah"},
        {"task": "Set up test accounts", "owner": "Luis Ortega"},
    ],
    "next_meeting": None,
}

WRITTEN = """\
title: Weekly product sync
attendees:
- Hannah Schmidt
- Luis Ortega
scores:
- -3
- 4
action_items:
- due: 2024-03-15
task: Collect feedback from sales
owner: Hannah
- task: Set up test accounts
owner: Luis Ortega
next_meeting: null
end
"""


def read(text: str, plan: SlotPlan = MEETING, **options: Any) -> Any:
    """The state after reading ``text`` in one chunk and one character at a time (the
    same, or the test fails), and the whole run."""
    whole = drive([text], plan, syntax="v4", **options)
    chars = drive(list(text), plan, syntax="v4", **options)
    assert chars.non_delta() == whole.non_delta()
    assert chars.final == whole.final
    return whole


def noise_count(run: Any) -> int:
    return sum(1 for e in run.events if isinstance(e, Diagnostic) and e.code == "noise")


def test_lists_are_written_as_blocks_and_read_back() -> None:
    text = render_frames(MEETING, INSTANCE, "v4")
    assert text == WRITTEN
    run = read(text)
    assert run.final == INSTANCE
    assert noise_count(run) == 0


def test_a_dash_starts_the_next_item_whatever_field_it_names() -> None:
    """v3 needs an explicit index when an item opens with a field the one before lacked
    (``due`` here); the dash says where the item starts."""
    run = read(
        "title: t\nattendees:\n- A\naction_items:\n- task: one\n- due: 2024-01-02\ntask: two\nend\n"
    )
    assert run.final["action_items"] == [{"task": "one"}, {"due": "2024-01-02", "task": "two"}]


def test_reading_tolerates_indentation_and_v3_lines() -> None:
    run = read(
        "title: t\n"
        "attendees: Ada\n"  # v3's item on its name's line
        "attendees:\n"
        "  - Grace\n"
        "action_items:\n"
        "  - task: one\n"
        "    owner: Ada\n"
        "task: two\n"  # v3's grouping: a repeated field starts the next item
        "owner[1]: Grace\n"  # v3's explicit index
        "end\n"
    )
    assert run.final["attendees"] == ["Ada", "Grace"]
    assert run.final["action_items"] == [
        {"task": "one", "owner": "Ada"},
        {"task": "two", "owner": "Grace"},
    ]
    assert noise_count(run) == 0


def test_a_field_outside_the_list_ends_its_block_and_noise_does_not() -> None:
    run = read(
        "attendees:\n- A\nSome chatter\n- B\ntitle: t\n- C\naction_items:\n"
        "- task: one\n- title: not a field of the list\nend\n"
    )
    assert run.final["attendees"] == ["A", "B"]
    assert run.final["action_items"] == [{"task": "one"}]
    noise = [e for e in run.events if isinstance(e, Diagnostic) and e.code == "noise"]
    assert len(noise) == 3  # the chatter, "- C" after the block ended, "- title: …"


def test_a_dash_needs_a_blank_and_a_dash_line_outside_a_block_is_noise() -> None:
    run = read("title: t\n- A\nattendees:\n- A\nscores:\n- -3\n-3\n-\nend\n")
    assert run.final["attendees"] == ["A"]
    assert run.final["scores"] == [-3]  # "-3" is noise; "-" alone is an empty item
    assert noise_count(run) == 2


def test_an_opening_line_without_items_adds_nothing() -> None:
    run = read("title: t\nattendees:   \nscores:\nattendees:\n- A\nend\n")
    assert run.final == {"title": "t", "attendees": ["A"]}
    assert noise_count(run) == 0


def test_a_scalar_list_name_waits_for_the_line_to_show_what_it_is() -> None:
    """``attendees:`` then blanks may still open a block or hold an item: the same in
    every chunking (``read`` checks), and more than 16 blanks make it noise."""
    run = read("title: t\nattendees:    Ada\nattendees:" + " " * 17 + "\n- B\nend\n")
    assert run.final["attendees"] == ["Ada"]
    assert noise_count(run) == 1  # one run: the overlong opening line, "- B" outside a block


def test_a_quoted_value_completes_at_its_closing_quote() -> None:
    run = drive(['title: "Weekly sync"'], MEETING, syntax="v4", grammar=True, complete=False)
    assert [e.path for e in run.events if isinstance(e, SlotComplete)] == ["/title"]


def test_text_that_starts_with_a_quote_is_written_as_a_json_string() -> None:
    data = {**INSTANCE, "title": '"Q3" sync', "attendees": ['"A"', "B"]}
    text = render_frames(MEETING, data, "v4")
    assert 'title: "\\"Q3\\" sync"\n' in text and '- "\\"A\\""\n- B\n' in text
    assert read(text).final == data


@pytest.mark.parametrize(
    ("text", "admitted"),
    [
        ('title: "t"\nattendees:\n- "A"\n- B\nend', True),
        ('title: t "x"\nattendees:\n- A\nend', True),  # raw text with quotes in it
        ('title: "t" x\nattendees:\n- A\nend', False),  # a string, then nothing
        ('title: "t\nattendees:\n- A\nend', False),  # closed on its line
        ('title: ""\nattendees:\n- A\nend', False),  # not empty
        ('title: "<t>"\nattendees:\n- A\nend', False),  # nor the form's placeholder
        ('title: t\nattendees:\n- A\naction_items:\n- task: "x"\nowner: y\nend', True),
    ],
)
def test_grammar_admits_a_json_string_or_raw_text_that_does_not_start_with_a_quote(
    engine: GrammarEngine, text: str, admitted: bool
) -> None:
    assert engine.accepts(grammar(MEETING, "v4"), text) is admitted


def test_a_follow_up_asks_for_raw_text_without_a_quote_or_bracket(
    engine: GrammarEngine,
) -> None:
    g = grammar_of(MEETING, [(MEETING.by_path("title"), None, True)])
    assert engine.accepts(g, "title: Weekly sync\nend")
    assert not engine.accepts(g, 'title: "Weekly sync"\nend')
    assert not engine.accepts(g, "title: [Title]\nend")


def test_each_item_completes_when_its_line_ends() -> None:
    head = "title: t\nattendees:\n- Hannah\n"
    run = drive([head, "- Luis\n", "end\n"], MEETING, syntax="v4", grammar=True)
    done = [e.path for e in run.events if isinstance(e, SlotComplete)]
    assert done[:2] == ["/title", "/attendees/0"]
    first_chunk = drive([head], MEETING, syntax="v4", grammar=True, complete=False)
    assert "/attendees/0" in [e.path for e in first_chunk.events if isinstance(e, SlotComplete)]


def test_list_names_keep_clear_of_slot_names() -> None:
    plan = compile_schema(
        {
            "type": "object",
            "properties": {
                "items": {
                    "type": "array",
                    "items": {"type": "object", "properties": {"x": {"type": "string"}}},
                },
                "other": {"type": "object", "properties": {"items": {"type": "string"}}},
                "lines": {
                    "type": "array",
                    "items": {"type": "object", "properties": {"y": {"type": "string"}}},
                },
            },
        }
    )
    assert sorted(list_names(plan).values()) == ["items_2", "lines"]
    instance = {"items": [{"x": "a"}, {"x": "b"}], "other": {"items": "c"}, "lines": [{"y": "d"}]}
    text = render_frames(plan, instance, "v4")
    assert "items_2:\n- x: a\n- x: b\n" in text and "\nitems: c\n" in text
    assert read(text, plan).final == instance


@pytest.mark.parametrize(
    ("text", "admitted"),
    [
        ("title: t\nattendees:\n- A\nend", True),
        ("title: t\nattendees:\n- A\n- B\n- C\n- D\nend", True),
        ("title: t\nattendees:\n- A\n- B\n- C\n- D\n- E\nend", False),  # maxItems 4
        ("title: t\nattendees:\nend", False),  # minItems 1: an item after the name
        ("title: t\nend", False),  # a required list
        ("title: t\nattendees: A\nend", False),  # v3's form
        ("title: t\nattendees:\n  - A\nend", False),  # no indentation
        ("title: t\nattendees:\n- A\nscores:\nnext_meeting: null\nend", False),
        ("title: t\nattendees:\n- A\naction_items:\n- task: x\nowner: y\n- task: z\nend", True),
        ("title: t\nattendees:\n- A\naction_items:\ntask: x\nend", False),  # the dash
        ("title: t\nattendees:\n- A\naction_items:\n- owner: y\nend", False),  # task needed
        ("title: t\nattendees:\n- A\naction_items:\n- owner: y\ntask: x\nend", False),
        ("title: t\nattendees:\n- A\naction_items:\n- due: 2024-01-02\ntask: x\nend", True),
    ],
)
def test_grammar_admits_exactly_the_block_shape_and_item_counts(
    engine: GrammarEngine, text: str, admitted: bool
) -> None:
    assert engine.accepts(grammar(MEETING, "v4"), text) is admitted


def test_a_dashed_field_opens_its_list_without_the_opening_line() -> None:
    run = read("title: t\nattendees:\n- A\n- task: one\nowner: Ada\n- task: two\nend\n")
    assert run.final["attendees"] == ["A", "task: one"]  # a scalar block takes any dash
    run = read("title: t\n- task: one\nowner: Ada\n- task: two\nend\n")
    assert run.final["action_items"] == [{"task": "one", "owner": "Ada"}, {"task": "two"}]
    assert noise_count(run) == 0


def test_follow_up_grammar_admits_the_indexed_and_the_dashed_item_line(
    engine: GrammarEngine,
) -> None:
    task = MEETING.by_path("action_items[].task")
    owner = MEETING.by_path("action_items[].owner")
    g = grammar_of(MEETING, [(task, 0, True), (owner, 1, True)])
    assert engine.accepts(g, "task[0]: one\nowner[1]: Ada\nend")
    assert engine.accepts(g, "action_items:\n- task: one\nowner[1]: Ada\nend")
    assert engine.accepts(g, "- task: one\nowner[1]: Ada\nend")
    assert engine.accepts(g, "- task: one\n- owner: Ada\nend")  # the dash starts item 1
    assert not engine.accepts(g, "- task: one\nowner: Ada\nend")  # that is item 0's owner
    assert not engine.accepts(g, "task[0]: one\nend")


def grammar_of(plan: SlotPlan, targets: list[Any]) -> str:
    from slotflight.syntax import get_syntax

    return get_syntax("v4").grammar(plan, only=targets)
