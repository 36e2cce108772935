"""The assembler: chunk invariance, state invariants, validation and the event stream."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slotflight.assemble.assembler import Assembler
from slotflight.assemble.events import Done, SlotComplete, SlotDelta, SlotFailed
from tests.assembler_support import (
    STRING_POINTERS,
    SYNTAXES,
    TRIAGE_PLAN,
    drive,
    frame,
    frames,
    render_triage,
    split_at,
)

SAFE_TEXT = (
    st.lists(
        st.text(
            alphabet=st.characters(
                codec="utf-8",
                exclude_categories=("Cs", "Cc", "Zl", "Zp"),
                exclude_characters="<\r\x85",
            ),
            min_size=1,
            max_size=8,
        )
        | st.sampled_from(["é", "한", "😀", "€", " ", "\n", "<b>", "a<", "</x>", "x </1> y"]),
        min_size=1,
        max_size=6,
    )
    .map(lambda parts: "".join(parts).strip())
    .filter(bool)
)

DATES = st.dates().map(lambda d: d.isoformat())

INSTANCES = st.fixed_dictionaries(
    {
        "summary": SAFE_TEXT,
        "priority": st.integers(1, 5),
        "sentiment": st.sampled_from(["positive", "neutral", "negative"]),
        "urgent": st.booleans(),
        "tags": st.lists(SAFE_TEXT, max_size=6),
        "items": st.lists(st.fixed_dictionaries({"owner": SAFE_TEXT, "due": DATES}), max_size=4),
    },
    optional={
        "address": st.none() | st.fixed_dictionaries({"city": SAFE_TEXT}),
        "extra": st.dictionaries(SAFE_TEXT, st.integers(-5, 5), max_size=3),
    },
)


def _expected(value: dict[str, Any]) -> dict[str, Any]:
    out = dict(value)
    if out.get("address") is None:
        out.pop("address", None)
    return out


@st.composite
def chunkings(draw: st.DrawFn, text: str) -> list[str | bytes]:
    mode = draw(st.sampled_from(["whole", "chars", "bytes1", "random-str", "random-bytes"]))
    data = text.encode("utf-8")
    if mode == "whole":
        return [text]
    if mode == "chars":
        return list(text)
    if mode == "bytes1":
        return [data[i : i + 1] for i in range(len(data))]
    if mode == "random-str":
        cuts = draw(st.lists(st.integers(0, len(text)), max_size=30))
        return list(split_at(text, cuts))
    cuts = draw(st.lists(st.integers(0, len(data)), max_size=30))
    return list(split_at(data, cuts))


@pytest.mark.parametrize("syntax", SYNTAXES)
@settings(max_examples=1200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), value=INSTANCES, crlf=st.booleans())
def test_round_trip_is_chunk_invariant(
    syntax: str, data: st.DataObject, value: dict[str, Any], crlf: bool
) -> None:
    text = render_triage(value, syntax)
    if crlf:
        text = text.replace("\n", "\r\n")
    whole = drive([text], syntax=syntax)
    assert whole.asm is not None
    assert whole.asm.outcome.ok, whole.asm.outcome.errors
    assert whole.final == _expected(value)
    assert not whole.asm.diagnostics
    chunked = drive(data.draw(chunkings(text)), syntax=syntax)
    assert chunked.non_delta() == whole.non_delta()
    assert chunked.deltas() == whole.deltas()
    assert chunked.final == whole.final
    _check_event_invariants(chunked)


def _check_event_invariants(run: Any) -> None:
    """Strings grow as prefixes; settled kinds appear only complete; completed never change."""
    final = run.final
    completed: dict[str, Any] = {}
    for event in run.events:
        if isinstance(event, SlotDelta):
            assert any(event.path.startswith(p) for p in STRING_POINTERS)
            final_value = _resolve(final, event.path)
            assert final_value.startswith(event.value)
        if isinstance(event, SlotComplete):
            assert event.path not in completed
            completed[event.path] = event.value
    for state in run.states:
        for pointer, value in completed.items():
            if _has(state, pointer) and not any(pointer.startswith(p) for p in STRING_POINTERS):
                assert _resolve(state, pointer) == value
    for pointer, value in completed.items():
        assert _resolve(final, pointer) == value


def _resolve(doc: Any, pointer: str) -> Any:
    for part in pointer.split("/")[1:]:
        doc = doc[int(part)] if isinstance(doc, list) else doc[part]
    return doc


def _has(doc: Any, pointer: str) -> bool:
    try:
        _resolve(doc, pointer)
    except (KeyError, IndexError):
        return False
    return True


VALUE = {
    "summary": "Export job failed for large workspaces",
    "priority": 2,
    "sentiment": "negative",
    "urgent": True,
    "tags": ["export", "bug"],
    "items": [{"owner": "Ada", "due": "2025-02-01"}],
}


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_settled_kinds_appear_only_when_their_frame_closes(syntax: str) -> None:
    text = render_triage(VALUE, syntax)
    asm = Assembler(TRIAGE_PLAN, syntax=syntax)
    seen_priority_early = False
    for ch in text:
        asm.feed(ch)
        state = asm.state
        if "priority" in state:
            seen_priority_early = state["priority"] != 2
    asm.close()
    assert not seen_priority_early
    assert asm.state["priority"] == 2


@pytest.mark.parametrize("syntax", SYNTAXES)
@pytest.mark.parametrize(
    ("slot", "body", "code"),
    [
        ("2", "high", "int_parsing"),
        ("2", "9", "less_than_equal"),
        ("3", "angry", "enum"),
        ("4", "yes", "bool_parsing"),
        ("7:0", "next week", "date_from_datetime_parsing"),
        ("9", '{"a": "x"}', "json_schema"),
        ("9", "{not json", "json_invalid"),
    ],
)
def test_invalid_values_fail_their_slot_and_never_enter_the_state(
    syntax: str, slot: str, body: str, code: str
) -> None:
    owner = [("6:0", "Ada")] if slot.startswith("7") else []
    run = drive([frames([*owner, (slot, body)], syntax)], syntax=syntax)
    failed = [e for e in run.events if isinstance(e, SlotFailed) and e.error.code != "missing"]
    assert len(failed) == 1
    assert failed[0].error.code.startswith(code.split("_from")[0]), failed[0].error
    assert failed[0].error.input == body
    pointer = failed[0].path
    assert not _has(run.final, pointer)


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_enum_is_trimmed_and_case_folded(syntax: str) -> None:
    run = drive([frame("3", "  Negative ", syntax=syntax)], syntax=syntax)
    assert run.final["sentiment"] == "negative"


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_string_failure_removes_the_streamed_prefix(syntax: str) -> None:
    long = "x" * 401
    run = drive([frame("1", long, syntax=syntax)], syntax=syntax)
    assert "summary" not in run.final
    failed = [e for e in run.events if isinstance(e, SlotFailed)]
    assert failed[0].error.code == "string_too_long"
    assert {"op": "remove", "path": "/summary"} in failed[0].patch


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_done_event_carries_the_final_object(syntax: str) -> None:
    run = drive([render_triage(VALUE, syntax)], syntax=syntax)
    done = [e for e in run.events if isinstance(e, Done)]
    assert len(done) == 1
    assert done[0].value == VALUE
    assert run.asm is not None and run.asm.result == VALUE


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_missing_required_slots_are_reported_once_each(syntax: str) -> None:
    run = drive([frame("1", "only a summary", syntax=syntax)], syntax=syntax)
    assert run.asm is not None
    outcome = run.asm.outcome
    assert not outcome.ok
    missing = sorted(e.location for e in outcome.errors if e.code == "missing")
    assert missing == ["/priority", "/sentiment", "/urgent"]
    assert outcome.completed == {"/summary": "only a summary"}


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_optional_object_left_out_is_not_required_but_started_one_is(syntax: str) -> None:
    run = drive([render_triage(VALUE, syntax)], syntax=syntax)
    assert run.asm is not None and run.asm.outcome.ok
    assert "address" not in run.final


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_event_json_shape_matches_the_wire_contract(syntax: str) -> None:
    text = frame("1", "Export job failed", syntax=syntax)
    cut = text.index("Export job f") + len("Export job f")
    run = drive([text[:cut], text[cut:]], syntax=syntax)
    delta = next(e for e in run.events if isinstance(e, SlotDelta))
    data = delta.to_json(state={"summary": delta.value})
    assert data["type"] == "slot-delta"
    assert data["slot"] == "summary"
    assert data["path"] == "/summary"
    assert data["delta"] == "Export job f"
    assert "value" not in data and "patch" not in data  # O(delta): never the value so far
    assert delta.value == "Export job f"
    assert data["state"] == {"summary": "Export job f"}
    json.dumps(data)
    second = [e for e in run.events if isinstance(e, SlotDelta)][1]
    assert second.to_json()["delta"] == "ailed" and second.value == "Export job failed"
    assert second.patch == [{"op": "replace", "path": "/summary", "value": "Export job failed"}]


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_bytes_and_text_may_be_mixed(syntax: str) -> None:
    text = render_triage(VALUE, syntax)
    pieces: list[str | bytes] = [text[:10].encode("utf-8"), text[10:30], text[30:].encode("utf-8")]
    mixed = drive(pieces, syntax=syntax)
    assert mixed.final == drive([text], syntax=syntax).final == VALUE
