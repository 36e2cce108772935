"""Benchmark metrics on hand-made streams whose right answer is known."""

from __future__ import annotations

import datetime as dt
import itertools
import json
import math
import statistics
from typing import Any, Literal

import jsonpointer
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, Field

from slotflight.bench.metrics import (
    FieldTimes,
    JsonRun,
    Share,
    SlotRun,
    encode_sse,
    field_times,
    final_valid,
    json_field_times,
    measure,
    partial_view,
    percentile,
    slot_field_times,
    sse_bytes,
    stream_valid,
    unsafe_partial,
)
from slotflight.bench.models import SupportTriage


class Ticket(BaseModel):
    summary: str
    sentiment: Literal["positive", "neutral", "negative", "mixed"]
    priority: int = Field(ge=1, le=5)
    needs_human: bool
    tags: list[str] = Field(default_factory=list)


class Item(BaseModel):
    heading: str
    kind: Literal["intro", "body", "outro"]
    est_words: int


class Outline(BaseModel):
    title: str
    sections: list[Item]


def json_run(*chunks: str, step: float = 1.0) -> JsonRun:
    """Chunk i arrives at time ``(i + 1) * step``."""
    return JsonRun(tuple(((i + 1) * step, c) for i, c in enumerate(chunks)))


def slot_run(states: list[Any], **kwargs: Any) -> SlotRun:
    chunks = tuple((float(i + 1), f"<{i}>") for i in range(len(states)))
    return SlotRun(chunks, tuple(states), **kwargs)


TICKET = {
    "summary": 'Export fails: "}" in name',
    "sentiment": "negative",
    "priority": 4,
    "needs_human": True,
    "tags": ["export", "bug"],
}


# --------------------------------------------------------------------------- records


def test_runs_reject_decreasing_times_and_state_count_mismatch() -> None:
    with pytest.raises(ValueError, match="must not decrease"):
        JsonRun(((2.0, "{"), (1.0, "}")))
    with pytest.raises(TypeError, match="must be str"):
        JsonRun(((1.0, b"{"),))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="one state per chunk"):
        SlotRun(((1.0, "x"),), ({}, {}))


def test_json_run_text_joins_chunks() -> None:
    assert json_run('{"a"', ": 1}").text == '{"a": 1}'


def test_slot_run_final_state_prefers_explicit_final() -> None:
    assert slot_run([{}, {"a": 1}]).final_state == {"a": 1}
    assert slot_run([{}], final={"a": 2}).final_state == {"a": 2}
    assert slot_run([]).final_state is None


def test_share_value_is_none_without_chunks() -> None:
    assert Share(0, 0).value is None
    assert Share(1, 4).value == 0.25
    assert Share(3, 4).to_json() == {"count": 3, "total": 4, "share": 0.75}


# --------------------------------------------------------------------------- final_valid


def test_final_valid_accepts_a_valid_text_and_state() -> None:
    assert final_valid(Ticket, json.dumps(TICKET))
    assert final_valid(Ticket, TICKET)


@pytest.mark.parametrize(
    "change",
    [
        {"priority": "4"},  # lax mode would coerce the string
        {"priority": 4.0},  # lax mode would accept an integral float
        {"needs_human": "true"},
        {"sentiment": "neg"},
        {"priority": 9},
    ],
)
def test_final_valid_is_strict(change: dict[str, Any]) -> None:
    bad = {**TICKET, **change}
    assert not final_valid(Ticket, json.dumps(bad))
    assert not final_valid(Ticket, bad)


def test_final_valid_rejects_truncated_text_and_unserializable_state() -> None:
    assert not final_valid(Ticket, json.dumps(TICKET)[:-1])
    assert not final_valid(Ticket, "")
    assert not final_valid(Ticket, {**TICKET, "summary": dt.date(2024, 1, 1)})
    assert not final_valid(Ticket, {**TICKET, "priority": math.nan})


def test_final_valid_takes_date_strings_in_json() -> None:
    class Meeting(BaseModel):
        day: dt.date

    assert final_valid(Meeting, '{"day": "2024-03-15"}')
    assert final_valid(Meeting, {"day": "2024-03-15"})
    assert not final_valid(Meeting, {"day": "2024-03"})


