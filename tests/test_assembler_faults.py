"""Fault injection: a misbehaving model must never crash the assembler or lose data."""

from __future__ import annotations

from functools import cache
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slotflight.assemble.assembler import Assembler, Limits
from slotflight.assemble.events import Diagnostic, PassFailed, Retry, SlotFailed
from tests.assembler_support import SYNTAXES, TRIAGE_PLAN, drive, frame, render_triage

VALUE: dict[str, Any] = {
    "summary": "Zoë's export — 失敗 😀 <b>bold</b>",
    "priority": 4,
    "sentiment": "negative",
    "urgent": False,
    "tags": ["export", "ünïcode"],
    "items": [{"owner": "José", "due": "2025-03-04"}, {"owner": "김민수", "due": "2025-03-05"}],
}
#: Where the first tag frame starts, and the end of the first item's last frame.
FIRST_TAG = {"v1": "<5:0>", "v2": "5 export"}
FIRST_ITEM_LAST = {"v1": "</7:0>\n", "v2": "7 2025-03-04\n"}


@cache
def _text(syntax: str) -> str:
    return render_triage(VALUE, syntax)


def _codes(run: Any) -> list[str]:
    return [e.code for e in run.events if isinstance(e, Diagnostic)]


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_truncation_at_every_byte_offset_keeps_every_closed_slot(syntax: str) -> None:
    text = _text(syntax)
    data = text.encode("utf-8")
    first_item_end = len(
        text[: text.index(FIRST_ITEM_LAST[syntax]) + len(FIRST_ITEM_LAST[syntax])].encode("utf-8")
    )
    full_completed = drive([text], syntax=syntax).asm.completed()  # type: ignore[union-attr]
    for cut in range(len(data) + 1):
        run = drive([data[:cut]], syntax=syntax, check=cut % 7 == 0, complete=cut == len(data))
        asm = run.asm
        assert asm is not None
        completed = asm.completed()
        for pointer, value in completed.items():
            assert full_completed[pointer] == value
        if cut == len(data):
            assert asm.outcome.ok
        elif asm.outcome.ok:
            # a cut between frames (before v2's end line) cannot tell "two items"
            # from "one item"
            assert cut >= first_item_end
            assert asm.state in ({**VALUE, "items": VALUE["items"][:1]}, VALUE)
        else:
            truncated = [
                e for e in run.events if isinstance(e, SlotFailed) and e.error.code == "truncated"
            ]
            assert len(truncated) <= 1
            for e in truncated:
                assert e.path not in completed


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_duplicate_frame_first_wins(syntax: str) -> None:
    run = drive([frame("2", "3", syntax=syntax), frame("2", "5", syntax=syntax)], syntax=syntax)
    assert run.final["priority"] == 3
    assert "duplicate_frame" in _codes(run)


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_unknown_ids_are_skipped_with_their_body(syntax: str) -> None:
    frames = [("99", "secret\nmore"), ("1", "kept"), ("42:0", "x")]
    run = drive([frame(tag, body, syntax=syntax) for tag, body in frames], syntax=syntax)
    assert run.final == {"summary": "kept"}
    assert _codes(run).count("unknown_slot") == 2
    assert "noise" not in _codes(run)


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_chatter_code_fences_and_blank_lines_around_frames(syntax: str) -> None:
    text = _text(syntax)
    priority = frame("2", "4", syntax=syntax)
    noisy = (
        "Sure! Here are the frames:\n```\n\n"
        + text.replace(priority, priority + "\nok\n")
        + "```\nDone."
    )
    run = drive([noisy], syntax=syntax)
    assert run.asm is not None and run.asm.outcome.ok
    assert run.final == VALUE
    assert "noise" in _codes(run)


def test_nested_open_tag_closes_the_previous_frame() -> None:
    run = drive(["<1>\nsummary text\n<2>\n3\n</2>\n"])
    assert run.final == {"summary": "summary text", "priority": 3}
    assert "nested_open" in _codes(run)


