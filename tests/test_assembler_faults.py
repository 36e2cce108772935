"""Fault injection: a misbehaving model must never crash the assembler or lose data."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from slotflight._assembler import Assembler, Limits
from slotflight._events import Diagnostic, ErrorEvent, Retry, SlotFailed
from tests.assembler_support import TRIAGE_PLAN, drive, frame, render_triage

VALUE: dict[str, Any] = {
    "summary": "Zoë's export — 失敗 😀 <b>bold</b>",
    "priority": 4,
    "sentiment": "negative",
    "urgent": False,
    "tags": ["export", "ünïcode"],
    "items": [{"owner": "José", "due": "2025-03-04"}, {"owner": "김민수", "due": "2025-03-05"}],
}
TEXT = render_triage(VALUE)
DATA = TEXT.encode("utf-8")
FULL = drive([TEXT])
FIRST_ITEM_END = len(TEXT[: TEXT.index("</7:0>") + len("</7:0>")].encode("utf-8"))


def _codes(run: Any) -> list[str]:
    return [e.code for e in run.events if isinstance(e, Diagnostic)]


def test_truncation_at_every_byte_offset_keeps_every_closed_slot() -> None:
    full_completed = FULL.asm.completed()  # type: ignore[union-attr]
    for cut in range(len(DATA) + 1):
        run = drive([DATA[:cut]], check=cut % 7 == 0, complete=cut == len(DATA))
        asm = run.asm
        assert asm is not None
        completed = asm.completed()
        for pointer, value in completed.items():
            assert full_completed[pointer] == value
        if cut == len(DATA):
            assert asm.outcome.ok
        elif asm.outcome.ok:
            # v1 cannot tell "two items" from "one item, then cut between frames"
            assert cut >= FIRST_ITEM_END
            assert asm.state in ({**VALUE, "items": VALUE["items"][:1]}, VALUE)
        else:
            truncated = [
                e for e in run.events if isinstance(e, SlotFailed) and e.error.code == "truncated"
            ]
            assert len(truncated) <= 1
            for e in truncated:
                assert e.path not in completed


def test_duplicate_frame_first_wins() -> None:
    run = drive([frame("2", "3"), frame("2", "5")])
    assert run.final["priority"] == 3
    assert "duplicate_frame" in _codes(run)


def test_unknown_ids_are_skipped_with_their_body() -> None:
    run = drive([frame("99", "secret"), frame("1", "kept"), frame("42:0", "x")])
    assert run.final == {"summary": "kept"}
    assert _codes(run).count("unknown_slot") == 2


def test_chatter_code_fences_and_blank_lines_around_frames() -> None:
    noisy = (
        "Sure! Here are the frames:\n```\n\n"
        + TEXT.replace("</2>\n", "</2>\n\nok\n")
        + "```\nDone."
    )
    run = drive([noisy])
    assert run.asm is not None and run.asm.outcome.ok
    assert run.final == FULL.final
    assert "noise" in _codes(run)


def test_nested_open_tag_closes_the_previous_frame() -> None:
    run = drive(["<1>\nsummary text\n<2>\n3\n</2>\n"])
    assert run.final == {"summary": "summary text", "priority": 3}
    assert "nested_open" in _codes(run)


def test_closing_tag_for_another_slot_closes_the_open_frame() -> None:
    run = drive(["<1>\nsummary text\n</2>\n<2>\n3\n</2>\n"])
    assert run.final == {"summary": "summary text", "priority": 3}
    assert "mismatched_close" in _codes(run)


def test_skipped_and_repeated_indexes() -> None:
    run = drive([frame("5:0", "a"), frame("5:2", "b"), frame("5:2", "c"), frame("5:1", "d")])
    assert run.final["tags"] == ["a", "b", "d"]
    codes = _codes(run)
    assert "index_skipped" in codes and "duplicate_frame" in codes
    assert "index_out_of_order" in codes


def test_object_array_items_group_by_index_in_any_order() -> None:
    run = drive(
        [
            frame("6:0", "Ada"),
            frame("6:1", "Bob"),
            frame("7:1", "2025-01-02"),
            frame("7:0", "2025-01-01"),
        ]
    )
    assert run.final["items"] == [
        {"owner": "Ada", "due": "2025-01-01"},
        {"owner": "Bob", "due": "2025-01-02"},
    ]


def test_missing_index_and_unexpected_index_are_tolerated() -> None:
    run = drive([frame("5", "a"), frame("5", "b"), frame("2:0", "3")])
    assert run.final == {"tags": ["a", "b"], "priority": 3}
    assert _codes(run).count("missing_index") == 2
    assert "unexpected_index" in _codes(run)


def test_too_many_items_are_dropped() -> None:
    run = drive([frame(f"5:{i}", f"t{i}") for i in range(8)])
    assert run.final["tags"] == [f"t{i}" for i in range(6)]
    assert _codes(run).count("too_many_items") == 2


def test_invalid_utf8_is_a_diagnostic_not_a_crash() -> None:
    data = frame("1", "caf").encode("utf-8").replace(b"caf", b"caf\xff\xfe")
    run = drive([data[:6], data[6:]])
    assert run.final["summary"] == "caf\ufffd\ufffd"
    assert "invalid_utf8" in _codes(run)


def test_frame_too_large_fails_that_slot_and_keeps_memory_bounded() -> None:
    limits = Limits(max_frame_chars=100)
    body = "y" * 10_000
    run = drive(
        [
            "<1>\n",
            *[body[i : i + 50] for i in range(0, len(body), 50)],
            "\n</1>\n",
            frame("2", "3"),
        ],
        limits=limits,
    )
    assert "summary" not in run.final
    assert run.final["priority"] == 3
    failed = [
        e for e in run.events if isinstance(e, SlotFailed) and e.error.code == "frame_too_large"
    ]
    assert len(failed) == 1


def test_total_limit_is_terminal_and_keeps_accepted_slots() -> None:
    limits = Limits(max_total_chars=60)
    run = drive([frame("2", "3"), frame("1", "z" * 200), frame("3", "negative")], limits=limits)
    errors = [e for e in run.events if isinstance(e, ErrorEvent)]
    assert len(errors) == 1 and errors[0].error.code == "limit_exceeded"
    assert run.final == {"priority": 3}


def test_endless_chatter_gives_up() -> None:
    limits = Limits(max_noise_chars=500)
    run = drive([frame("2", "3"), *["I am thinking about it...\n"] * 100], limits=limits)
    errors = [e for e in run.events if isinstance(e, ErrorEvent)]
    assert [e.error.code for e in errors] == ["no_frames"]
    assert run.final == {"priority": 3}


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300), st.lists(st.integers(0, 300), max_size=10))
def test_arbitrary_bytes_never_raise(data: bytes, cuts: list[int]) -> None:
    asm = Assembler(TRIAGE_PLAN)
    points = sorted({c for c in cuts if 0 < c < len(data)})
    last = 0
    for p in [*points, len(data)]:
        asm.feed(data[last:p])
        last = p
    asm.close()
    assert isinstance(asm.state, dict)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                "<1>",
                "</1>",
                "<2>",
                "</2>",
                "<5:0>",
                "</5:0>",
                "<99>",
                "\n",
                "\r\n",
                "x",
                "3",
                " ",
                "```",
                "é",
            ]
        ),
        max_size=60,
    )
)
def test_random_tag_soup_is_chunk_invariant(pieces: list[str]) -> None:
    text = "".join(pieces)
    whole = drive([text])
    ones = drive(list(text))
    assert ones.non_delta() == whole.non_delta()
    assert ones.deltas() == whole.deltas()
    assert ones.final == whole.final


def test_retry_asks_only_for_failed_slots_and_keeps_accepted_ones() -> None:
    asm = Assembler(TRIAGE_PLAN)
    first = render_triage(VALUE).replace("<2>\n4\n</2>", "<2>\nhigh\n</2>")
    asm.feed(first)
    asm.close()
    assert not asm.outcome.ok
    request = asm.retry_request()
    assert request is not None
    assert [(t.slot.id, t.index) for t in request.targets] == [(2, None)]
    assert request.targets[0].error.input == "high"
    assert request.accepted["summary"] == VALUE["summary"]
    _, events = asm.begin_retry(request)
    assert isinstance(events[0], Retry) and events[0].slots == ("priority",)
    second = frame("1", "changed!") + frame("2", "4")
    replay = asm.feed(second) + asm.close()
    assert "not_requested" in [e.code for e in replay if isinstance(e, Diagnostic)]
    assert asm.outcome.ok
    assert asm.state == VALUE


def test_retry_of_a_scalar_sequence_replaces_it_whole() -> None:
    asm = Assembler(TRIAGE_PLAN)
    cut = TEXT.index("<5:1>") + len("<5:1>\nün")
    asm.feed(TEXT[:cut])
    asm.close(complete=False)
    request = asm.retry_request()
    assert request is not None
    targets = {(t.slot.id, t.index) for t in request.targets}
    assert targets == {(5, None), (6, 0), (7, 0)}
    assert request.accepted["tags"] == ["export"]
    _, events = asm.begin_retry(request)
    assert {"op": "replace", "path": "/tags", "value": []} in events[0].patch
    asm.feed(
        frame("5:0", "alpha")
        + frame("5:1", "beta")
        + frame("6:0", "Ada")
        + frame("7:0", "2025-01-01")
    )
    asm.close()
    assert asm.outcome.ok, asm.outcome.errors
    assert asm.state["tags"] == ["alpha", "beta"]
    assert asm.state["summary"] == VALUE["summary"]


def test_empty_arrays_count_as_given_only_when_the_stream_completed() -> None:
    head = TEXT[: TEXT.index("<5:0>")]
    assert drive([head]).asm.outcome.ok  # type: ignore[union-attr]
    cut = drive([head], complete=False).asm
    assert cut is not None and not cut.outcome.ok
    assert sorted(e.location for e in cut.outcome.errors) == [
        "/items/0/due",
        "/items/0/owner",
        "/tags",
    ]