# --------------------------------------------------------------------------- stream_valid


def test_stream_valid_json_counts_chunks_ending_on_valid_json() -> None:
    run = json_run('{"priority": 1', "2", "}", "\n")
    assert stream_valid(run) == Share(2, 4)


def test_stream_valid_json_empty_and_single_chunk() -> None:
    assert stream_valid(JsonRun(())) == Share(0, 0)
    assert stream_valid(json_run(json.dumps(TICKET))) == Share(1, 1)
    assert stream_valid(json_run("   ")) == Share(0, 1)


def test_stream_valid_slots_checks_each_state_for_real() -> None:
    states = [
        {},
        {"summary": "Exp"},
        {"due": dt.date(2024, 1, 1)},  # not JSON
        {"priority": math.inf},  # not JSON
        {"tags": ("a",)},  # does not round-trip
        {1: "x"},  # key becomes "1"
        {"tags": ["a"], "priority": 3},
    ]
    assert stream_valid(slot_run(states)) == Share(3, 7)
    assert stream_valid(slot_run([])) == Share(0, 0)


# --------------------------------------------------------------------------- partial view


def test_partial_view_mirrors_the_sdk() -> None:
    assert partial_view("") is None
    assert partial_view(" \n") is None
    assert partial_view("```json") is None
    assert partial_view('{"a": 1') == {"a": 1}
    assert partial_view('{"a": "neg') == {}
    assert partial_view('{"a": "neg', "trailing-strings") == {"a": "neg"}


# --------------------------------------------------------------------------- unsafe_partial


def test_unsafe_number_growing_digit_by_digit() -> None:
    run = json_run('{"priority": 1', "2", "3", '4, "summary": "x"}')
    # 1, 12 and 123 all differ from the final 1234; the last view is final.
    assert unsafe_partial(run, {"type": "object"}) == Share(3, 4)


def test_unsafe_enum_growing_letter_by_letter_depends_on_partial_mode() -> None:
    run = json_run('{"sentiment": "n', "eg", 'ative", "summary": "Exp', 'ort failed"}')
    # The SDK's mode never shows an unfinished string.
    assert unsafe_partial(run, Ticket) == Share(0, 4)
    # Keeping trailing strings shows "n" and "neg" for an enum field; the growing
    # free-text summary is not unsafe.
    assert unsafe_partial(run, Ticket, partial_mode="trailing-strings") == Share(2, 4)


def test_unsafe_ignores_free_text_but_not_enum_strings() -> None:
    schema = {
        "type": "object",
        "properties": {"summary": {"type": "string"}, "mood": {"enum": ["ok", "okay"]}},
    }
    run = json_run('{"summary": "Ex', 'port", "mood": "ok', 'ay"}')
    assert unsafe_partial(run, schema, partial_mode="trailing-strings") == Share(1, 3)


def test_unsafe_resolves_refs_anyof_and_array_items() -> None:
    schema = Outline.model_json_schema()
    run = json_run(
        '{"title": "T", "sections": [{"heading": "A", "kind": "in',
        'tro", "est_words": 4',
        '00}, {"heading": "B", "kind": "body", "est_words": 3',
        "50}]}",
    )
    # chunk 1: kind "in" (trailing mode); chunk 2: est_words 4; chunk 3: est_words 3.
    assert unsafe_partial(run, schema, partial_mode="trailing-strings") == Share(3, 4)
    assert unsafe_partial(run, schema) == Share(2, 4)

    nullable_ref = {
        "$defs": {"Mood": {"enum": ["calm", "calmer"]}},
        "type": "object",
        "properties": {"mood": {"anyOf": [{"$ref": "#/$defs/Mood"}, {"type": "null"}]}},
    }
    run = json_run('{"mood": "calm', 'er"}')
    assert unsafe_partial(run, nullable_ref, partial_mode="trailing-strings") == Share(1, 2)


def test_unsafe_keeps_booleans_apart_from_numbers() -> None:
    schema: dict[str, Any] = {"type": "object"}
    assert unsafe_partial(json_run('{"a": true', "}"), schema) == Share(0, 2)
    # ``True == 1`` in Python, but a boolean shown for a numeric field is wrong.
    states = [{"a": True}, {"a": 1}]
    assert unsafe_partial(slot_run(states), schema) == Share(1, 2)
    # 12 and 12.0 are the same number.
    assert unsafe_partial(slot_run([{"a": 12}, {"a": 12.0}]), schema) == Share(0, 2)


