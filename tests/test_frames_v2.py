"""Frame syntax v2 specifics: continuations, the end line, item grouping, noise, bounds.

The syntax-neutral properties (chunk invariance, truncation, faults, retries) run over
both syntaxes in ``test_assembler*.py``; this file covers what only v2 has.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from slotflight.assemble.assembler import Assembler
from slotflight.assemble.events import Diagnostic, SlotComplete, SlotFailed
from slotflight.plan.compiler import compile as compile_schema
from slotflight.plan.instance import walk_instance
from slotflight.prompting.prompt import (
    RetryItem,
    example_instance,
    extract_example,
    prompt,
    retry_prompt,
)
from slotflight.syntax import render_frames
from slotflight.syntax.base import CLOSE, END, NOISE, OPEN, TEXT
from slotflight.syntax.lines import ItemCounter, LineLexer, always_in_item, line_heads
from tests.assembler_support import TRIAGE_PLAN, drive, split_at
from tests.golden_models import GOLDEN_MODELS


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


def _same_everywhere(text: str, **kwargs: Any) -> Any:
    """Drive ``text`` under several chunkings; all must agree. Returns the whole run."""
    whole = drive([text], syntax="v2", **kwargs)
    for chunks in _all_splits(text):
        run = drive(chunks, syntax="v2", **kwargs)
        assert run.non_delta() == whole.non_delta(), chunks
        assert run.deltas() == whole.deltas()
        assert run.final == whole.final
    return whole


# -- lines and continuations ----------------------------------------------------------


def test_continuation_lines_extend_a_string_and_blank_lines_inside_are_skipped() -> None:
    run = _same_everywhere("1 first line\n|second\n\n|\n|  indented\n2 3\nend\n")
    assert run.final == {"summary": "first line\nsecond\n\n  indented", "priority": 3}
    assert _codes(run) == []


def test_a_value_may_start_on_a_continuation_line() -> None:
    run = _same_everywhere("1\n|text on the next line\nend\n")
    assert run.final == {"summary": "text on the next line"}


def test_scalars_end_at_their_newline_and_a_continuation_after_one_is_noise() -> None:
    run = _same_everywhere("2 3\n|4\n3 negative\n")
    assert run.final == {"priority": 3, "sentiment": "negative"}
    assert _codes(run) == ["noise"]


def test_a_scalar_completes_at_its_newline_before_the_next_line_arrives() -> None:
    asm = Assembler(TRIAGE_PLAN, syntax="v2")
    events = asm.feed("2 3\n")
    assert [e.value for e in events if isinstance(e, SlotComplete)] == [3]
    events = asm.feed("1 summary\n")
    assert not [e for e in events if isinstance(e, SlotComplete)]  # a "|" line may follow
    events = asm.feed("4")
    assert [e.path for e in events if isinstance(e, SlotComplete)] == ["/summary"]


def test_strings_stream_and_are_trimmed() -> None:
    run = _same_everywhere("1   Ada Lovelace   \n|  \nend\n")
    assert run.final == {"summary": "Ada Lovelace"}
    assert run.deltas() == {"/summary": "Ada Lovelace"}


def test_leading_blanks_before_ids_and_continuations_are_allowed() -> None:
    run = _same_everywhere("  1 a\n\t|b\n   2 4\nend\n")
    assert run.final == {"summary": "a\nb", "priority": 4}


@pytest.mark.parametrize(
    "line",
    ["3.5 stars", "2025-01-02 was a day", "1) first", "1. first", "1:x y", "12345678901 x", "e"],
)
def test_lines_that_only_look_like_frames_are_noise(line: str) -> None:
    run = _same_everywhere(f"{line}\n2 3\n")
    assert run.final == {"priority": 3}
    assert _codes(run) == ["noise"]


def test_crlf_and_a_lone_carriage_return() -> None:
    text = "1 a\r\n|b\rc\r\n2 3\r\nend\r\n"
    run = _same_everywhere(text)
    assert run.final == {"summary": "a\nb\rc", "priority": 3}
    crlf = drive([text[i : i + 1] for i in range(len(text))], syntax="v2")
    assert crlf.final == run.final


def test_one_byte_chunks_of_non_ascii_text() -> None:
    text = "1 Zoë 😀 失敗\n|한국어 — ünï\n5 élan\nend\n"
    data = text.encode("utf-8")
    run = drive([data[i : i + 1] for i in range(len(data))], syntax="v2")
    assert run.final == {"summary": "Zoë 😀 失敗\n한국어 — ünï", "tags": ["élan"]}
    assert _codes(run) == []


# -- the end line ------------------------------------------------------------------------


def test_text_after_the_end_line_is_ignored_and_reported_once() -> None:
    text = "2 3\nend\n1 not a value\nThanks!\n" + "x" * 10_000
    run = _same_everywhere(text)
    assert run.final == {"priority": 3}
    assert _codes(run) == ["after_end"]
    assert run.asm is not None and "unknown" not in str(run.asm.diagnostics)


def test_end_line_closes_an_open_string_and_allows_trailing_blanks() -> None:
    run = _same_everywhere("1 last value\nend  \n")
    assert run.final == {"summary": "last value"}
    assert _codes(run) == []


def test_end_without_a_final_newline_still_ends_the_output() -> None:
    run = _same_everywhere("2 3\nend", complete=False)
    assert run.asm is not None
    assert _codes(run) == []
    missing = sorted(e.location for e in run.asm.outcome.errors)
    assert "/tags" not in missing and "/items/0/owner" not in missing


def test_end_line_makes_an_empty_array_given_even_if_the_stream_is_then_cut() -> None:
    head = "1 s\n2 3\n3 negative\n4 true\n"
    ended = drive([head + "end\n"], syntax="v2", complete=False).asm
    assert ended is not None and ended.outcome.ok
    assert ended.state["tags"] == [] and ended.state["items"] == []
    cut = drive([head], syntax="v2", complete=False).asm
    assert cut is not None and not cut.outcome.ok
    assert sorted(e.location for e in cut.outcome.errors) == [
        "/items/0/due",
        "/items/0/owner",
        "/tags",
    ]


def test_words_that_start_like_end_are_noise() -> None:
    run = _same_everywhere("2 3\nendless\nen\n3 neutral\n")
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
def test_a_value_only_the_end_of_the_stream_ended_is_truncated_when_cut(
    text: str, complete: bool, ok_slots: set[str]
) -> None:
    run = _same_everywhere(text, complete=complete)
    assert run.asm is not None
    assert set(run.asm.completed()) == ok_slots
    truncated = [e for e in run.events if isinstance(e, SlotFailed) and e.error.code == "truncated"]
    assert len(truncated) == 1 - len(ok_slots)


def test_truncation_at_every_offset_never_completes_a_value_that_differs() -> None:
    value = {
        "summary": "Zoë's export\nsecond line 😀",
        "priority": 4,
        "sentiment": "negative",
        "urgent": False,
        "tags": ["export", "ünïcode"],
        "items": [{"owner": "José", "due": "2025-03-04"}, {"owner": "김민수", "due": "2025-03-05"}],
    }
    text = render_frames(TRIAGE_PLAN, value, "v2")
    full = drive([text], syntax="v2").asm
    assert full is not None and full.outcome.ok
    data = text.encode("utf-8")
    for cut in range(len(data)):
        asm = drive([data[:cut]], syntax="v2", check=False, complete=False).asm
        assert asm is not None
        for pointer, got in asm.completed().items():
            assert full.completed()[pointer] == got, (cut, pointer)


# -- item grouping -------------------------------------------------------------------------


def test_object_array_items_are_grouped_by_line_order() -> None:
    run = _same_everywhere("6 Ada\n7 2025-01-01\n6 Bob\n6 Cy\n7 2025-01-03\nend\n")
    assert run.final == {
        "items": [
            {"owner": "Ada", "due": "2025-01-01"},
            {"owner": "Bob"},
            {"owner": "Cy", "due": "2025-01-03"},
        ]
    }
    assert run.asm is not None and not run.asm.outcome.ok  # item 1 lacks its required due


def test_a_field_out_of_order_stays_in_its_item_until_a_field_repeats() -> None:
    run = _same_everywhere("7 2025-01-01\n6 Ada\n7 2025-01-02\n6 Bob\nend\n")
    assert run.final["items"] == [
        {"owner": "Ada", "due": "2025-01-01"},
        {"owner": "Bob", "due": "2025-01-02"},
    ]


def test_explicit_indexes_move_the_array_and_grouping_continues_from_there() -> None:
    run = _same_everywhere("6:0 Ada\n6:1 Bob\n7 2025-01-02\n7:0 2025-01-01\nend\n")
    assert run.final["items"] == [
        {"owner": "Ada", "due": "2025-01-01"},
        {"owner": "Bob", "due": "2025-01-02"},
    ]


def test_scalar_arrays_count_their_own_items_across_other_lines() -> None:
    run = _same_everywhere("5 a\n6 Ada\n5 b\n7 2025-01-01\n5 c\nend\n")
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


def test_an_item_opening_with_a_field_not_every_item_has_carries_its_index() -> None:
    plan = compile_schema(Log)
    assert not always_in_item(plan.slots[0]) and always_in_item(plan.slots[1])
    value = {"entries": [{"when": "2025-01-01"}, {"note": "n", "when": "2025-01-02"}]}
    text = render_frames(plan, value, "v2")
    assert text == "2 2025-01-01\n1:1 n\n2 2025-01-02\nend\n"
    asm = Assembler(plan, syntax="v2")
    asm.feed(text)
    asm.close()
    assert asm.outcome.ok and asm.result == Log.model_validate(value)
    # without the index the note would join the first item
    merged = Assembler(plan, syntax="v2")
    merged.feed(text.replace("1:1 n", "1 n"))
    merged.close()
    assert merged.state["entries"][0] == {"note": "n", "when": "2025-01-01"}


def test_line_heads_write_indexes_only_where_the_rule_needs_them() -> None:
    plan = compile_schema(Log)
    frames = list(walk_instance(plan, {"entries": [{"note": "a", "when": "2025-01-01"}] * 3}))
    assert line_heads(frames) == ["1", "2", "1:1", "2", "1:2", "2"]
    retry = [f for f in frames if f.index == 2 and f.slot.id == 2]
    assert line_heads(retry) == ["2:2"]


# -- noise and unknown ids -----------------------------------------------------------------


def test_chatter_before_and_code_fences_around_the_lines() -> None:
    text = "Sure! Here is the answer:\n```\n1 s\n2 3\n```\nend\nHope this helps."
    run = _same_everywhere(text)
    assert run.final == {"summary": "s", "priority": 3}
    assert _codes(run) == ["noise", "noise", "after_end"]


def test_a_noise_line_ends_the_string_before_it() -> None:
    run = _same_everywhere("1 the summary\nI think that is all.\n|not part of it\n")
    assert run.final == {"summary": "the summary"}


def test_unknown_ids_are_skipped_with_their_continuation_lines() -> None:
    run = _same_everywhere("99 secret\n|more secret\n1 kept\n42:3 x\nend\n")
    assert run.final == {"summary": "kept"}
    assert _codes(run) == ["unknown_slot", "unknown_slot"]


def test_index_on_a_plain_slot_is_tolerated() -> None:
    run = _same_everywhere("2:0 3\nend\n")
    assert run.final == {"priority": 3}
    assert _codes(run) == ["unexpected_index"]


# -- the lexer on its own --------------------------------------------------------------------


def test_tokens_and_offsets() -> None:
    lexer = LineLexer(frozenset({1, 2}), multiline=frozenset({1}))
    tokens = lexer.feed("x\n1 ab\n|c\n2 3\nend\n") + lexer.close()
    kinds = [t[0] for t in tokens]
    assert kinds == [NOISE, 4, OPEN, TEXT, TEXT, TEXT, CLOSE, OPEN, TEXT, CLOSE, END]
    assert tokens[2] == (OPEN, 1, None, 2)
    assert tokens[7] == (OPEN, 2, None, 10)
    assert tokens[-1] == (END, 14)
    assert "".join(t[1] for t in tokens if t[0] == TEXT) == "ab\nc3"


def test_value_text_is_never_held_back() -> None:
    lexer = LineLexer.for_plan(TRIAGE_PLAN)
    lexer.feed("1 ")
    chunk = "word " * 200
    for _ in range(50):
        tokens = lexer.feed(chunk)
        assert "".join(t[1] for t in tokens if t[0] == TEXT) == chunk


def test_a_line_start_is_held_only_while_it_may_still_be_a_frame_line() -> None:
    lexer = LineLexer.for_plan(TRIAGE_PLAN)
    assert lexer.feed("12") == []  # may be "12 value"
    assert lexer.feed("3456789") == []
    tokens = lexer.feed("0")  # ten digits: not an id
    assert [t[0] for t in tokens] == [NOISE, NOISE] and sum(t[1] for t in tokens) == 10
    assert lexer.feed("11111") == [(NOISE, 5)]


# -- the grammar, the prompt ----------------------------------------------------------------


INSTANCES = [
    json.loads(line)
    for line in (Path(__file__).parent.parent / "benchmarks" / "instances.jsonl")
    .read_text(encoding="utf-8")
    .splitlines()
    if line.strip()
]


def test_prompt_examples_parse_with_the_v2_parser() -> None:
    for model in GOLDEN_MODELS.values():
        plan = compile_schema(model)
        text = prompt(plan, "v2")
        assert "<" not in extract_example(text)
        asm = Assembler(plan, syntax="v2")
        asm.feed(extract_example(text))
        asm.close()
        assert asm.outcome.ok, asm.outcome.errors
        assert not asm.diagnostics
        assert asm.result == model.model_validate(example_instance(plan))


def test_retry_prompt_example_is_read_in_a_retry_pass() -> None:
    plan = compile_schema(Log)
    asm = Assembler(plan, syntax="v2")
    asm.feed("2 2025-01-01\n1:1 n\n2 someday\nend\n")
    asm.close()
    request = asm.retry_request()
    assert request is not None
    items = [RetryItem(t.slot, t.index, t.error.message, t.error.input) for t in request.targets]
    text = retry_prompt(plan, items, request.accepted, "v2")
    assert "- 2:1 entries[1].when" in text
    example = extract_example(text)
    assert example == "2:1 2025-01-31\nend\n"
    asm.begin_retry(request)
    asm.feed(example)
    asm.close()
    assert asm.outcome.ok
    assert asm.state["entries"][1] == {"note": "n", "when": "2025-01-31"}


def test_benchmark_instances_round_trip() -> None:
    from slotflight.bench.models import SCHEMAS

    for row in INSTANCES:
        model = SCHEMAS[row["schema"]]
        plan = compile_schema(model)
        run = _same_everywhere(render_frames(plan, row["output"], "v2"), plan=plan)
        assert run.asm is not None and run.asm.outcome.ok, row["task"]
        assert run.asm.result == model.model_validate(row["output"])
        assert _codes(run) == []
