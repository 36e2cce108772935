"""Line syntaxes specifics: heads (numeric and named), explicit indexes, ``|``
continuations, the ``end`` line, item grouping, noise, held-back line starts.

Rules every line syntax shares run over each of them; the answers are written with
:func:`lines`, which puts each syntax's own head before a value. The syntax contract and
the faults every syntax survives are in ``test_contract.py`` and ``test_faults.py``;
quoted values are in ``test_quoted.py``, wire names in ``test_names.py``.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from slotflight.assemble.assembler import Assembler
from slotflight.assemble.events import Diagnostic, SlotComplete, SlotFailed
from slotflight.plan.compiler import compile as compile_schema
from slotflight.plan.instance import FrameValue, UnexpressibleValue, walk_instance
from slotflight.syntax import SYNTAXES, grammar, render_frames
from slotflight.syntax.base import Close, End, Noise, NoiseRun, Open, Text
from slotflight.syntax.lines import LineSyntax
from slotflight.syntax.lines.blocks import BlockSyntax
from slotflight.syntax.lines.items import ItemCounter, always_in_item, explicit_indexes
from slotflight.syntax.lines.lexer import LineLexer, NumericHeads
from tests.assembler_support import TRIAGE_PLAN, drive, split_at
from tests.grammar_support import PLAN_DATA, GrammarEngine, Plan, plan_text

#: Every registered line syntax, the raw ones (values continue on "|" lines), the
#: numeric-id ones and the named ones.
LINES = [n for n, s in SYNTAXES.items() if isinstance(s, LineSyntax)]


def _line_syntax(name: str) -> LineSyntax:
    syntax = SYNTAXES[name]
    assert isinstance(syntax, LineSyntax)
    return syntax


RAW = [n for n in LINES if not _line_syntax(n).quoted]
#: The line syntaxes that write lists one line per item with their own head (all but
#: the block syntax, whose dashed items are in ``test_blocks.py``).
FLAT = [n for n in LINES if not isinstance(SYNTAXES[n], BlockSyntax)]
NUMERIC = [n for n in LINES if _line_syntax(n).ids == "numeric"]
NAMED = [n for n in LINES if _line_syntax(n).ids == "named"]

_ROW = re.compile(r"(\d+)(?::(\d+))?(?: (.*))?")


def lines(syntax: str, *rows: str, plan: Any = TRIAGE_PLAN) -> str:
    """The answer ``rows`` in ``syntax``, one line each: ``"ID value"`` or
    ``"ID:INDEX value"`` becomes the syntax's head and the value as it writes it (a
    quoted syntax quotes text); any other row (``|more``, ``end``, chatter) is as is."""
    chosen = _line_syntax(syntax)
    out = []
    for row in rows:
        m = _ROW.fullmatch(row)
        if m is None:
            out.append(row)
            continue
        slot = plan[int(m.group(1))]
        index = None if m.group(2) is None else int(m.group(2))
        head = chosen.head(plan, slot, index)
        value = m.group(3)
        if value is None:
            out.append(head)
        else:
            try:
                text = chosen.value_text(FrameValue(slot, index, value))
            except UnexpressibleValue:  # not text the writer would produce: as is
                text = value
            out.append(f"{head} {text}")
    return "".join(f"{line}\n" for line in out)


def _codes(run: Any) -> list[str]:
    return [e.code for e in run.events if isinstance(e, Diagnostic)]


def _all_splits(text: str) -> list[list[Any]]:
    data = text.encode("utf-8")
    return [
        [text],
        list(text),
        [data[i : i + 1] for i in range(len(data))],
        split_at(data, range(0, len(data), 3)),
    ]


def _same_everywhere(text: str, syntax: str, **kwargs: Any) -> Any:
    """Drive ``text`` under several chunkings; all must agree. Returns the whole run."""
    whole = drive([text], syntax=syntax, **kwargs)
    for chunks in _all_splits(text):
        run = drive(chunks, syntax=syntax, **kwargs)
        assert run.non_delta() == whole.non_delta(), chunks
        assert run.deltas() == whole.deltas()
        assert run.final == whole.final
    return whole


# -- lines and continuations ----------------------------------------------------------


@pytest.mark.parametrize("syntax", RAW)
def test_continuation_lines_extend_a_string_and_blank_lines_inside_are_skipped(
    syntax: str,
) -> None:
    text = lines(syntax, "1 first line", "|second", "", "|", "|  indented", "2 3", "end")
    run = _same_everywhere(text, syntax)
    assert run.final == {"summary": "first line\nsecond\n\n  indented", "priority": 3}
    assert _codes(run) == []


@pytest.mark.parametrize("syntax", RAW)
def test_a_value_may_start_on_a_continuation_line(syntax: str) -> None:
    run = _same_everywhere(lines(syntax, "1", "|text on the next line", "end"), syntax)
    assert run.final == {"summary": "text on the next line"}


@pytest.mark.parametrize("syntax", RAW)
def test_scalars_end_at_their_newline_and_a_continuation_after_one_is_noise(syntax: str) -> None:
    run = _same_everywhere(lines(syntax, "2 3", "|4", "3 negative"), syntax)
    assert run.final == {"priority": 3, "sentiment": "negative"}
    assert _codes(run) == ["noise"]


def _completed(asm: Assembler, text: str) -> list[str]:
    return [e.path for e in asm.feed(text) if isinstance(e, SlotComplete)]


@pytest.mark.parametrize("syntax", RAW)
def test_under_its_grammar_a_one_line_value_completes_at_its_newline(syntax: str) -> None:
    """The plan's grammar keeps a string with a ``maxLength`` (summary: 400) and a JSON
    value (extra) to one line, so under it they complete at their newline; a string
    without a bound (an item's owner) may go on over ``|`` lines unless compact mode
    bounds it too."""
    extra = _line_syntax(syntax).head(TRIAGE_PLAN, TRIAGE_PLAN[9], None) + ' {"a": 1}\n'
    for line, path in ((lines(syntax, "1 Export fails"), "/summary"), (extra, "/extra")):
        assert _completed(Assembler(TRIAGE_PLAN, syntax=syntax), line) == []
        assert _completed(Assembler(TRIAGE_PLAN, syntax=syntax, grammar=True), line) == [path]
    owner = lines(syntax, "6 ada")
    assert _completed(Assembler(TRIAGE_PLAN, syntax=syntax, grammar=True), owner) == []
    compact = Assembler(TRIAGE_PLAN, syntax=syntax, grammar=True, grammar_max_string_chars=40)
    assert _completed(compact, owner) == ["/items/0/owner"]
    text = (
        lines(syntax, "1 Export fails", "6 ada", "|lovelace") + extra + lines(syntax, "2 3", "end")
    )
    for constrained in (False, True):  # text the grammar admits reads the same either way
        run = _same_everywhere(text, syntax, grammar=constrained)
        assert run.final == {
            "summary": "Export fails",
            "items": [{"owner": "ada\nlovelace"}],
            "extra": {"a": 1},
            "priority": 3,
        }
        assert _codes(run) == []


@pytest.mark.parametrize("syntax", RAW)
def test_under_its_grammar_a_continuation_of_a_one_line_value_is_noise(syntax: str) -> None:
    """Output that breaks the grammar (a server that ignored it): the value stays as it
    completed, the ``|`` line is noise."""
    text = lines(syntax, "1 Export fails", "|since Monday", "2 3", "end")
    assert _same_everywhere(text, syntax).final["summary"] == "Export fails\nsince Monday"
    run = _same_everywhere(text, syntax, grammar=True)
    assert run.final == {"summary": "Export fails", "priority": 3}
    assert _codes(run) == ["noise"]


@pytest.mark.parametrize("syntax", LINES)
def test_a_scalar_completes_at_its_newline_before_the_next_line_arrives(syntax: str) -> None:
    asm = Assembler(TRIAGE_PLAN, syntax=syntax)
    events = asm.feed(lines(syntax, "2 3"))
    assert [e.value for e in events if isinstance(e, SlotComplete)] == [3]
    events = asm.feed(lines(syntax, "1 summary"))
    if _line_syntax(syntax).quoted:  # a quoted value is complete at its closing quote
        assert [e.path for e in events if isinstance(e, SlotComplete)] == ["/summary"]
        return
    assert not [e for e in events if isinstance(e, SlotComplete)]  # a "|" line may follow
    events = asm.feed(lines(syntax, "4 true")[:1])
    assert [e.path for e in events if isinstance(e, SlotComplete)] == ["/summary"]


@pytest.mark.parametrize("syntax", RAW)
def test_strings_stream_and_are_trimmed(syntax: str) -> None:
    run = _same_everywhere(lines(syntax, "1   Ada Lovelace   ", "|  ", "end"), syntax)
    assert run.final == {"summary": "Ada Lovelace"}
    assert run.deltas() == {"/summary": "Ada Lovelace"}


@pytest.mark.parametrize("syntax", RAW)
def test_leading_blanks_before_heads_and_continuations_are_allowed(syntax: str) -> None:
    text = (
        "  " + lines(syntax, "1 a", "\t|b").replace("\n|", "\n\t|") + "   " + lines(syntax, "2 4")
    )
    run = _same_everywhere(text + "end\n", syntax)
    assert run.final == {"summary": "a\nb", "priority": 4}


@pytest.mark.parametrize(
    "line",
    ["3.5 stars", "2025-01-02 was a day", "1) first", "1. first", "1:x y", "12345678901 x", "e"],
)
@pytest.mark.parametrize("syntax", NUMERIC)
def test_lines_that_only_look_like_numeric_heads_are_noise(syntax: str, line: str) -> None:
    run = _same_everywhere(f"{line}\n2 3\n", syntax)
    assert run.final == {"priority": 3}
    assert _codes(run) == ["noise"]


@pytest.mark.parametrize(
    "line",
    [
        "summary is this",  # no colon
        "Summary: x",  # names are case-sensitive
        "summary : x",  # nothing between the name and the colon
        "summaryx: y",
        "my summary: x",
        "priority[x]: 3",
        "priority[1234567890]: 3",
        "e",
    ],
)
@pytest.mark.parametrize("syntax", NAMED)
def test_lines_that_only_look_like_named_heads_are_noise(syntax: str, line: str) -> None:
    run = _same_everywhere(f"{line}\n" + lines(syntax, "2 3"), syntax)
    assert run.final == {"priority": 3}
    assert _codes(run) == ["noise"]


@pytest.mark.parametrize("syntax", RAW)
def test_crlf_and_a_lone_carriage_return(syntax: str) -> None:
    text = lines(syntax, "1 a", "|b\rc", "2 3", "end").replace("\n", "\r\n")
    run = _same_everywhere(text, syntax)
    assert run.final == {"summary": "a\nb\rc", "priority": 3}
    crlf = drive([text[i : i + 1] for i in range(len(text))], syntax=syntax)
    assert crlf.final == run.final


@pytest.mark.parametrize("syntax", LINES)
def test_one_byte_chunks_of_non_ascii_text(syntax: str) -> None:
    text = lines(syntax, "1 Zoë 😀 失敗 한국어", "5 élan", "end")
    data = text.encode("utf-8")
    run = drive([data[i : i + 1] for i in range(len(data))], syntax=syntax)
    assert run.final == {"summary": "Zoë 😀 失敗 한국어", "tags": ["élan"]}
    assert _codes(run) == []


# -- the end line ------------------------------------------------------------------------


@pytest.mark.parametrize("syntax", LINES)
def test_text_after_the_end_line_is_ignored_and_reported_once(syntax: str) -> None:
    text = lines(syntax, "2 3", "end", "1 not a value", "Thanks!") + "x" * 10_000
    run = _same_everywhere(text, syntax)
    assert run.final == {"priority": 3}
    assert _codes(run) == ["after_end"]


@pytest.mark.parametrize("syntax", LINES)
def test_end_line_closes_an_open_string_and_allows_trailing_blanks(syntax: str) -> None:
    run = _same_everywhere(lines(syntax, "1 last value", "end  "), syntax)
    assert run.final == {"summary": "last value"}
    assert _codes(run) == []


@pytest.mark.parametrize("syntax", LINES)
def test_end_without_a_final_newline_still_ends_the_output(syntax: str) -> None:
    run = _same_everywhere(lines(syntax, "2 3") + "end", syntax, complete=False)
    assert run.asm is not None
    assert _codes(run) == []
    missing = sorted(e.location for e in run.asm.outcome.errors)
    assert "/tags" not in missing and "/items/0/owner" not in missing


@pytest.mark.parametrize("syntax", LINES)
def test_end_line_makes_an_empty_array_given_even_if_the_stream_is_then_cut(syntax: str) -> None:
    head = lines(syntax, "1 s", "2 3", "3 negative", "4 true")
    ended = drive([head + "end\n"], syntax=syntax, complete=False).asm
    assert ended is not None and ended.outcome.ok
    assert ended.state["tags"] == [] and ended.state["items"] == []
    # without it, the same cut stream misses them (test_faults.py, every syntax)
    cut = drive([head], syntax=syntax, complete=False).asm
    assert cut is not None and not cut.outcome.ok


@pytest.mark.parametrize("syntax", LINES)
def test_words_that_start_like_end_are_noise(syntax: str) -> None:
    run = _same_everywhere(lines(syntax, "2 3", "endless", "en", "3 neutral"), syntax)
    assert run.final == {"priority": 3, "sentiment": "neutral"}
    assert _codes(run) == ["noise"]


# -- truncation ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "complete", "ok_slots"),
    [
        ("1 summary text\n", True, {"/summary"}),
        ("1 summary text\n", False, set()),  # a "|" line may have been cut off
        ("2 3", True, {"/priority"}),
        ("2 3", False, set()),  # might have been 35
        ("2 3\n", False, {"/priority"}),
        ("2 3\nend", False, {"/priority"}),
    ],
)
@pytest.mark.parametrize("syntax", RAW)
def test_a_value_only_the_end_of_the_stream_ended_is_truncated_when_cut(
    syntax: str, text: str, complete: bool, ok_slots: set[str]
) -> None:
    *rows, last = text.split("\n")
    written = lines(syntax, *rows) + (lines(syntax, last)[:-1] if last else "")
    run = _same_everywhere(written, syntax, complete=complete)
    assert run.asm is not None
    assert set(run.asm.completed()) == ok_slots
    truncated = [e for e in run.events if isinstance(e, SlotFailed) and e.error.code == "truncated"]
    assert len(truncated) == 1 - len(ok_slots)


# -- item grouping -------------------------------------------------------------------------


@pytest.mark.parametrize("syntax", LINES)
def test_object_array_items_are_grouped_by_line_order(syntax: str) -> None:
    text = lines(syntax, "6 Ada", "7 2025-01-01", "6 Bob", "6 Cy", "7 2025-01-03", "end")
    run = _same_everywhere(text, syntax)
    assert run.final == {
        "items": [
            {"owner": "Ada", "due": "2025-01-01"},
            {"owner": "Bob"},
            {"owner": "Cy", "due": "2025-01-03"},
        ]
    }
    assert run.asm is not None and not run.asm.outcome.ok  # item 1 lacks its required due


@pytest.mark.parametrize("syntax", LINES)
def test_a_field_out_of_order_stays_in_its_item_until_a_field_repeats(syntax: str) -> None:
    text = lines(syntax, "7 2025-01-01", "6 Ada", "7 2025-01-02", "6 Bob", "end")
    run = _same_everywhere(text, syntax)
    assert run.final["items"] == [
        {"owner": "Ada", "due": "2025-01-01"},
        {"owner": "Bob", "due": "2025-01-02"},
    ]


@pytest.mark.parametrize("syntax", LINES)
def test_explicit_indexes_move_the_array_and_grouping_continues_from_there(syntax: str) -> None:
    text = lines(syntax, "6:0 Ada", "6:1 Bob", "7 2025-01-02", "7:0 2025-01-01", "end")
    run = _same_everywhere(text, syntax)
    assert run.final["items"] == [
        {"owner": "Ada", "due": "2025-01-01"},
        {"owner": "Bob", "due": "2025-01-02"},
    ]


@pytest.mark.parametrize("syntax", LINES)
def test_scalar_arrays_count_their_own_items_across_other_lines(syntax: str) -> None:
    text = lines(syntax, "5 a", "6 Ada", "5 b", "7 2025-01-01", "5 c", "end")
    run = _same_everywhere(text, syntax)
    assert run.final == {"tags": ["a", "b", "c"], "items": [{"owner": "Ada", "due": "2025-01-01"}]}
    assert _codes(run) == []


def test_item_counter_rule() -> None:
    counter = ItemCounter({6: "items", 7: "items", 5: "tags"})
    assert counter.implicit(1) is None
    assert [counter.take(i, None) for i in (6, 7, 5, 6, 5, 7, 7)] == [0, 0, 0, 1, 1, 1, 2]
    assert counter.take(7, 5) == 5
    assert counter.implicit(6) == 5 and counter.implicit(7) == 6


class Entry(BaseModel):
    note: str | None = None
    when: dt.date


class Log(BaseModel):
    entries: list[Entry]
    labels: list[str] = []


@pytest.mark.parametrize("syntax", FLAT)
def test_an_item_opening_with_a_field_not_every_item_has_carries_its_index(syntax: str) -> None:
    plan = compile_schema(Log)
    assert not always_in_item(plan.slots[0]) and always_in_item(plan.slots[1])
    value = {"entries": [{"when": "2025-01-01"}, {"note": "n", "when": "2025-01-02"}]}
    text = render_frames(plan, value, syntax)
    assert text == lines(syntax, "2 2025-01-01", "1:1 n", "2 2025-01-02", "end", plan=plan)
    asm = Assembler(plan, syntax=syntax)
    asm.feed(text)
    asm.close()
    assert asm.outcome.ok and asm.result == Log.model_validate(value)
    # without the index the note would join the first item
    merged = Assembler(plan, syntax=syntax)
    merged.feed(lines(syntax, "2 2025-01-01", "1 n", "2 2025-01-02", "end", plan=plan))
    merged.close()
    assert merged.state["entries"][0] == {"note": "n", "when": "2025-01-01"}


def test_indexes_are_written_only_where_the_rule_needs_them() -> None:
    plan = compile_schema(Log)
    frames = list(walk_instance(plan, {"entries": [{"note": "a", "when": "2025-01-01"}] * 3}))
    assert explicit_indexes(frames) == [False, False, True, False, True, False]
    retry = [f for f in frames if f.index == 2 and f.slot.id == 2]
    assert explicit_indexes(retry) == [True]


# -- noise and unknown ids -----------------------------------------------------------------


@pytest.mark.parametrize("syntax", LINES)
def test_chatter_before_and_code_fences_around_the_lines(syntax: str) -> None:
    text = "Sure! Here is the answer:\n```\n" + lines(syntax, "1 s", "2 3", "```", "end")
    run = _same_everywhere(text + "Hope this helps.", syntax)
    assert run.final == {"summary": "s", "priority": 3}
    assert _codes(run) == ["noise", "noise", "after_end"]


@pytest.mark.parametrize("syntax", RAW)
def test_a_noise_line_ends_the_string_before_it(syntax: str) -> None:
    text = lines(syntax, "1 the summary", "I think that is all.", "|not part of it")
    run = _same_everywhere(text, syntax)
    assert run.final == {"summary": "the summary"}


@pytest.mark.parametrize("syntax", NUMERIC)
def test_unknown_ids_are_skipped_with_their_continuation_lines(syntax: str) -> None:
    run = _same_everywhere("99 secret\n|more secret\n1 kept\n42:3 x\nend\n", syntax)
    assert run.final == {"summary": "kept"}
    assert _codes(run) == ["unknown_slot", "unknown_slot"]


@pytest.mark.parametrize("syntax", NAMED)
def test_an_unknown_name_is_chatter(syntax: str) -> None:
    """A named syntax knows only its plan's names: any other line is noise, and its
    continuation lines with it."""
    text = "secret: x\n|more secret\n" + lines(syntax, "1 kept", "end")
    run = _same_everywhere(text, syntax)
    assert run.final == {"summary": "kept"}
    assert _codes(run) == ["noise"]


@pytest.mark.parametrize("syntax", LINES)
def test_index_on_a_plain_slot_is_tolerated(syntax: str) -> None:
    run = _same_everywhere(lines(syntax, "2:0 3", "end"), syntax)
    assert run.final == {"priority": 3}
    assert _codes(run) == ["unexpected_index"]


# -- the lexer on its own --------------------------------------------------------------------


def test_tokens_and_offsets() -> None:
    lexer = LineLexer(NumericHeads(frozenset({1, 2})), groups={}, multiline=frozenset({1}))
    tokens = lexer.feed("x\n1 ab\n|c\n2 3\nend\n") + lexer.close()
    kinds = [type(t) for t in tokens]
    assert kinds == [Noise, NoiseRun, Open, Text, Text, Text, Close, Open, Text, Close, End]
    assert tokens[2] == Open(1, None, 2, "1")
    assert tokens[7] == Open(2, None, 10, "2")
    assert tokens[-1] == End(14)
    assert "".join(t.text for t in tokens if isinstance(t, Text)) == "ab\nc3"


@pytest.mark.parametrize("syntax", LINES)
def test_value_text_is_never_held_back(syntax: str) -> None:
    lexer = SYNTAXES[syntax].lexer(TRIAGE_PLAN)
    lexer.feed(lines(syntax, "1 x")[:-2])  # the head and the value's start
    chunk = "word " * 200
    for _ in range(50):
        tokens = lexer.feed(chunk)
        assert "".join(t.text for t in tokens if isinstance(t, Text)) == chunk


def test_a_numeric_line_start_is_held_only_while_it_may_still_be_a_frame_line() -> None:
    lexer = SYNTAXES[NUMERIC[0]].lexer(TRIAGE_PLAN)
    assert lexer.feed("12") == []  # may be "12 value"
    assert lexer.feed("3456789") == []
    tokens = lexer.feed("0")  # ten digits: not an id
    assert [type(t) for t in tokens] == [Noise, Noise]
    assert sum(t.count for t in tokens if isinstance(t, Noise)) == 10
    assert lexer.feed("11111") == [Noise(5)]


class Person(BaseModel):
    owner: str
    owner_name: str
    owner_names: list[str] = []


@pytest.mark.parametrize("syntax", NAMED)
def test_a_name_that_is_a_prefix_of_another_waits_for_its_colon(syntax: str) -> None:
    plan = compile_schema(Person)
    value = {"owner": "Ada", "owner_name": "Ada L.", "owner_names": ["A", "L"]}
    text = render_frames(plan, value, syntax)
    assert "owner:" in text and "owner_name:" in text and "owner_names:" in text
    whole = drive([text], plan, syntax=syntax)
    assert whole.asm is not None and whole.asm.outcome.ok and not whole.asm.diagnostics
    assert whole.final == value
    for chunks in _all_splits(text):
        run = drive(chunks, plan, syntax=syntax)
        assert run.non_delta() == whole.non_delta()
        assert run.final == value
    # every split point between two chunks, including inside a name and right after it
    for cut in range(1, len(text)):
        run = drive([text[:cut], text[cut:]], plan, syntax=syntax, check=False)
        assert run.non_delta() == whole.non_delta(), cut


@pytest.mark.parametrize("syntax", NAMED)
def test_a_line_start_is_held_only_while_it_may_still_be_a_name(syntax: str) -> None:
    lexer = SYNTAXES[syntax].lexer(TRIAGE_PLAN)
    assert lexer.feed("summ") == []  # may be "summary: ..."
    assert lexer.feed("ary") == []
    assert lexer.feed(":") == []  # the blank after the colon may follow
    tokens = lexer.feed(" x")
    assert isinstance(tokens[0], Open) and tokens[0].slot == 1
    assert "".join(t.text for t in tokens if isinstance(t, Text)) == "x"
    lexer = SYNTAXES[syntax].lexer(TRIAGE_PLAN)
    assert lexer.feed("summ") == []
    tokens = lexer.feed("er")  # no name starts so
    assert tokens and all(isinstance(t, Noise) for t in tokens)
    assert sum(t.count for t in tokens if isinstance(t, Noise)) == 6


# -- the grammar ---------------------------------------------------------------------------


# a text line starting with the continuation marker must still read as text
DATA: dict[str, Any] = {**PLAN_DATA, "summary": f"{PLAN_DATA['summary']}\n| not a marker here"}


def _good(syntax: str, **changes: Any) -> str:
    return plan_text(syntax, DATA, **changes)


@pytest.mark.parametrize("syntax", LINES)
def test_rendered_lines_are_accepted(engine: GrammarEngine, syntax: str) -> None:
    g = grammar(compile_schema(Plan), syntax)
    good = _good(syntax)
    assert engine.accepts(g, good)
    assert engine.accepts(g, good.removesuffix("\n"))  # the end line may end the output
    # a grammar never admits an empty string: a model would write one every time
    assert engine.accepts(g, _good(syntax, place=None, ref=None, steps=[], summary="s"))
    assert not engine.accepts(g, _good(syntax, place=None, ref=None, steps=[], summary=""))


@pytest.mark.parametrize("syntax", FLAT)
def test_items_opening_with_an_optional_field_need_their_index(
    engine: GrammarEngine, syntax: str
) -> None:
    plan = compile_schema(Log)
    g = grammar(plan, syntax)
    value = {"entries": [{"when": "2025-01-01"}, {"note": "n", "when": "2025-01-02"}]}
    text = render_frames(plan, value, syntax)
    indexed = lines(syntax, "1:1 n", plan=plan)
    assert indexed in text
    assert engine.accepts(g, text)
    merged = text.replace(indexed, lines(syntax, "1 n", plan=plan))
    assert not engine.accepts(g, merged)
    # what the grammar refuses is exactly what the parser would read differently
    asm = Assembler(plan, syntax=syntax)
    asm.feed(merged)
    asm.close()
    assert asm.state["entries"][0] == {"note": "n", "when": "2025-01-01"}


def _line(syntax: str, row: str) -> str:
    return lines(syntax, row, plan=compile_schema(Plan))


def _broken(syntax: str) -> list[tuple[str, str, str]]:
    good = _good(syntax)
    L = lambda row: _line(syntax, row)  # noqa: E731
    cases = [
        ("no end line", good.removesuffix("end\n")),
        ("chatter after the end line", good + "Done!\n"),
        ("chatter before the lines", "Sure:\n" + good),
        ("a marker before the head", good.replace(L("2 2"), "@" + L("2 2"))),
        ("a v1 frame", good.replace(L("2 2"), "<2>\n2\n</2>\n")),
        ("wrong enum value", good.replace(L("6 angry"), L("6 furious"))),
        ("letters in an integer", good.replace(L("3 -3"), L("3 -3x"))),
        ("no blank after the head", good.replace(L("3 -3"), L("3 -3").replace(" ", "", 1))),
        ("a continuation after a scalar", good.replace(L("3 -3"), L("3 -3") + "|4\n")),
        ("an index on a scalar-list item", good.replace(L("7 export"), L("7:0 export"))),
        ("an index on a plain slot", good.replace(L("2 2"), L("2:0 2"))),
        ("missing required slot", good.replace(L("3 -3"), "")),
        ("too many scalar items", _good(syntax, tags=["a", "b", "c", "d"])),
        ("too many object items", _good(syntax, steps=[{"owner": "x", "hours": 1}] * 3)),
        ("json over two lines", _good(syntax, extra={"a": 1}).replace('{"a":1}', '{"a":\n|1}')),
        ("non-nullable null", good.replace(L("2 2"), _line(syntax, "2 null"))),
        ("stream ends inside a value", good[: good.index(L("6 angry")) + len(L("6 a"))]),
    ]
    return [(syntax, description, broken) for description, broken in cases]


@pytest.mark.parametrize(("syntax", "description", "broken"), [c for s in FLAT for c in _broken(s)])
def test_malformed_lines_are_rejected(
    engine: GrammarEngine, syntax: str, description: str, broken: str
) -> None:
    assert broken != _good(syntax), description
    assert not engine.accepts(grammar(compile_schema(Plan), syntax), broken), description


# -- the benchmark instances -----------------------------------------------------------------


INSTANCES = [
    json.loads(line)
    for line in (Path(__file__).parent.parent.parent / "benchmarks" / "instances.jsonl")
    .read_text(encoding="utf-8")
    .splitlines()
    if line.strip()
]


@pytest.mark.parametrize("syntax", LINES)
def test_benchmark_instances_round_trip_with_no_diagnostic(syntax: str) -> None:
    from slotflight.bench.models import SCHEMAS

    for row in INSTANCES:
        model = SCHEMAS[row["schema"]]
        plan = compile_schema(model)
        run = drive([render_frames(plan, row["output"], syntax)], plan, syntax=syntax)
        assert run.asm is not None and run.asm.outcome.ok, row["task"]
        assert run.asm.result == model.model_validate(row["output"])
        assert _codes(run) == []
