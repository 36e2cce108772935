"""Regeneration over real HTTP: a failed, missing or dropped slot is asked for again alone."""

from __future__ import annotations

import json

import openai
import pytest

from slotflight._errors import OutputValidationError, UpstreamDisconnected
from slotflight.assemble.events import Diagnostic, ErrorEvent, Event, Retry
from slotflight.client.async_stream import astream
from slotflight.client.sync_stream import stream
from slotflight.syntax import DEFAULT_SYNTAX
from slotflight.testing import Reply, ScriptedServer
from tests.client_support import (
    MESSAGES,
    PLAN,
    TRIAGE,
    Plan,
    Triage,
    asked_for,
    async_client,
    bytes_before,
    frames,
    last_message,
    plan_of,
    replace_value,
    sync_client,
    without_frame,
    written,
)


def test_one_pass_gives_events_in_order_and_the_model() -> None:
    with ScriptedServer([Reply(frames(TRIAGE), chunks=5)]) as server:
        with stream(sync_client(server), model="m", messages=MESSAGES, output=Triage) as s:
            events = list(s)
            result = s.final()
        assert len(server.requests) == 1
    assert result == TRIAGE
    kinds = [e.type for e in events if e.type != "slot-delta"]
    assert kinds == ["slot-start", "slot-complete"] * 5 + ["done"]
    completed = [
        (e.to_json()["path"], e.to_json()["value"]) for e in events if e.type == "slot-complete"
    ]
    assert completed == [
        ("/summary", TRIAGE.summary),
        ("/priority", TRIAGE.priority),
        ("/sentiment", TRIAGE.sentiment),
        ("/tags/0", "export"),
        ("/tags/1", "bug"),
    ]
    assert s.state == TRIAGE.model_dump(mode="json")
    assert s.completed()["/priority"] == 4


async def test_one_pass_async() -> None:
    async with ScriptedServer([Reply(frames(PLAN), chunks=3)]) as server:
        client = async_client(server)
        async with astream(client, model="m", messages=MESSAGES, output=Plan) as s:
            types = [e.type async for e in s]
            result = await s.final()
    assert result == PLAN
    assert types[-1] == "done"
    assert types.count("slot-complete") == 6


def test_a_failed_slot_is_regenerated_alone_with_reason_and_context() -> None:
    first = replace_value(TRIAGE, 2, "9")
    # The follow-up also writes a new summary: it was not asked for and must be ignored.
    second = written(Triage, (1, "A different summary"), (2, "5"))
    with ScriptedServer([Reply(first, chunks=4), Reply(second, chunks=4)]) as server:
        with stream(sync_client(server), model="m", messages=MESSAGES, output=Triage) as s:
            events = list(s)
            result = s.final()
        bodies = [r.body for r in server.requests]
    assert len(bodies) == 2
    retry_text = last_message(bodies[1])
    # the follow-up joins the caller's user message, after a blank line
    assert bodies[1]["messages"][:-1] == bodies[0]["messages"][:-1]
    assert bodies[1]["messages"][-1]["role"] == "user"
    assert retry_text.startswith(last_message(bodies[0]) + "\n\n")
    assert asked_for(plan_of(Triage), retry_text) == {(2, None)}
    assert "greater than the maximum of 5" in retry_text
    assert '"9"' in retry_text  # the rejected text
    accepted = {k: v for k, v in TRIAGE.model_dump(mode="json").items() if k != "priority"}
    assert json.dumps(accepted, separators=(",", ":")) in retry_text
    retries = [e for e in events if isinstance(e, Retry)]
    assert [(r.attempt, r.slots) for r in retries] == [(2, ("priority",))]
    assert any(isinstance(e, Diagnostic) and e.code == "not_requested" for e in events)
    assert result == TRIAGE.model_copy(update={"priority": 5})