def test_unsafe_slots_value_replaced_or_removed() -> None:
    schema = Ticket.model_json_schema()
    states = [
        {"summary": "Exp"},
        {"summary": "Export", "priority": 2},  # later regenerated as 3
        {"summary": "Export", "priority": 3, "needs_human": False},
        {"summary": "Export", "priority": 3, "needs_human": True},
    ]
    assert unsafe_partial(slot_run(states), schema) == Share(2, 4)
    # A value shown and then withdrawn has no final value: unsafe.
    assert unsafe_partial(slot_run([{"priority": 2}, {}]), schema) == Share(1, 2)


def test_unsafe_against_truncated_final_uses_its_partial_view() -> None:
    run = json_run('{"priority": 1', '2, "needs_human": tr')
    # The final view is {"priority": 12}: the first chunk's 1 differs, the second holds.
    assert unsafe_partial(run, Ticket) == Share(1, 2)


def test_a_chunk_that_shows_no_object_yet_is_not_unsafe() -> None:
    """Whitespace before the object (or a slots state not begun) shows no value at all,
    so nothing that could differ from the final object."""
    text = json.dumps(TICKET)
    assert unsafe_partial(json_run("\n", " ", text), Ticket) == Share(0, 3)
    assert unsafe_partial(slot_run([None, {}, TICKET]), Ticket) == Share(0, 3)
    # A value shown and withdrawn is still unsafe, before or after such a chunk.
    assert unsafe_partial(slot_run([None, {"priority": 2}, TICKET]), Ticket) == Share(1, 3)


def test_unsafe_empty_run() -> None:
    assert unsafe_partial(JsonRun(()), Ticket) == Share(0, 0)
    assert unsafe_partial(slot_run([]), Ticket) == Share(0, 0)


# --------------------------------------------------------------------------- field times


def test_field_settles_at_next_structural_character() -> None:
    run = json_run('{"summary": "done"', ', "priority": 12', "  ", "}")
    # The string closed in chunk 1 but settles with the comma in chunk 2; the number
    # is not settled by whitespace, only by the closing brace in chunk 4.
    assert json_field_times(run) == {"/summary": 2.0, "/priority": 4.0}


def test_string_with_braces_quotes_and_escapes() -> None:
    text = '{"summary": "a } \\" ] , { \\\\", "priority": 3}'
    assert json.loads(text)["summary"] == 'a } " ] , { \\'
    for cut in range(1, len(text)):
        run = json_run(text[:cut], text[cut:])
        times = json_field_times(run)
        assert set(times) == {"/summary", "/priority"}
        comma = text.index('", "priority"') + 1
        assert times["/summary"] == (1.0 if cut > comma else 2.0)
        assert times["/priority"] == 2.0


def test_unicode_split_across_chunks() -> None:
    run = json_run('{"caf\\u00', 'e9": "Jos', 'é ☕", "prä', 'is": 5', "}")
    assert json_field_times(run) == {"/café": 3.0, "/präis": 5.0}
    assert stream_valid(run) == Share(1, 5)
    assert partial_view(run.text) == {"café": "José ☕", "präis": 5}


def test_nested_arrays_of_objects_and_pointer_escapes() -> None:
    doc = {
        "title": "T",
        "sections": [
            {"heading": "A", "est_words": 400},
            {"heading": "B", "est_words": 350},
        ],
        "tags": ["x", "y"],
        "empty": [],
        "none": {},
        "dimensions": {"width_cm": 1.5, "depth": None},
        "a/b": True,
        "m~n": False,
    }
    run = json_run(*json.dumps(doc))  # one character per chunk
    times = json_field_times(run)
    assert set(times) == {
        "/title",
        "/sections/0/heading",
        "/sections/0/est_words",
        "/sections/1/heading",
        "/sections/1/est_words",
        "/tags/0",
        "/tags/1",
        "/dimensions/width_cm",
        "/dimensions/depth",
        "/a~1b",
        "/m~0n",
    }
    assert times["/sections/1/heading"] < times["/sections/1/est_words"] < times["/tags/0"]


