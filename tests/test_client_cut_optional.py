"""A pass cut short after every required value still asks for the optional rest.

A dropped connection or the token limit can cut a pass after the last required slot:
the object is valid, but the optional slots after the last one the model started, and
the rest of a scalar list it was writing, were never written. With attempts left the
follow-up asks for them; with none left (or when the follow-up fails) the stream ends
with the object it has. A pass that ended on its own sends no follow-up.
"""

from __future__ import annotations

import json
from types import SimpleNamespace as NS
from typing import Any

import httpx2
import jsonpatch
import openai
import pytest
from pydantic import BaseModel

import slotflight
from slotflight.assemble.events import Diagnostic, Event, Retry
from slotflight.client.async_stream import astream
from slotflight.client.core import new_core
from slotflight.client.flow import END, Feed, Read, Release, Request, pass_flow
from slotflight.client.request import StreamOptions
from slotflight.client.sync_stream import stream
from slotflight.plan.instance import walk_instance
from slotflight.syntax import SYNTAXES, get_syntax
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
    sync_client,
    written,
)

#: Every required frame of TRIAGE, then the cut (before the optional tags).
BEFORE_TAGS = bytes_before(TRIAGE, 4, 0)
TAGS = written(Triage, (4, "export", 0), (4, "bug", 1))


def _first(finish: str) -> Reply:
    """TRIAGE cut before its tags: by a drop, or by the token limit."""
    text = frames(TRIAGE)
    if finish == "drop":
        return Reply(text, drop_after_bytes=BEFORE_TAGS)
    return Reply(text.encode()[:BEFORE_TAGS].decode(), finish_reason="length")


@pytest.mark.parametrize("finish", ["drop", "length"])
def test_a_cut_after_the_required_slots_asks_for_the_optional_rest(finish: str) -> None:
    with ScriptedServer([_first(finish), Reply(TAGS)]) as server:
        with stream(sync_client(server), model="m", messages=MESSAGES, output=Triage) as s:
            events = list(s)
            result = s.final()
        retry_text = last_message(server.request(1).body)
        assert len(server.requests) == 2
    assert result == TRIAGE
    assert asked_for(plan_of(Triage), retry_text) == {(4, None)}
    assert "only if it has a value" in retry_text
    types = [e.type for e in events]
    assert types.count("done") == 1 and types[-1] == "done"
    retry = next(e for e in events if isinstance(e, Retry))
    assert retry.slots == ("tags[]",)
    assert [r.code for r in retry.reasons] == ["not_written"]
    reason = retry.reasons[0].message
    assert ("token limit" in reason) == (finish == "length")


async def test_a_cut_after_the_required_slots_async() -> None:
    async with ScriptedServer([_first("drop"), Reply(TAGS)]) as server:
        async with astream(async_client(server), model="m", messages=MESSAGES, output=Triage) as s:
            result = await s.final()
        assert len(server.requests) == 2
    assert result == TRIAGE


def test_a_cut_with_no_attempt_left_ends_with_the_object() -> None:
    with (
        ScriptedServer([_first("drop")]) as server,
        stream(
            sync_client(server), model="m", messages=MESSAGES, output=Triage, max_attempts=1
        ) as s,
    ):
        types = [e.type for e in s]
        result = s.final()
    assert types[-1] == "done" and "retry" not in types
    assert result == TRIAGE.model_copy(update={"tags": []})


def test_a_failed_follow_up_for_optional_values_ends_with_the_object() -> None:
    with ScriptedServer([_first("drop"), Reply(status=500)]) as server:
        with stream(sync_client(server), model="m", messages=MESSAGES, output=Triage) as s:
            events = list(s)
            result = s.final()
        assert len(server.requests) == 2
    assert result == TRIAGE.model_copy(update={"tags": []})
    assert events[-1].type == "done"
    notes = [e for e in events if isinstance(e, Diagnostic) and e.code == "follow_up_failed"]
    assert len(notes) == 1 and "HTTP 500" in notes[0].message


def test_a_follow_up_cut_inside_the_list_on_the_last_attempt_leaves_the_list_out() -> None:
    cut = len(TAGS[: TAGS.index("bug") + 1].encode())  # inside the second item
    replies = [_first("drop"), Reply(TAGS, drop_after_bytes=cut)]
    with (
        ScriptedServer(replies) as server,
        stream(
            sync_client(server), model="m", messages=MESSAGES, output=Triage, max_attempts=2
        ) as s,
    ):
        events = list(s)
        result = s.final()
    assert result == TRIAGE.model_copy(update={"tags": []})
    assert events[-1].type == "done"
    assert any(isinstance(e, Diagnostic) and e.code == "left_out" for e in events)


def _text(model: BaseModel, syntax: str, *, under: str = "") -> str:
    plan = slotflight.compile(type(model))
    values = [f for f in walk_instance(plan, model) if f.pointer.startswith(under)]
    return get_syntax(syntax).write(plan, values)