def test_a_scalar_array_item_failure_asks_for_the_whole_sequence() -> None:
    first = replace_value(TRIAGE, 4, "much-too-long-tag", index=1)
    second = written(Triage, (4, "export", 0), (4, "large-files", 1), (4, "bug", 2))
    with ScriptedServer([Reply(first), Reply(second)]) as server:
        with stream(sync_client(server), model="m", messages=MESSAGES, output=Triage) as s:
            events = list(s)
            result = s.final()
        retry_text = last_message(server.request(1).body)
    assert asked_for(plan_of(Triage), retry_text) == {(4, None)}
    whole_list = {"v3": "every item of the list", "v4": "the whole list: its name alone on a line"}
    assert whole_list[DEFAULT_SYNTAX] in retry_text
    assert "at most 12 characters" in retry_text
    retry = next(e for e in events if isinstance(e, Retry))
    assert retry.slots == ("tags[]",)
    # the accepted item 0 was replaced along with the rest of the sequence
    assert result.tags == ["export", "large-files", "bug"]
    assert result.summary == TRIAGE.summary


def test_a_missing_required_slot_is_asked_for() -> None:
    first = without_frame(TRIAGE, 3)
    with ScriptedServer([Reply(first), Reply(written(Triage, (3, "neutral")))]) as server:
        with stream(sync_client(server), model="m", messages=MESSAGES, output=Triage) as s:
            result = s.final()
        retry_text = last_message(server.request(1).body)
    assert asked_for(plan_of(Triage), retry_text) == {(3, None)}
    assert "no frame arrived" in retry_text
    assert result == TRIAGE.model_copy(update={"sentiment": "neutral"})


def test_an_object_array_field_is_asked_for_at_its_index() -> None:
    first = replace_value(PLAN, 3, "next week", index=1)
    with ScriptedServer([Reply(first), Reply(written(Plan, (3, "2025-02-08", 1)))]) as server:
        with stream(sync_client(server), model="m", messages=MESSAGES, output=Plan) as s:
            result = s.final()
        retry_text = last_message(server.request(1).body)
    assert asked_for(plan_of(Plan), retry_text) == {(3, 1)}
    assert '"next week"' in retry_text
    assert result.actions[1].due == "2025-02-08"
    assert result.actions[0] == PLAN.actions[0]


def test_a_drop_mid_stream_keeps_completed_slots_and_asks_for_the_rest() -> None:
    text = frames(TRIAGE)
    cut = bytes_before(TRIAGE, 3, inside=True)  # inside the sentiment frame
    rest = written(Triage, (3, "negative"), (4, "export", 0))
    with ScriptedServer([Reply(text, chunks=3, drop_after_bytes=cut), Reply(rest)]) as server:
        with stream(sync_client(server), model="m", messages=MESSAGES, output=Triage) as s:
            events = list(s)
            result = s.final()
        first, second = server.requests
    assert first.dropped
    retry_text = last_message(second.body)
    # the truncated slot and the optional list not reached yet; not the completed ones
    assert asked_for(plan_of(Triage), retry_text) == {(3, None), (4, None)}
    assert "before this frame was closed" in retry_text
    assert "write it only if it has a value" in retry_text
    failed = [e.to_json() for e in events if e.type == "slot-failed"]
    assert [f["error"]["code"] for f in failed] == ["truncated"]
    assert result == TRIAGE.model_copy(update={"tags": ["export"]})
    completions = [e.to_json() for e in events if e.type == "slot-complete"]
    # summary and priority came in attempt 1 only; sentiment and tags in attempt 2
    assert [(c["slot"], c["attempt"]) for c in completions] == [
        ("summary", 1),
        ("priority", 1),
        ("sentiment", 2),
        ("tags[0]", 2),
    ]


def test_a_drop_with_no_attempt_left_raises_disconnected() -> None:
    text = frames(TRIAGE)
    cut = bytes_before(TRIAGE, 2, inside=True)  # inside the priority frame
    with ScriptedServer([Reply(text, drop_after_bytes=cut)]) as server:
        client = sync_client(server)
        with stream(client, model="m", messages=MESSAGES, output=Triage, max_attempts=1) as s:
            seen: list[Event] = []
            with pytest.raises(UpstreamDisconnected) as info:
                for event in s:
                    seen.append(event)
            assert s.completed() == {"/summary": TRIAGE.summary}
    assert isinstance(info.value.__cause__, openai.APIConnectionError)
    assert isinstance(seen[-1], ErrorEvent)
    assert seen[-1].error.code == "disconnected"


