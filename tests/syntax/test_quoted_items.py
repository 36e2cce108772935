"""Quoted list items (syntax ``v4-quoted``): an item of a list of texts is a JSON string,
any other text value may be one (in v4 too); what is written, read and admitted.

The contract every syntax keeps (chunk invariance, round trips, the grammar admitting
what is written, prompts, conformance vectors) runs over ``v4-quoted`` in
``test_contract.py``; v4's block rules are in ``test_blocks.py``.
"""

from __future__ import annotations

from typing import Any

import pytest

from slotflight import prompt
from slotflight.assemble.events import Diagnostic
from slotflight.plan.compiler import compile as compile_schema
from slotflight.syntax import SYNTAXES, grammar, render_frames
from slotflight.syntax.lines.blocks import BlockSyntax
from tests.assembler_support import drive
from tests.grammar_support import GrammarEngine
from tests.syntax.test_blocks import INSTANCE, MEETING

SYNTAX = "v4-quoted"

NULLABLE_ITEMS = compile_schema(
    {
        "type": "object",
        "properties": {"notes": {"type": "array", "items": {"type": ["string", "null"]}}},
        "required": ["notes"],
    }
)


def read(text: str, plan: Any = MEETING, syntax: str = SYNTAX) -> Any:
    """The run of ``text`` read whole, which reading it one character at a time and cut
    at every third character must match."""
    whole = drive([text], plan, syntax=syntax)
    for chunks in (list(text), [text[i : i + 3] for i in range(0, len(text), 3)]):
        run = drive(chunks, plan, syntax=syntax)
        assert run.non_delta() == whole.non_delta()
        assert run.final == whole.final
    return whole


def test_the_syntax_is_registered_as_v4_with_quoted_items() -> None:
    chosen = SYNTAXES[SYNTAX]
    assert isinstance(chosen, BlockSyntax) and chosen.quoted_items
    assert not SYNTAXES["v4"].quotes(MEETING.by_path("attendees[]"))
    assert chosen.quotes(MEETING.by_path("attendees[]"))
    for path in ("title", "action_items[].task", "scores[]", "next_meeting"):
        assert not chosen.quotes(MEETING.by_path(path)), path


def test_items_of_a_list_of_texts_are_written_as_json_strings_and_nothing_else() -> None:
    data = {**INSTANCE, "title": 'Sync "Q3"', "attendees": ['Ada "the" Lovelace', "Luis"]}
    text = render_frames(MEETING, data, SYNTAX)
    assert text.splitlines()[:4] == [
        'title: Sync "Q3"',
        "attendees:",
        '- "Ada \\"the\\" Lovelace"',
        '- "Luis"',
    ]
    assert "- task: Set up test accounts\n" in text  # other text stays raw
    assert read(text).final == data


def test_raw_text_that_starts_with_a_quote_is_written_as_a_json_string() -> None:
    data = {**INSTANCE, "title": '"Q3" sync', "action_items": [{"task": '"x"\ny'}]}
    text = render_frames(MEETING, data, SYNTAX)
    assert 'title: "\\"Q3\\" sync"\n' in text
    assert '- task: "\\"x\\"\\ny"\n' in text
    assert read(text).final == data


@pytest.mark.parametrize("syntax", [SYNTAX, "v4"])
def test_every_text_value_reads_quoted_or_raw(syntax: str) -> None:
    """Both block syntaxes read text the same: a value that starts with a quote is a
    JSON string (``title: "Weekly sync"`` is ``Weekly sync``), other text is raw."""
    run = read(
        'title: "Weekly sync"\nattendees:\n- "Hannah Schmidt" (PM)\n- Luis Ortega\n'
        'action_items:\n- task: "Fix the export"\nowner: Ada\n- task: Write\n|the notes\n'
        "end\n",
        syntax=syntax,
    )
    assert run.final["title"] == "Weekly sync"
    assert run.final["attendees"] == ["Hannah Schmidt", "Luis Ortega"]
    assert run.final["action_items"] == [
        {"task": "Fix the export", "owner": "Ada"},
        {"task": "Write\nthe notes"},  # a raw value of a text that may be raw goes on
    ]
    codes = [e.code for e in run.events if isinstance(e, Diagnostic)]
    assert codes == ["after_value"]  # the remark after the quoted name, reported once


def test_a_raw_item_is_one_line() -> None:
    run = read("title: t\nattendees:\n- Ada\n|Lovelace\nend\n")
    assert run.final["attendees"] == ["Ada"]


@pytest.mark.parametrize(
    ("text", "admitted"),
    [
        ('title: t\nattendees:\n- "A"\n- "B"\nend', True),
        ("title: t\nattendees:\n- A\nend", False),  # an item is a JSON string
        ('title: t\nattendees:\n- "A" (PM)\nend', False),  # and nothing after it
        ('title: "t"\nattendees:\n- "A"\nend', True),  # other text: quoted
        ('title: t "x"\nattendees:\n- "A"\nend', True),  # or raw
        ('title: "t" x\nattendees:\n- "A"\nend', False),  # raw text starts unquoted
        ('title: t\nattendees:\n- "A"\naction_items:\n- task: "x"\nowner: y\nend', True),
        ('title: t\nattendees:\n- "A"\naction_items:\n- task: x\n|y\nend', True),
        ('title: t\nattendees:\n- ""\nend', False),  # not empty
        ('title: t\nattendees:\n- "<A>"\nend', False),  # nor the form's placeholder
        ('title: "<t>"\nattendees:\n- "A"\nend', False),
        ('title: t\nattendees:\n- "A <B>"\nend', True),
    ],
)
def test_grammar_holds_items_to_json_strings_and_lets_other_text_choose(
    engine: GrammarEngine, text: str, admitted: bool
) -> None:
    assert engine.accepts(grammar(MEETING, SYNTAX), text) is admitted


def test_a_nullable_item_may_be_null_or_a_json_string(engine: GrammarEngine) -> None:
    g = grammar(NULLABLE_ITEMS, SYNTAX)
    text = 'notes:\n- null\n- "null"\nend\n'
    assert engine.accepts(g, text)
    assert read(text, NULLABLE_ITEMS).final == {"notes": [None, "null"]}
    assert render_frames(NULLABLE_ITEMS, {"notes": [None, "x"]}, SYNTAX) == (
        'notes:\n- null\n- "x"\nend\n'
    )


def test_a_follow_up_admits_a_quoted_value_and_no_raw_quote_or_bracket(
    engine: GrammarEngine,
) -> None:
    title = MEETING.by_path("title")
    g = SYNTAXES[SYNTAX].grammar(MEETING, only=[(title, None, True)])
    assert engine.accepts(g, 'title: "Weekly sync"\nend')
    assert engine.accepts(g, "title: Weekly sync\nend")
    assert not engine.accepts(g, "title: [Title]\nend")
    assert not engine.accepts(g, 'title: "Weekly" sync\nend')


def test_the_form_shows_an_item_in_quotes_and_only_then_says_so() -> None:
    plain = compile_schema({"type": "object", "properties": {"a": {"type": "string"}}})
    assert prompt(plain, syntax=SYNTAX) == prompt(plain, syntax="v4")
    text = prompt(MEETING, syntax=SYNTAX)
    assert "(an item of a list of texts as a JSON string in double quotes)" in text
    assert 'attendees:\n- "<attendees[]; text' in text
    assert "\ntitle: <title; text" in text
    assert "\n- due: <action_items[].due;" in text  # other text: as in v4
    assert "\ntask: <action_items[].task; text>" in text