def test_closing_tag_for_another_slot_closes_the_open_frame() -> None:
    run = drive(["<1>\nsummary text\n</2>\n<2>\n3\n</2>\n"])
    assert run.final == {"summary": "summary text", "priority": 3}
    assert "mismatched_close" in _codes(run)


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_skipped_and_repeated_indexes(syntax: str) -> None:
    frames = [("5:0", "a"), ("5:2", "b"), ("5:2", "c"), ("5:1", "d")]
    run = drive([frame(tag, body, syntax=syntax) for tag, body in frames], syntax=syntax)
    assert run.final["tags"] == ["a", "b", "d"]
    codes = _codes(run)
    assert "index_skipped" in codes and "duplicate_frame" in codes
    assert "index_out_of_order" in codes


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_object_array_items_group_by_index_in_any_order(syntax: str) -> None:
    frames = [("6:0", "Ada"), ("6:1", "Bob"), ("7:1", "2025-01-02"), ("7:0", "2025-01-01")]
    run = drive([frame(tag, body, syntax=syntax) for tag, body in frames], syntax=syntax)
    assert run.final["items"] == [
        {"owner": "Ada", "due": "2025-01-01"},
        {"owner": "Bob", "due": "2025-01-02"},
    ]


def test_missing_index_and_unexpected_index_are_tolerated() -> None:
    run = drive([frame("5", "a"), frame("5", "b"), frame("2:0", "3")])
    assert run.final == {"tags": ["a", "b"], "priority": 3}
    assert _codes(run).count("missing_index") == 2
    assert "unexpected_index" in _codes(run)


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_too_many_items_are_dropped(syntax: str) -> None:
    run = drive([frame(f"5:{i}", f"t{i}", syntax=syntax) for i in range(8)], syntax=syntax)
    assert run.final["tags"] == [f"t{i}" for i in range(6)]
    assert _codes(run).count("too_many_items") == 2


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_invalid_utf8_is_a_diagnostic_not_a_crash(syntax: str) -> None:
    data = frame("1", "caf", syntax=syntax).encode("utf-8").replace(b"caf", b"caf\xff\xfe")
    run = drive([data[:6], data[6:]], syntax=syntax)
    assert run.final["summary"] == "caf\ufffd\ufffd"
    assert "invalid_utf8" in _codes(run)


#: How a frame for slot 1 opens and closes, to stream a body between them.
OPEN_CLOSE = {"v1": ("<1>\n", "\n</1>\n"), "v2": ("1 ", "\n")}


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_frame_too_large_fails_that_slot_and_keeps_memory_bounded(syntax: str) -> None:
    limits = Limits(max_frame_chars=100)
    body = "y" * 10_000
    opening, closing = OPEN_CLOSE[syntax]
    run = drive(
        [
            opening,
            *[body[i : i + 50] for i in range(0, len(body), 50)],
            closing,
            frame("2", "3", syntax=syntax),
        ],
        syntax=syntax,
        limits=limits,
    )
    assert "summary" not in run.final
    assert run.final["priority"] == 3
    failed = [
        e for e in run.events if isinstance(e, SlotFailed) and e.error.code == "frame_too_large"
    ]
    assert len(failed) == 1


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_total_limit_is_terminal_and_keeps_accepted_slots(syntax: str) -> None:
    limits = Limits(max_total_chars=60)
    frames = [("2", "3"), ("1", "z" * 200), ("3", "negative")]
    run = drive(
        [frame(tag, body, syntax=syntax) for tag, body in frames], syntax=syntax, limits=limits
    )
    errors = [e for e in run.events if isinstance(e, PassFailed)]
    assert len(errors) == 1 and errors[0].error.code == "limit_exceeded"
    assert run.final == {"priority": 3}


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_endless_chatter_gives_up(syntax: str) -> None:
    limits = Limits(max_noise_chars=500)
    chatter = ["I am thinking about it...\n"] * 100
    run = drive([frame("2", "3", syntax=syntax), *chatter], syntax=syntax, limits=limits)
    errors = [e for e in run.events if isinstance(e, PassFailed)]
    assert [e.error.code for e in errors] == ["no_frames"]
    assert run.final == {"priority": 3}


