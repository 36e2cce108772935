"""Slot checks end to end: the real ``openai`` client against a scripted model, and the
gateway's SSE stream. A value that looks wrong is asked for again; what the user gets
when the model cannot do better is settled by the options."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from httpx_sse import aconnect_sse
from pydantic import BaseModel, Field

from slotflight import OutputValidationError, SlotRejected
from slotflight.assemble.events import Diagnostic, Event, Retry, SlotComplete
from slotflight.client.async_stream import astream
from slotflight.client.sync_stream import stream
from slotflight.testing import AppServer, Reply, ScriptedServer
from slotflight.web import create_app
from tests.client_support import (
    MESSAGES,
    PLAN,
    TRIAGE,
    Plan,
    Triage,
    async_client,
    edited,
    last_message,
    replace_value,
    sync_client,
    written,
)
from tests.web_support import TRIAGE_SCHEMA, TRIAGE_VALUE, triage_frames


def run(
    replies: list[str],
    model: type[Any] = Triage,
    messages: list[dict[str, Any]] = MESSAGES,
    **options: Any,
) -> dict[str, Any]:
    """Stream ``model`` against ``replies``; the events, result or error, and requests."""
    out: dict[str, Any] = {"result": None, "error": None}
    with ScriptedServer([Reply(r, chunks=4) for r in replies]) as server:
        with stream(
            sync_client(server), model="m", messages=messages, output=model, **options
        ) as s:
            events: list[Event] = []
            try:
                events.extend(s)
                out["result"] = s.final()
            except OutputValidationError as exc:
                out["error"] = exc
            out["flagged"] = s.flagged()
        out["bodies"] = [r.body for r in server.requests]
    out["events"] = events
    return out


def of(events: list[Event], kind: type[Any]) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


def test_junk_first_then_a_good_value() -> None:
    got = run([replace_value(TRIAGE, 1, "[1]"), written(Triage, (1, TRIAGE.summary))])
    assert got["result"] == TRIAGE
    [rejected] = of(got["events"], SlotRejected)
    assert (rejected.slot, rejected.code, rejected.action) == ("summary", "placeholder", "retry")
    assert rejected.value == "[1]"
    [retry] = of(got["events"], Retry)
    assert [r.code for r in retry.reasons] == ["placeholder"]
    follow_up = last_message(got["bodies"][1])
    assert rejected.reason in follow_up and "[1]" in follow_up
    assert "export" in follow_up  # the accepted values, as context


async def test_junk_first_then_a_good_value_async() -> None:
    replies = [replace_value(TRIAGE, 1, '"Export fails"'), written(Triage, (1, TRIAGE.summary))]
    async with ScriptedServer([Reply(r, chunks=3) for r in replies]) as server:
        client = async_client(server)
        async with astream(client, model="m", messages=MESSAGES, output=Triage) as s:
            events = [e async for e in s]
            result = await s.final()
    assert result == TRIAGE
    assert [(e.code, e.action) for e in of(events, SlotRejected)] == [("quoted", "retry")]


def test_a_retry_is_held_to_the_same_checks() -> None:
    """The retry's value fails its checks again: with ``error`` it is asked for a third
    time; with ``accept`` (the default) it is kept, flagged, and no third request is
    made."""
    replies = [
        replace_value(TRIAGE, 1, "1"),
        written(Triage, (1, "[Summary]")),
        written(Triage, (1, TRIAGE.summary)),
    ]
    got = run(replies, on_check_failure="error")
    assert got["result"] == TRIAGE
    assert [e.code for e in of(got["events"], SlotRejected)] == ["placeholder", "placeholder"]
    assert len(got["bodies"]) == 3
    got = run(replies)
    assert got["result"] == TRIAGE.model_copy(update={"summary": "[Summary]"})
    assert [e.action for e in of(got["events"], SlotRejected)] == ["retry"]
    assert [e.attempt for e in of(got["events"], SlotComplete) if e.flagged] == [2]
    assert list(got["flagged"]) == ["/summary"]
    assert len(got["bodies"]) == 2


class Crew(BaseModel):
    names: list[str] = Field(min_length=2, max_length=6)


def test_a_list_a_repeat_left_short_is_asked_for_with_the_repeat_quoted() -> None:
    """A list stopped at a repeated item under its ``minItems``: the follow-up asks for
    the whole list again, quoting the item refused and the reason."""
    replies = [
        written(Crew, (1, "Ada Lovelace", 0), (1, "Ada Lovelace", 1)),
        written(Crew, (1, "Ada Lovelace", 0), (1, "Lin Wu", 1)),
    ]
    messages = [{"role": "user", "content": "Ada Lovelace and Lin Wu met on Monday."}]
    got = run(replies, model=Crew, messages=messages)
    assert got["result"] == Crew(names=["Ada Lovelace", "Lin Wu"])
    follow_up = last_message(got["bodies"][1])
    assert '("Ada Lovelace"): The value repeats an earlier item of names.' in follow_up
    assert "no frame arrived" not in follow_up


def test_the_same_value_again_is_accepted_with_a_diagnostic_when_the_input_holds_it() -> None:
    repeated = PLAN.model_copy(update={"title": PLAN.notes})
    replies = [edited(repeated), written(Plan, (4, PLAN.notes))]
    messages = [{"role": "user", "content": f"Plan and notes: {PLAN.notes}"}]
    got = run(replies, model=Plan, messages=messages)
    assert got["result"] == repeated
    assert [e.code for e in of(got["events"], SlotRejected)] == ["repeat"]
    assert "check_confirmed" in [d.code for d in of(got["events"], Diagnostic)]
    assert got["flagged"] == {}
    # The input does not say it: the value written again is settled then, kept and
    # flagged, without a third request.
    got = run(replies, model=Plan)
    assert got["result"] == repeated
    assert list(got["flagged"]) == ["/notes"]
    assert "check_confirmed" not in [d.code for d in of(got["events"], Diagnostic)]
    assert len(got["bodies"]) == 2


def test_an_optional_field_that_still_fails_is_left_out() -> None:
    junk = PLAN.model_copy(update={"notes": "[1]"})
    got = run(
        [edited(junk), written(Plan, (4, "[2]"))],
        model=Plan,
        max_attempts=2,
        on_check_failure="error",
    )
    assert got["result"] == PLAN.model_copy(update={"notes": None})
    actions = [e.action for e in of(got["events"], SlotRejected)]
    assert actions == ["retry", "leave_out"]
    assert "check_left_out" in [d.code for d in of(got["events"], Diagnostic)]


def test_a_required_field_that_still_fails_ends_with_a_typed_error() -> None:
    got = run(
        [replace_value(TRIAGE, 1, "1"), written(Triage, (1, "2"))],
        max_attempts=2,
        on_check_failure="error",
    )
    error = got["error"]
    assert isinstance(error, OutputValidationError)
    assert [e.slot for e in error.errors] == ["summary"]
    assert "values tried: '1', '2'" in error.errors[0].message
    assert error.partial["priority"] == TRIAGE.priority  # nothing accepted is lost


def test_accept_flags_the_value() -> None:
    got = run([replace_value(TRIAGE, 1, "1")], max_attempts=1)  # accept: the default
    assert got["result"] == TRIAGE.model_copy(update={"summary": "1"})
    assert list(got["flagged"]) == ["/summary"]
    assert got["flagged"]["/summary"].code == "placeholder"
    [complete] = [e for e in of(got["events"], SlotComplete) if e.slot == "summary"]
    assert complete.to_json()["status"] == "flagged"


def test_checks_none_lets_the_value_through() -> None:
    got = run([replace_value(TRIAGE, 1, "1")], checks="none")
    assert got["result"] == TRIAGE.model_copy(update={"summary": "1"})
    assert of(got["events"], SlotRejected) == []


def test_a_bad_checks_option_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown check"):
        run([], checks=["nope"])
    with pytest.raises(ValueError, match="on_check_failure"):
        run([], on_check_failure="ignore")


async def test_the_gateway_streams_slot_rejected_and_flagged() -> None:
    junk = {**TRIAGE_VALUE, "summary": "[1]"}
    other = {**TRIAGE_VALUE, "summary": "[2]"}
    body: dict[str, Any] = {
        "model": "scripted",
        "messages": [{"role": "user", "content": "The export fails. Please help."}],
        "schema": TRIAGE_SCHEMA,
        "options": {"max_attempts": 2, "coalesce_ms": 0, "on_check_failure": "error"},
    }
    async with ScriptedServer() as upstream:
        upstream.add(Reply(triage_frames(junk), chunks=5), Reply(triage_frames(other), chunks=5))
        upstream.add(Reply(triage_frames(junk), chunks=5))
        accept = {"max_attempts": 1, "coalesce_ms": 0}  # on_check_failure: accept, the default
        async with (
            AppServer(create_app(upstream.base_url)) as app,
            httpx.AsyncClient(base_url=app.url, timeout=30) as client,
        ):
            async with aconnect_sse(client, "POST", "/v1/slot-streams", json=body) as src:
                first = [json.loads(m.data) async for m in src.aiter_sse()]
            body = {**body, "options": accept}
            async with aconnect_sse(client, "POST", "/v1/slot-streams", json=body) as src:
                second = [json.loads(m.data) async for m in src.aiter_sse()]
    rejected = [m for m in first if m["type"] == "slot-rejected"]
    assert [(m["path"], m["code"], m["action"], m["value"]) for m in rejected] == [
        ("/summary", "placeholder", "retry", "[1]"),
        ("/summary", "placeholder", "fail", "[2]"),
    ]
    assert all(m["reason"] and m["error"]["code"] == "placeholder" for m in rejected)
    retry = next(m for m in first if m["type"] == "retry")
    assert retry["reasons"][0]["code"] == "placeholder"
    assert first[-1]["type"] == "error"
    flagged = [m for m in second if m["type"] == "slot-complete" and m.get("status") == "flagged"]
    assert [(m["path"], m["code"]) for m in flagged] == [("/summary", "placeholder")]
    assert second[-1]["type"] == "done" and second[-1]["state"]["summary"] == "[1]"
