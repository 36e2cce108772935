"""Frame syntax v1 (tag frames) specifics: inline frames, tags inside values, nested and
mismatched tags, missing indexes, the exact text and the grammar's tag rules.

The syntax contract and the faults every syntax survives are in ``test_contract.py`` and
``test_faults.py``.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from slotflight.assemble.events import Diagnostic
from slotflight.plan.compiler import compile
from slotflight.syntax import SYNTAXES, grammar, render_frames
from slotflight.syntax.base import Close, Diag, Open, Text
from slotflight.syntax.tags import TAGS, TagSyntax
from slotflight.syntax.tags.lexer import TagLexer
from tests.assembler_support import drive, frame
from tests.grammar_support import GrammarEngine, Plan, plan_text
from tests.test_compiler_frames import Ticket, sample_ticket

V1 = "v1"


def test_v1_is_the_registered_tag_syntax() -> None:
    assert SYNTAXES[V1] is TAGS and isinstance(TAGS, TagSyntax)


def _codes(run: Any) -> list[str]:
    return [e.code for e in run.events if isinstance(e, Diagnostic)]


# -- reading -------------------------------------------------------------------------------


def test_value_is_trimmed_and_newline_after_open_tag_is_not_part_of_it() -> None:
    run = drive(["<1>", "\n  Ada Lovelace  \n", "</1>\n"], syntax=V1)
    assert run.final["summary"] == "Ada Lovelace"
    assert run.deltas() == {"/summary": "Ada Lovelace"}


def test_inline_frames_and_value_then_close_on_one_line() -> None:
    run = drive(["<1>Ada</1>\n<2>\n3</2>\n<3>negative</3>"], syntax=V1)
    assert run.final == {"summary": "Ada", "priority": 3, "sentiment": "negative"}


def test_close_tag_inside_a_line_is_text() -> None:
    run = drive([frame("1", "use </1> carefully", syntax=V1)], syntax=V1)
    assert run.final["summary"] == "use </1> carefully"


def test_nested_open_tag_closes_the_previous_frame() -> None:
    run = drive(["<1>\nsummary text\n<2>\n3\n</2>\n"], syntax=V1)
    assert run.final == {"summary": "summary text", "priority": 3}
    assert "nested_open" in _codes(run)


def test_closing_tag_for_another_slot_closes_the_open_frame() -> None:
    run = drive(["<1>\nsummary text\n</2>\n<2>\n3\n</2>\n"], syntax=V1)
    assert run.final == {"summary": "summary text", "priority": 3}
    assert "mismatched_close" in _codes(run)


def test_the_lexer_reports_a_mismatched_close_itself() -> None:
    lexer = TagLexer(frozenset({1, 2}))
    tokens = lexer.feed("<1>\nab\n</2>\n") + lexer.close()
    assert tokens[0] == Open(1, None, 0, "1")
    assert next(t for t in tokens if isinstance(t, Diag)).code == "mismatched_close"
    assert isinstance(tokens[-1], Close)
    # the newlines around the body are the assembler's to trim
    assert "".join(t.text for t in tokens if isinstance(t, Text)) == "\nab\n"
    assert tokens[-2] == Diag("mismatched_close", "closing tag </2> closed frame <1>", 7)


def test_missing_index_and_unexpected_index_are_tolerated() -> None:
    run = drive(["<5>\na\n</5>\n<5>\nb\n</5>\n<2:0>\n3\n</2:0>\n"], syntax=V1)
    assert run.final == {"tags": ["a", "b"], "priority": 3}
    assert _codes(run).count("missing_index") == 2
    assert "unexpected_index" in _codes(run)


def test_unknown_ids_are_reported_as_unknown_slots() -> None:
    run = drive(["<99>\nsecret\n</99>\n<1>\nkept\n</1>\n<42:0>\nx\n</42:0>\n"], syntax=V1)
    assert run.final == {"summary": "kept"}
    assert _codes(run) == ["unknown_slot", "unknown_slot"]


# -- writing -------------------------------------------------------------------------------


def test_render_writes_tags_with_indexes_and_bodies_on_their_own_lines() -> None:
    plan = compile(Ticket)
    ticket = sample_ticket()
    assert render_frames(plan, ticket, V1) == (
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
    assert TAGS.ref(plan, plan[5]) == "<5>" and TAGS.ref(plan, plan[5], 1) == "<5:1>"


# -- the grammar ----------------------------------------------------------------------------


def _text(**changes: Any) -> str:
    return plan_text(V1, **changes)


GOOD = _text()


@pytest.mark.parametrize(
    ("description", "broken"),
    [
        ("wrong enum value", GOOD.replace("<6>\nangry\n", "<6>\nfurious\n")),
        ("letters in an integer", GOOD.replace("<3>\n-3\n", "<3>\n-3x\n")),
        ("negative where minimum is 1", GOOD.replace("<2>\n2\n", "<2>\n-2\n")),
        ("boolean spelled yes", GOOD.replace("<5>\ntrue\n", "<5>\nyes\n")),
        ("number with a comma", GOOD.replace("<4>\n0.25\n", "<4>\n0,25\n")),
        ("month 13", GOOD.replace("2025-01-31\n</10:0>", "2025-13-31\n</10:0>")),
        ("bad uuid", GOOD.replace("3f2b8c1e-", "3f2b8c1g-")),
        ("missing required slot", GOOD.replace("<3>\n-3\n</3>\n", "")),
        ("unknown id", GOOD + "<99>\nx\n</99>\n"),
        ("too many object items", _text(steps=[{"owner": "x", "hours": 1}] * 3)),
        ("index gap", GOOD.replace("<7:0>", "<7:1>").replace("</7:0>", "</7:1>")),
        ("slots out of order", GOOD.replace("<1>", "<0>", 1)),
        ("json over two lines", _text(extra={"a": 1}).replace('{"a":1}', '{"a":\n1}')),
        ("text line starting with <", _text(summary="ok\n<2>")),
        ("non-nullable null", GOOD.replace("<2>\n2\n", "<2>\nnull\n")),
        ("close tag on the value line", GOOD.replace("\n</1>\n", "</1>\n")),
        ("optional object without its required field", _text(place={"zip": "69001"})),
        ("stream ends inside a frame", GOOD[: GOOD.index("</2>")]),
    ],
)
def test_malformed_frames_are_rejected(
    engine: GrammarEngine, description: str, broken: str
) -> None:
    assert broken != GOOD, description
    assert engine.accepts(grammar(compile(Plan), V1), GOOD)
    assert not engine.accepts(grammar(compile(Plan), V1), broken), description


def test_object_items_must_be_grouped_by_index(engine: GrammarEngine) -> None:
    g = grammar(compile(Plan), V1)
    start = GOOD.index("<8:0>")
    end = GOOD.index("<11>") if "<11>" in GOOD else GOOD.index("<13>")
    items = GOOD[start:end]
    frames = [f"<{chunk}" for chunk in items.split("<")[1:] if not chunk.startswith("/")]
    assert frames[0].startswith("<8:0>") and any(f.startswith("<8:1>") for f in frames)
    interleaved = items.replace("<9:0>\n3\n</9:0>\n", "").replace(
        "<8:1>", "<9:0>\n3\n</9:0>\n<8:1>"
    )
    assert interleaved != items
    assert not engine.accepts(g, GOOD.replace(items, interleaved))


def test_optional_items_need_at_least_one_frame(engine: GrammarEngine) -> None:
    class Note(BaseModel):
        a: str | None = None
        b: int | None = None

    class Notes(BaseModel):
        notes: list[Note]

    plan = compile(Notes)
    g = grammar(plan, V1)
    assert engine.accepts(g, render_frames(plan, {"notes": [{"b": 1}, {"a": "x", "b": None}]}, V1))
    assert not engine.accepts(g, "<2:0>\n1\n</2:0>\n<2:0>\n1\n</2:0>\n")


def test_enum_values_over_two_lines_round_trip(engine: GrammarEngine) -> None:
    schema = {"type": "object", "properties": {"q": {"enum": ["two\nlines", "x"]}}}
    plan = compile(schema)
    text = render_frames(plan, {"q": "two\nlines"}, V1)
    assert engine.accepts(grammar(plan, V1), text)
    run = drive([text], plan, syntax=V1)
    assert run.final == {"q": "two\nlines"}