@pytest.mark.parametrize("syntax", SYNTAXES)
@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300), st.lists(st.integers(0, 300), max_size=10))
def test_arbitrary_bytes_never_raise(syntax: str, data: bytes, cuts: list[int]) -> None:
    asm = Assembler(TRIAGE_PLAN, syntax=syntax)
    points = sorted({c for c in cuts if 0 < c < len(data)})
    last = 0
    for p in [*points, len(data)]:
        asm.feed(data[last:p])
        last = p
    asm.close()
    assert isinstance(asm.state, dict)


#: Pieces of well- and ill-formed frame text per syntax.
SOUP = {
    "v1": ["<1>", "</1>", "<2>", "</2>", "<5:0>", "</5:0>", "<99>"],
    "v2": ["1 ", "2 ", "5 ", "5:0 ", "6 ", "7 ", "99 ", "|", "end", "e", "1", ":"],
}
SOUP_SHARED = ["\n", "\r\n", "x", "3", " ", "\t", "```", "é", "2025-01-02"]


@pytest.mark.parametrize("syntax", SYNTAXES)
@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_random_tag_soup_is_chunk_invariant(syntax: str, data: st.DataObject) -> None:
    pieces = data.draw(st.lists(st.sampled_from(SOUP[syntax] + SOUP_SHARED), max_size=60))
    text = "".join(pieces)
    whole = drive([text], syntax=syntax)
    ones = drive(list(text), syntax=syntax)
    assert ones.non_delta() == whole.non_delta()
    assert ones.deltas() == whole.deltas()
    assert ones.final == whole.final


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_retry_asks_only_for_failed_slots_and_keeps_accepted_ones(syntax: str) -> None:
    asm = Assembler(TRIAGE_PLAN, syntax=syntax)
    priority = frame("2", "4", syntax=syntax)
    asm.feed(_text(syntax).replace(priority, frame("2", "high", syntax=syntax)))
    asm.close()
    assert not asm.outcome.ok
    request = asm.retry_request()
    assert request is not None
    assert [(t.slot.id, t.index) for t in request.targets] == [(2, None)]
    assert request.targets[0].error.input == "high"
    assert request.accepted["summary"] == VALUE["summary"]
    _, events = asm.begin_retry(request)
    assert isinstance(events[0], Retry) and events[0].slots == ("priority",)
    second = frame("1", "changed!", syntax=syntax) + priority
    replay = asm.feed(second) + asm.close()
    assert "not_requested" in [e.code for e in replay if isinstance(e, Diagnostic)]
    assert asm.outcome.ok
    assert asm.state == VALUE


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_retry_of_a_scalar_sequence_replaces_it_whole(syntax: str) -> None:
    asm = Assembler(TRIAGE_PLAN, syntax=syntax)
    text = _text(syntax)
    asm.feed(text[: text.index("ünïcode") + 2])
    asm.close(complete=False)
    request = asm.retry_request()
    assert request is not None
    targets = {(t.slot.id, t.index) for t in request.targets}
    assert targets == {(5, None), (6, None)}
    assert request.accepted["tags"] == ["export"]
    _, events = asm.begin_retry(request)
    assert {"op": "replace", "path": "/tags", "value": []} in events[0].patch
    frames = [("5:0", "alpha"), ("5:1", "beta"), ("6:0", "Ada"), ("7:0", "2025-01-01")]
    asm.feed("".join(frame(tag, body, syntax=syntax) for tag, body in frames))
    asm.close()
    assert asm.outcome.ok, asm.outcome.errors
    assert asm.state["tags"] == ["alpha", "beta"]
    assert asm.state["summary"] == VALUE["summary"]


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_empty_arrays_count_as_given_only_when_the_stream_completed(syntax: str) -> None:
    text = _text(syntax)
    head = text[: text.index(FIRST_TAG[syntax])]
    assert drive([head], syntax=syntax).asm.outcome.ok  # type: ignore[union-attr]
    cut = drive([head], syntax=syntax, complete=False).asm
    assert cut is not None and not cut.outcome.ok
    assert sorted(e.location for e in cut.outcome.errors) == ["/items", "/tags"]
