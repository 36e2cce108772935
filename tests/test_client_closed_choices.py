"""The SDK asks for calibrated closed choices (``closed_choices``) on the first request
of a run: when, with what, and never on a follow-up."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

from slotflight.client.async_stream import astream
from slotflight.client.request import StreamOptions
from slotflight.client.sync_stream import stream
from slotflight.local._request import parse_chat_request
from slotflight.prompting.prompt import prompt
from slotflight.syntax import DEFAULT_SYNTAX, get_syntax, render_frames
from slotflight.syntax.closed_choices import closed_choices
from slotflight.testing import Reply, ScriptedServer
from tests.client_support import (
    MESSAGES,
    TRIAGE,
    Triage,
    async_client,
    frames,
    plan_of,
    replace_value,
    sync_client,
    written,
)

TEXT = frames(TRIAGE)
#: The plan's prompt of a run that sends the grammar.
PROMPT = prompt(plan_of(Triage), grammar=True)
#: A first answer whose sentiment is not one of the options, then its follow-up's.
WITH_FOLLOW_UP = [Reply(replace_value(TRIAGE, 3, "meh")), Reply(written(Triage, (3, "neutral")))]


class Note(BaseModel):
    title: str
    body: str


def bodies(replies: list[Reply], output: type[BaseModel] = Triage, **options: Any) -> list[Any]:
    """The request bodies of one run of :func:`stream` on ``replies``."""
    options.setdefault("messages", MESSAGES)
    with ScriptedServer(replies) as server:
        with stream(sync_client(server), model="m", output=output, **options) as s:
            s.final()
        return [r.body for r in server.requests]


def expected_fields(syntax: str = DEFAULT_SYNTAX) -> list[dict[str, Any]]:
    choices = closed_choices(plan_of(Triage), get_syntax(syntax))
    return json.loads(json.dumps([c.to_json() for c in choices]))


def user_free(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{**m, "content": "N/A"} if m["role"] == "user" else m for m in messages]


def test_a_llama_cpp_grammar_asks_for_closed_choices_on_the_first_request() -> None:
    first, follow_up = bodies(WITH_FOLLOW_UP, grammar="llama.cpp")
    sent = first["closed_choices"]
    assert sent["fields"] == expected_fields()
    assert [f["after"] for f in sent["fields"]] == ["priority:", "sentiment:"]
    assert sent["content_free"] == user_free(first["messages"])
    assert sent["content_free"][0] == {"role": "system", "content": PROMPT}
    assert sent["content_free"][0] == first["messages"][0]
    assert "grammar" in first
    # the follow-up asks only for the frames it retries
    assert "closed_choices" not in follow_up
    assert "grammar" in follow_up


def test_the_embedded_server_reads_what_the_sdk_sends() -> None:
    (first,) = bodies([Reply(TEXT)], grammar="llama.cpp")
    chat = parse_chat_request(json.dumps(first).encode())
    assert chat.closed_choices is not None
    assert [f[0] for f in chat.closed_choices.fields] == ["priority:", "sentiment:"]
    assert chat.closed_choices.content_free[-1] == {"role": "user", "content": "N/A"}


def test_content_free_keeps_every_other_message_and_the_prompts_place() -> None:
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "First ticket."},
        {"role": "assistant", "content": "Noted."},
        {"role": "user", "content": [{"type": "text", "text": "The export fails."}]},
    ]
    (first,) = bodies([Reply(TEXT)], grammar="llama.cpp", messages=messages)
    free = first["closed_choices"]["content_free"]
    assert free == user_free(first["messages"])
    assert free[0]["content"] == f"{PROMPT}\n\nBe brief."
    assert messages[1]["content"] == "First ticket."  # the caller's list is left as it was


def test_a_prompt_in_the_user_message_is_kept_in_the_content_free_one() -> None:
    (first,) = bodies([Reply(TEXT)], grammar="llama.cpp", prompt_role="user")
    text = PROMPT
    assert first["messages"][-1]["content"] == f"{MESSAGES[-1]['content']}\n\n{text}"
    assert first["closed_choices"]["content_free"] == [
        {"role": "user", "content": f"N/A\n\n{text}"}
    ]


@pytest.mark.parametrize(
    "options",
    [
        {"grammar": "llama.cpp", "calibrate": False},
        {},  # no grammar
        {"grammar": False},
        {"grammar": "vllm"},
    ],
    ids=["calibrate-off", "default", "grammar-off", "vllm"],
)
def test_no_closed_choices(options: dict[str, Any]) -> None:
    for body in bodies(WITH_FOLLOW_UP, **options):
        assert "closed_choices" not in body


@pytest.mark.parametrize("syntax", ["v1", "v2"])
def test_no_closed_choices_without_named_lines(syntax: str) -> None:
    reply = Reply(render_frames(plan_of(Triage), TRIAGE, syntax))
    for calibrate in (None, True):
        (first,) = bodies([reply], grammar="llama.cpp", syntax=syntax, calibrate=calibrate)
        assert "closed_choices" not in first


def test_calibrate_without_a_grammar() -> None:
    first, follow_up = bodies(WITH_FOLLOW_UP, calibrate=True)
    assert first["closed_choices"]["fields"] == expected_fields()
    assert first["closed_choices"]["content_free"] == user_free(first["messages"])
    assert "grammar" not in first
    assert "closed_choices" not in follow_up


def test_the_options_follow_the_runs_syntax() -> None:
    replies = [Reply(render_frames(plan_of(Triage), TRIAGE, "v3-quoted"))]
    (first,) = bodies(replies, grammar="llama.cpp", syntax="v3-quoted")
    assert first["closed_choices"]["fields"] == expected_fields("v3-quoted")
    sentiment = first["closed_choices"]["fields"][1]
    assert sentiment["options"] == [' "positive"', ' "neutral"', ' "negative"']


def test_a_plan_without_closed_fields_sends_none() -> None:
    reply = Reply(frames(Note(title="Export", body="Fails for big files.")))
    (first,) = bodies([reply], output=Note, grammar="llama.cpp")
    assert "closed_choices" not in first
    assert "grammar" in first


def test_the_callers_closed_choices_is_sent_as_given() -> None:
    own = {"fields": [{"after": "priority:", "options": [" 4", " 5"]}], "content_free": []}
    (first,) = bodies([Reply(TEXT)], grammar="llama.cpp", extra_body={"closed_choices": own})
    assert first["closed_choices"] == own


def test_extra_body_is_merged_with_closed_choices() -> None:
    first, follow_up = bodies(WITH_FOLLOW_UP, grammar="llama.cpp", extra_body={"top_k": 20})
    assert first["top_k"] == 20 and follow_up["top_k"] == 20
    assert first["closed_choices"]["fields"] == expected_fields()
    assert "closed_choices" not in follow_up


def test_calibrate_must_be_a_boolean_or_none() -> None:
    with pytest.raises(TypeError):
        StreamOptions(calibrate="yes")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        StreamOptions(calibrate=1)  # type: ignore[arg-type]
    assert StreamOptions().calibrate is None
    with ScriptedServer() as server:
        with pytest.raises(TypeError):
            stream(
                sync_client(server), model="m", messages=MESSAGES, output=Triage, calibrate="yes"
            )
        assert server.requests == []


async def test_astream_sends_closed_choices_on_the_first_request_only() -> None:
    async with ScriptedServer(WITH_FOLLOW_UP) as server:
        async with astream(
            async_client(server), model="m", messages=MESSAGES, output=Triage, grammar="llama.cpp"
        ) as s:
            result = await s.final()
        first, follow_up = (r.body for r in server.requests)
    assert result.sentiment == "neutral"
    assert first["closed_choices"]["fields"] == expected_fields()
    assert first["closed_choices"]["content_free"] == user_free(first["messages"])
    assert "closed_choices" not in follow_up


async def test_astream_with_calibrate_off() -> None:
    async with ScriptedServer([Reply(TEXT)]) as server:
        async with astream(
            async_client(server),
            model="m",
            messages=MESSAGES,
            output=Triage,
            grammar="llama.cpp",
            calibrate=False,
        ) as s:
            await s.final()
        (first,) = (r.body for r in server.requests)
    assert "closed_choices" not in first
