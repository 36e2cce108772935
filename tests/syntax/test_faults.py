"""Fault injection, in every registered syntax: a misbehaving model must never crash the
assembler or lose data. Frame text is written by each syntax's own writer."""

from __future__ import annotations

from functools import cache
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slotflight.assemble.assembler import Assembler, Limits
from slotflight.assemble.events import Diagnostic, PassFailed, Retry, SlotFailed
from tests.assembler_support import (
    SYNTAXES,
    TRIAGE_PLAN,
    drive,
    frame,
    frames,
    render_changed,
    render_triage,
    slot_is,
    text_before,
    unknown_frame,
)

VALUE: dict[str, Any] = {
    "summary": "Zoë's export — 失敗 😀 <b>bold</b>",
    "priority": 4,
    "sentiment": "negative",
    "urgent": False,
    "tags": ["export", "ünïcode"],
    "items": [{"owner": "José", "due": "2025-03-04"}, {"owner": "김민수", "due": "2025-03-05"}],
}


@cache
def _text(syntax: str) -> str:
    return render_triage(VALUE, syntax)


def _codes(run: Any) -> list[str]:
    return [e.code for e in run.events if isinstance(e, Diagnostic)]


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_truncation_at_every_byte_offset_keeps_every_closed_slot(syntax: str) -> None:
    text = _text(syntax)
    data = text.encode("utf-8")
    first_item = text_before(VALUE, slot_is(7, 0), syntax, through=True)
    assert text.startswith(first_item)
    # a syntax may end a value before its newline (a quoted value at its closing quote)
    first_item_end = len(first_item.rstrip("\n").encode("utf-8"))
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
            # a cut between frames (before an end marker) cannot tell "two items"
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
    run = drive([frames([("2", "3"), ("2", "5")], syntax)], syntax=syntax)
    assert run.final["priority"] == 3
    assert "duplicate_frame" in _codes(run)


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_unknown_slots_are_skipped_with_their_body(syntax: str) -> None:
    """Frames for slots the plan does not know (written for a wider plan) never reach
    the state. A syntax that names slots by number reports them as unknown; one that
    names them by name cannot tell an unknown name from chatter (see the per-syntax
    tests)."""
    text = (
        unknown_frame("12", "secret\nmore", syntax=syntax)
        + frame("1", "kept", syntax=syntax)
        + unknown_frame("13:0", "x", syntax=syntax)
    )
    run = drive([text], syntax=syntax)
    assert run.final == {"summary": "kept"}
    assert run.asm is not None and "secret" not in str(run.asm.state)
    codes = _codes(run)
    assert codes and set(codes) <= {"unknown_slot", "noise"}


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_chatter_code_fences_and_blank_lines_around_frames(syntax: str) -> None:
    text = _text(syntax)
    head = text_before(VALUE, slot_is(2), syntax, through=True)
    assert text.startswith(head)
    noisy = (
        "Sure! Here are the frames:\n```\n\n" + head + "\nok\n" + text[len(head) :] + "```\nDone."
    )
    run = drive([noisy], syntax=syntax)
    assert run.asm is not None and run.asm.outcome.ok
    assert run.final == VALUE
    assert "noise" in _codes(run)


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_skipped_and_repeated_indexes(syntax: str) -> None:
    pairs = [("5:0", "a"), ("5:2", "b"), ("5:2", "c"), ("5:1", "d")]
    run = drive([frames(pairs, syntax)], syntax=syntax)
    assert run.final["tags"] == ["a", "b", "d"]
    codes = _codes(run)
    assert "index_skipped" in codes and "duplicate_frame" in codes
    assert "index_out_of_order" in codes


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_object_array_items_group_by_index_in_any_order(syntax: str) -> None:
    pairs = [("6:0", "Ada"), ("6:1", "Bob"), ("7:1", "2025-01-02"), ("7:0", "2025-01-01")]
    run = drive([frames(pairs, syntax)], syntax=syntax)
    assert run.final["items"] == [
        {"owner": "Ada", "due": "2025-01-01"},
        {"owner": "Bob", "due": "2025-01-02"},
    ]


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_too_many_items_are_dropped(syntax: str) -> None:
    run = drive([frames([(f"5:{i}", f"t{i}") for i in range(8)], syntax)], syntax=syntax)
    assert run.final["tags"] == [f"t{i}" for i in range(6)]
    assert _codes(run).count("too_many_items") == 2


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_invalid_utf8_is_a_diagnostic_not_a_crash(syntax: str) -> None:
    data = frame("1", "caf", syntax=syntax).encode("utf-8").replace(b"caf", b"caf\xff\xfe")
    run = drive([data[:6], data[6:]], syntax=syntax)
    assert run.final["summary"] == "caf\ufffd\ufffd"
    assert "invalid_utf8" in _codes(run)


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_frame_too_large_fails_that_slot_and_keeps_memory_bounded(syntax: str) -> None:
    limits = Limits(max_frame_chars=100)
    body = "y" * 10_000
    opening, closing = frame("1", "BODY", syntax=syntax).split("BODY")
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
    pairs = [("2", "3"), ("1", "z" * 200), ("3", "negative")]
    run = drive(
        [frame(tag, body, syntax=syntax) for tag, body in pairs], syntax=syntax, limits=limits
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
@given(st.binary(max_size=300), st.lists(st.integers(0, 300), max_size=10), st.booleans())
def test_arbitrary_bytes_never_raise(
    syntax: str, data: bytes, cuts: list[int], grammar: bool
) -> None:
    asm = Assembler(TRIAGE_PLAN, syntax=syntax, grammar=grammar)
    points = sorted({c for c in cuts if 0 < c < len(data)})
    last = 0
    for p in [*points, len(data)]:
        asm.feed(data[last:p])
        last = p
    asm.close()
    assert isinstance(asm.state, dict)


SOUP_SHARED = ["\n", "\r\n", "x", "3", " ", "\t", "```", "é", "2025-01-02", '"', "\\"]


@cache
def _soup(syntax: str) -> list[str]:
    """Pieces of well- and ill-formed frame text of ``syntax``: every line of a few
    written frames, their pieces cut at every third character, and the end marker."""
    text = (
        frames(
            [("1", "a\nb"), ("2", "3"), ("5:0", "x"), ("5:2", "y"), ("7:1", "2025-01-02")], syntax
        )
        + unknown_frame("10", "z", syntax=syntax)
        + render_triage({}, syntax)
    )
    pieces = set(text.splitlines(keepends=True))
    for line in list(pieces):
        pieces.update(line[i : i + 3] for i in range(len(line)))
    return sorted(pieces)


@pytest.mark.parametrize("syntax", SYNTAXES)
@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_random_tag_soup_is_chunk_invariant(syntax: str, data: st.DataObject) -> None:
    pieces = data.draw(st.lists(st.sampled_from(_soup(syntax) + SOUP_SHARED), max_size=60))
    text = "".join(pieces)
    # read as written under the plan's grammar too (one-line values end at their newline)
    options = data.draw(
        st.sampled_from([{}, {"grammar": True}, {"grammar": True, "grammar_max_string_chars": 5}])
    )
    whole = drive([text], syntax=syntax, **options)
    ones = drive(list(text), syntax=syntax, **options)
    assert ones.non_delta() == whole.non_delta()
    assert ones.deltas() == whole.deltas()
    assert ones.final == whole.final


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_retry_asks_only_for_failed_slots_and_keeps_accepted_ones(syntax: str) -> None:
    asm = Assembler(TRIAGE_PLAN, syntax=syntax)
    asm.feed(render_changed(VALUE, syntax, replace={"2": "high"}))
    asm.close()
    assert not asm.outcome.ok
    request = asm.retry_request()
    assert request is not None
    assert [(t.slot.id, t.index) for t in request.targets] == [(2, None)]
    assert request.targets[0].error.input == "high"
    assert request.accepted["summary"] == VALUE["summary"]
    _, events = asm.begin_retry(request)
    assert isinstance(events[0], Retry) and events[0].slots == ("priority",)
    second = frames([("1", "changed!"), ("2", 4)], syntax)
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
    pairs = [("5:0", "alpha"), ("5:1", "beta"), ("6:0", "Ada"), ("7:0", "2025-01-01")]
    asm.feed(frames(pairs, syntax))
    asm.close()
    assert asm.outcome.ok, asm.outcome.errors
    assert asm.state["tags"] == ["alpha", "beta"]
    assert asm.state["summary"] == VALUE["summary"]


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_empty_arrays_count_as_given_only_when_the_stream_completed(syntax: str) -> None:
    text = _text(syntax)
    head = text_before(VALUE, slot_is(5), syntax)
    assert text.startswith(head)
    assert drive([head], syntax=syntax).asm.outcome.ok  # type: ignore[union-attr]
    cut = drive([head], syntax=syntax, complete=False).asm
    assert cut is not None and not cut.outcome.ok
    assert sorted(e.location for e in cut.outcome.errors) == ["/items", "/tags"]