def test_truncated_and_malformed_streams() -> None:
    assert json_field_times(json_run('{"a": 1, "b": 2')) == {"/a": 1.0}
    assert json_field_times(json_run('```json\n{"a": 1}')) == {}
    assert json_field_times(json_run('{"a": 1 "b": 2}')) == {}
    assert json_field_times(json_run('{"a": [1}')) == {}
    # Trailing text after the object does not undo what settled.
    assert json_field_times(json_run('{"a": 1}', " trailing")) == {"/a": 1.0}


def test_top_level_scalars_and_arrays() -> None:
    assert json_field_times(json_run('"abc", 1')) == {}
    assert json_field_times(json_run("12 ", "}")) == {}
    assert json_field_times(json_run("[1, ", '"a"]')) == {"/0": 1.0, "/1": 2.0}


def test_empty_stream_has_no_fields() -> None:
    times = field_times(JsonRun(()))
    assert times.per_field == {}
    assert (times.first, times.all, times.p50, times.p95) == (None, None, None, None)


def test_single_chunk_settles_everything_at_once() -> None:
    times = field_times(json_run(json.dumps(TICKET), step=0.5))
    assert set(times.per_field) == {
        "/summary",
        "/sentiment",
        "/priority",
        "/needs_human",
        "/tags/0",
        "/tags/1",
    }
    assert times.first == times.all == times.p50 == times.p95 == 0.5


def test_slot_field_times_summary() -> None:
    slot_times = {"/summary": 0.4, "/priority": 0.9, "/tags/0": 1.3, "/tags/1": 2.0}
    run = slot_run([{}, {}], slot_times=slot_times)
    assert slot_field_times(run) == slot_times
    times = field_times(run)
    assert times.first == 0.4
    assert times.all == 2.0
    assert times.p50 == pytest.approx(1.1)
    assert times.p95 == pytest.approx(1.3 + 0.7 * 0.85)
    assert times.to_json()["per_field"] == slot_times


JSON_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(10**12), 10**12)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=20,
)


def leaf_pointers(value: Any, parts: tuple[str, ...] = ()) -> set[str]:
    if isinstance(value, dict):
        return {p for k, v in value.items() for p in leaf_pointers(v, (*parts, k))}
    if isinstance(value, list):
        return {p for i, v in enumerate(value) for p in leaf_pointers(v, (*parts, str(i)))}
    return {jsonpointer.JsonPointer.from_parts(list(parts)).path}


@given(
    doc=st.dictionaries(st.text(max_size=6), JSON_VALUES, max_size=5),
    cuts=st.lists(st.integers(0, 400), max_size=12),
    ensure_ascii=st.booleans(),
    indent=st.sampled_from([None, 2]),
)
def test_field_times_do_not_depend_on_chunking(
    doc: dict[str, Any], cuts: list[int], ensure_ascii: bool, indent: int | None
) -> None:
    text = json.dumps(doc, ensure_ascii=ensure_ascii, indent=indent)
    expected = leaf_pointers(doc)
    assert set(json_field_times(json_run(text))) == expected
    bounds = sorted({0, len(text), *(c for c in cuts if c < len(text))})
    pieces = [text[a:b] for a, b in itertools.pairwise(bounds)]
    assert set(json_field_times(json_run(*pieces))) == expected
    # With one character per chunk at time i, every field settles on a , } or ].
    per_char = JsonRun(tuple((float(i), ch) for i, ch in enumerate(text)))
    for t in json_field_times(per_char).values():
        assert text[int(t)] in ",}]"


# --------------------------------------------------------------------------- percentile


def test_percentile_linear_interpolation() -> None:
    assert percentile([4, 1, 3, 2], 50) == 2.5
    assert percentile([1, 2, 3, 4], 95) == pytest.approx(3.85)
    assert percentile([1, 2, 3, 4], 0) == 1
    assert percentile([1, 2, 3, 4], 100) == 4
    assert percentile([7.5], 95) == 7.5