@pytest.mark.parametrize("syntax", ["v1", "v3", "v3-quoted", "v4-quoted"])
def test_a_list_cut_after_a_complete_item_is_asked_for_again_whole(syntax: str) -> None:
    """In these syntaxes an item can be complete before the next one starts (a closing
    tag or quote, the next line): the list may have had more items, so it is asked for
    again, whole, with the items so far as context."""
    text = _text(TRIAGE, syntax)
    item_end = text.index("</4:0>") + 6 if syntax == "v1" else text.index("export") + 6
    cut = len(text[: text.index("\n", item_end) + 1].encode())
    if syntax == "v3":
        cut += 1  # "t" of the next line: what completes a raw item
    replies = [Reply(text, drop_after_bytes=cut), Reply(_text(TRIAGE, syntax, under="/tags"))]
    with ScriptedServer(replies) as server:
        with stream(
            sync_client(server), model="m", messages=MESSAGES, output=Triage, syntax=syntax
        ) as s:
            events = list(s)
            result = s.final()
        retry_text = last_message(server.request(1).body)
        assert len(server.requests) == 2
    assert result == TRIAGE
    first_tags = [e.to_json()["value"] for e in events if e.type == "slot-complete"][3]
    assert first_tags == "export"  # accepted before the cut, then the list is asked again
    retry = next(e for e in events if isinstance(e, Retry))
    assert [(r.code, r.location) for r in retry.reasons] == [("truncated", "/tags")]
    assert '"tags":["export"]' in retry_text  # the items so far, as context


def test_a_list_its_check_stopped_at_a_repeat_is_not_asked_for_again() -> None:
    """A list the ``list_repeat`` check stopped ended there: a cut while the model goes
    on repeating asks nothing more of it."""
    looping = TRIAGE.model_copy(update={"tags": ["export", "export", "export", "export"]})
    text = _text(looping, "v4-quoted").removesuffix("end\n")
    with ScriptedServer([Reply(text, finish_reason="length"), Reply(TAGS)]) as server:
        with stream(
            sync_client(server), model="m", messages=MESSAGES, output=Triage, syntax="v4-quoted"
        ) as s:
            types = [e.type for e in s]
            result = s.final()
        assert len(server.requests) == 1
    assert result == TRIAGE.model_copy(update={"tags": ["export"]})
    assert "retry" not in types and types[-1] == "done"


def test_a_complete_answer_without_optional_values_sends_one_request() -> None:
    answer = written(Triage, (1, TRIAGE.summary), (2, "4"), (3, "negative"))
    with ScriptedServer([Reply(answer), Reply(TAGS)]) as server:
        result = slotflight.complete(
            sync_client(server), model="m", messages=MESSAGES, output=Triage
        )
        assert len(server.requests) == 1
    assert result == TRIAGE.model_copy(update={"tags": []})


def test_a_drop_after_the_end_marker_sends_one_request() -> None:
    answer = written(Triage, (1, TRIAGE.summary), (2, "4"), (3, "negative"))
    with ScriptedServer([Reply(answer, drop_after_bytes=len(answer.encode()))]) as server:
        result = slotflight.complete(
            sync_client(server), model="m", messages=MESSAGES, output=Triage
        )
        assert len(server.requests) == 1
    assert result == TRIAGE.model_copy(update={"tags": []})


# -- sans I/O: a drop at every offset ------------------------------------------------------


def _chunk(text: str | None = None, finish: str | None = None) -> Any:
    choice = NS(index=0, delta=NS(content=text), finish_reason=finish, logprobs=None)
    return NS(choices=[choice], usage=None)


def _drop() -> openai.APIConnectionError:
    return openai.APIConnectionError(request=httpx2.Request("POST", "http://test"))


def _drive(core: Any, passes: list[list[Any]]) -> list[Event]:
    """Run ``pass_flow`` over scripted passes (chunks, then END or an exception); check
    that the events' patches rebuild the state after every batch of events."""
    flow = pass_flow(core)
    reply: Any = None
    events: list[Event] = []
    mirror: Any = core.assembler.state
    current: Any = iter(())
    while True:
        try:
            command = flow.send(reply)
        except StopIteration:
            return events
        reply = None
        if isinstance(command, Request):
            current = iter(passes.pop(0))
        elif isinstance(command, Read):
            reply = next(current, END)
        elif isinstance(command, Feed):
            reply = command.feed()
        elif isinstance(command, Release):
            current = iter(())
        else:
            for event in command.events:
                events.append(event)
                if event.patch:
                    mirror = jsonpatch.apply_patch(mirror, event.patch)
            assert mirror == core.assembler.state
            json.dumps(mirror, allow_nan=False)


@pytest.mark.parametrize("syntax", sorted(SYNTAXES))
@pytest.mark.parametrize("model", [PLAN, TRIAGE], ids=["plan", "triage"])
def test_a_drop_anywhere_is_repaired_by_the_follow_up(syntax: str, model: BaseModel) -> None:
    """Cut the first pass at every offset; the follow-up writes the whole answer (frames
    it was not asked for are ignored). Accepted values never change, and the stream
    ends with the whole object: nothing the model had not written yet is lost."""
    text = _text(model, syntax)
    whole = [_chunk(text), _chunk(None, "stop")]
    for cut in range(len(text) + 1):
        core = new_core(
            type(model),
            model="m",
            messages=MESSAGES,
            options=StreamOptions(syntax=syntax),
            params={},
            client_timeout=None,
        )
        first = [_chunk(c) for c in text[:cut]] + [_drop()]
        events = _drive(core, [first, list(whole), list(whole)])
        assert events[-1].type == "done", (cut, [e.to_json() for e in events[-3:]])
        accepted: dict[str, Any] = {}
        for event in events:
            data = event.to_json()
            if data["type"] == "retry" and "tags[]" in data["slots"]:
                accepted = {p: v for p, v in accepted.items() if not p.startswith("/tags/")}
            if data["type"] == "slot-complete":
                assert accepted.setdefault(data["path"], data["value"]) == data["value"], cut
        result = core.result()
        if isinstance(model, Plan):  # items of a list of objects beyond those seen
            n = len(result.actions)
            assert n >= 1 and result.actions == model.actions[:n], (cut, result)
            result = result.model_copy(update={"actions": model.actions})
        assert result == model, (cut, result)