def test_attempts_exhausted_raise_output_validation_error() -> None:
    bad = replace_value(TRIAGE, 2, "high")
    replies = [Reply(bad), Reply(written(Triage, (2, "urgent"))), Reply(written(Triage, (2, "10")))]
    with ScriptedServer(replies) as server:
        with stream(sync_client(server), model="m", messages=MESSAGES, output=Triage) as s:
            seen: list[Event] = []
            with pytest.raises(OutputValidationError) as info:
                for event in s:
                    seen.append(event)
            with pytest.raises(OutputValidationError) as again:
                s.final()
        assert len(server.requests) == 3
    error = info.value
    assert again.value is error
    assert error.attempts == 3
    assert error.partial == {
        k: v for k, v in TRIAGE.model_dump(mode="json").items() if k != "priority"
    }
    assert [(e.location, e.code) for e in error.errors] == [("/priority", "less_than_equal")]
    assert error.errors[0].input == "10"
    last = seen[-1]
    assert isinstance(last, ErrorEvent)
    assert last.error.code == "output_invalid"
    assert [e.location for e in last.errors] == ["/priority"]
    assert [e.attempt for e in seen if isinstance(e, Retry)] == [2, 3]


async def test_attempts_exhausted_async() -> None:
    bad = replace_value(TRIAGE, 3, "furious")
    async with ScriptedServer([Reply(bad), Reply(written(Triage, (3, "angry")))]) as server:
        client = async_client(server)
        async with astream(
            client, model="m", messages=MESSAGES, output=Triage, max_attempts=2
        ) as s:
            with pytest.raises(OutputValidationError) as info:
                await s.final()
    assert [e.location for e in info.value.errors] == ["/sentiment"]
    assert info.value.partial["summary"] == TRIAGE.summary


def test_max_attempts_one_never_sends_a_follow_up() -> None:
    bad = replace_value(TRIAGE, 2, "0")
    with ScriptedServer([Reply(bad), Reply(frames(TRIAGE))]) as server:
        client = sync_client(server)
        s = stream(client, model="m", messages=MESSAGES, output=Triage, max_attempts=1)
        with s, pytest.raises(OutputValidationError):
            s.final()
        assert len(server.requests) == 1
        assert server.remaining == 1


def test_a_drop_after_every_frame_arrived_loses_nothing() -> None:
    text = frames(TRIAGE)
    with ScriptedServer([Reply(text, chunks=6, drop_after_bytes=len(text.encode()))]) as server:
        with stream(sync_client(server), model="m", messages=MESSAGES, output=Triage) as s:
            types = [e.type for e in s]
            result = s.final()
        assert server.request(0).dropped
        assert len(server.requests) == 1
    assert result == TRIAGE
    assert types[-1] == "done"
    assert "retry" not in types


def test_a_value_only_a_drop_ended_is_asked_for_again() -> None:
    """The stream dropped right after the priority's last character: 4 might have been
    45, so it is not accepted but asked for again."""
    text = frames(TRIAGE)
    cut = bytes_before(TRIAGE, 3) - 1  # the priority frame without its last newline
    rest = written(Triage, (2, "4"), (3, "negative"), (4, "export", 0), (4, "bug", 1))
    with ScriptedServer([Reply(text, drop_after_bytes=cut), Reply(rest)]) as server:
        with stream(sync_client(server), model="m", messages=MESSAGES, output=Triage) as s:
            events = list(s)
            result = s.final()
        retry_text = last_message(server.request(1).body)
    assert (2, None) in asked_for(plan_of(Triage), retry_text)
    failed = [e.to_json() for e in events if e.type == "slot-failed"]
    assert {f["path"]: f["error"]["code"] for f in failed} == {
        "/priority": "truncated",
        "/sentiment": "missing",
    }
    assert result == TRIAGE