@given(st.lists(st.floats(-1e6, 1e6), min_size=2, max_size=30), st.integers(1, 99))
def test_percentile_matches_statistics_inclusive(values: list[float], q: int) -> None:
    expected = statistics.quantiles(values, n=100, method="inclusive")[q - 1]
    assert percentile(values, q) == pytest.approx(expected, abs=1e-6)


def test_percentile_rejects_bad_input() -> None:
    with pytest.raises(ValueError):
        percentile([], 50)
    with pytest.raises(ValueError):
        percentile([1.0], 101)
    with pytest.raises(ValueError):
        percentile([1.0], -1)


# --------------------------------------------------------------------------- SSE bytes

EVENT = {
    "type": "slot-delta",
    "slot": "summary",
    "path": "/summary",
    "delta": "é",
    "state": {"summary": "Café"},
    "patch": [{"op": "replace", "path": "/summary", "value": "Café"}],
}


def test_encode_sse_full_and_patch() -> None:
    full = encode_sse(EVENT, 3, "full")
    assert (
        full
        == (
            "event: slot-delta\nid: 3\ndata: "
            '{"type":"slot-delta","slot":"summary","path":"/summary","delta":"é",'
            '"state":{"summary":"Café"}}\n\n'
        ).encode()
    )
    patch = encode_sse(EVENT, 3, "patch")
    assert patch.startswith(b"event: slot-delta\nid: 3\ndata: ")
    data = json.loads(patch.decode().split("data: ", 1)[1])
    assert "state" not in data
    assert data["patch"] == EVENT["patch"]


def test_sse_bytes_counts_utf8_bytes_with_ids() -> None:
    events = [{"type": "slot-start", "slot": "s"}, {"type": "done", "value": "€"}]
    first = b'event: slot-start\nid: 0\ndata: {"type":"slot-start","slot":"s"}\n\n'
    second = 'event: done\nid: 1\ndata: {"type":"done","value":"€"}\n\n'.encode()
    assert sse_bytes(events, "full") == len(first) + len(second)
    assert sse_bytes(events, "patch") == len(first) + len(second)
    assert sse_bytes([], "full") == 0
    assert sse_bytes([EVENT], "full") == len(encode_sse(EVENT, 0, "full"))
    assert sse_bytes([EVENT], "patch") != sse_bytes([EVENT], "full")


def test_encode_sse_rejects_bad_events() -> None:
    with pytest.raises(ValueError):
        encode_sse({"slot": "x"}, 0, "full")
    with pytest.raises(ValueError):
        encode_sse({"type": "a\nb"}, 0, "full")
    with pytest.raises(ValueError):
        encode_sse({"type": "done"}, 0, "none")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- measure


def test_measure_json_run() -> None:
    text = json.dumps(
        {
            "summary": "Invoice charged twice in March.",
            "sentiment": "negative",
            "priority": 4,
            "needs_human": True,
            "product_area": "billing",
            "tags": ["refund", "billing"],
            "action_items": [{"description": "Refund the duplicate charge", "owner": "billing"}],
        }
    )
    pieces = [text[i : i + 7] for i in range(0, len(text), 7)]
    metrics = measure(json_run(*pieces), SupportTriage)
    assert metrics.mode == "json_schema"
    assert metrics.final_valid
    assert metrics.stream_valid == Share(1, len(pieces))
    assert metrics.chunks == len(pieces)
    assert "/action_items/0/owner" in metrics.fields.per_field
    assert metrics.fields.all == float(len(pieces))
    assert metrics.to_json()["unsafe_partial"]["total"] == len(pieces)


def test_measure_slot_run() -> None:
    final = {"summary": "x", "sentiment": "mixed", "priority": 2, "needs_human": False}
    states = [{"summary": "x"}, {"summary": "x", "sentiment": "mixed"}, final]
    run = slot_run(states, slot_times={"/summary": 1.0, "/sentiment": 2.0, "/priority": 3.0})
    metrics = measure(run, Ticket)
    assert metrics.mode == "slots"
    assert metrics.final_valid
    assert metrics.stream_valid == Share(3, 3)
    assert metrics.unsafe_partial == Share(0, 3)
    assert metrics.fields == FieldTimes({"/summary": 1.0, "/sentiment": 2.0, "/priority": 3.0})
    assert not measure(slot_run([]), Ticket).final_valid
