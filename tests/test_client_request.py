"""What the streams send and how server answers map: bodies, usage, status errors."""

from __future__ import annotations

from typing import Any

import openai
import pytest

from slotflight._errors import TransportError, UpstreamStatusError
from slotflight.assemble.events import ErrorEvent, Event
from slotflight.client.async_stream import acomplete, astream
from slotflight.client.sync_stream import complete, stream
from slotflight.client.usage import TokenUsage
from slotflight.plan.instance import FrameValue
from slotflight.prompting.prompt import prompt
from slotflight.syntax import DEFAULT_SYNTAX, SYNTAXES, get_syntax, grammar, render_frames
from slotflight.testing import Reply, ScriptedServer, Usage
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


def run_sync(server: ScriptedServer, **options: Any) -> Triage:
    client = options.pop("client", None) or sync_client(server)
    options.setdefault("messages", MESSAGES)
    with stream(client, model="m", output=Triage, **options) as s:
        return s.final()


def test_the_request_streams_with_usage_and_the_plan_prompt() -> None:
    with ScriptedServer([Reply(TEXT)]) as server:
        run_sync(server)
        body = server.request(0).body
    assert body["model"] == "m"
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["messages"] == [
        {"role": "system", "content": prompt(plan_of(Triage))},
        *MESSAGES,
    ]
    assert "grammar" not in body and "guided_grammar" not in body


def test_usage_per_request_and_total() -> None:
    replies = [
        Reply(replace_value(TRIAGE, 2, "7"), usage=Usage(100, 40)),
        Reply(written(Triage, (2, "3")), usage=Usage(150, 5, 160)),
    ]
    with (
        ScriptedServer(replies) as server,
        stream(sync_client(server), model="m", messages=MESSAGES, output=Triage) as s,
    ):
        s.final()
    assert s.usage.requests == (TokenUsage(100, 40, 140), TokenUsage(150, 5, 160))
    assert s.usage.total == TokenUsage(250, 45, 300)
    assert s.usage.reported
    assert s.usage.to_json()["total"] == {
        "prompt_tokens": 250,
        "completion_tokens": 45,
        "total_tokens": 300,
    }


def test_stream_options_can_be_turned_off() -> None:
    with ScriptedServer([Reply(TEXT, usage=Usage(1, 2))]) as server:
        with stream(
            sync_client(server),
            model="m",
            messages=MESSAGES,
            output=Triage,
            stream_options=None,
        ) as s:
            s.final()
        body = server.request(0).body
    assert "stream_options" not in body
    assert s.usage.requests == (None,)
    assert not s.usage.reported


@pytest.mark.parametrize(
    ("backend", "field"),
    [
        ("llama.cpp", ("grammar",)),
        ("vllm", ("structured_outputs", "grammar")),
        ("vllm-guided", ("guided_grammar",)),
    ],
)
def test_grammar_goes_into_the_body_merged_with_extra_body(
    backend: str, field: tuple[str, ...]
) -> None:
    replies = [Reply(replace_value(TRIAGE, 3, "meh")), Reply(written(Triage, (3, "neutral")))]
    extra = {"top_k": 20, "structured_outputs": {"disable_any_whitespace": True}}
    with ScriptedServer(replies) as server:
        run_sync(server, grammar=backend, extra_body=extra)
        bodies = [r.body for r in server.requests]
    plan = plan_of(Triage)

    def sent(body: dict[str, Any]) -> Any:
        for key in field:
            body = body[key]
        return body

    assert sent(bodies[0]) == grammar(plan)
    # the follow-up's grammar admits only the frames it asks for
    sentiment = plan.by_path("sentiment")
    assert sent(bodies[1]) == get_syntax().grammar(plan, only=[(sentiment, None, True)])
    assert sent(bodies[1]) != sent(bodies[0])
    for body in bodies:
        assert body["top_k"] == 20
        # the caller's other vLLM options are kept beside the grammar
        assert body["structured_outputs"]["disable_any_whitespace"] is True
    assert extra == {"top_k": 20, "structured_outputs": {"disable_any_whitespace": True}}
    other = {"grammar", "guided_grammar"} - {field[0]}
    assert not other & set(bodies[0])
    # with a grammar, the prompt leaves out what the grammar enforces
    assert bodies[0]["messages"][0]["content"] == prompt(plan, grammar=True)


@pytest.mark.parametrize("given", [{"json": {"type": "object"}}, {"regex": "a+"}, "grammar"])
def test_a_second_vllm_constraint_is_refused_before_any_request(given: Any) -> None:
    with ScriptedServer([]) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="test", max_retries=0)
        with pytest.raises(TypeError, match="structured_outputs"):
            complete(
                client,
                model="m",
                messages=[{"role": "user", "content": "x"}],
                output=Triage,
                grammar="vllm",
                extra_body={"structured_outputs": given},
            )
        assert server.requests == []


def test_pass_through_parameters_reach_the_server() -> None:
    with ScriptedServer([Reply(TEXT)]) as server:
        run_sync(
            server,
            temperature=0.2,
            max_tokens=321,
            seed=7,
            top_p=0.9,
            stop=["</end>"],
            extra_headers={"X-Trace-Id": "trace-42"},
            extra_body={"repeat_penalty": 1.1},
        )
        recorded = server.request(0)
    body = recorded.body
    assert (body["temperature"], body["max_tokens"], body["seed"], body["top_p"]) == (
        0.2,
        321,
        7,
        0.9,
    )
    assert body["stop"] == ["</end>"]
    assert body["repeat_penalty"] == 1.1
    assert {k.lower(): v for k, v in recorded.headers.items()}["x-trace-id"] == "trace-42"


def test_prompt_placement_merges_into_a_leading_system_message() -> None:
    messages = [{"role": "system", "content": "You triage tickets."}, *MESSAGES]
    with ScriptedServer([Reply(TEXT)]) as server:
        run_sync(server, messages=messages)
        sent = server.request(0).body["messages"]
    assert len(sent) == 2
    # the plan's prompt first, the same for every request, then the caller's text
    assert sent[0]["content"] == prompt(plan_of(Triage)) + "\n\nYou triage tickets."


def test_prompt_placement_user_and_callable() -> None:
    def place(messages: list[dict[str, Any]], text: str) -> list[dict[str, Any]]:
        return [{"role": "developer", "content": text}, *messages]

    with ScriptedServer([Reply(TEXT), Reply(TEXT)]) as server:
        run_sync(server, prompt_role="user")
        run_sync(server, prompt_role=place)
        as_user = server.request(0).body["messages"]
        placed = server.request(1).body["messages"]
    text = prompt(plan_of(Triage))
    assert as_user == [{"role": "user", "content": MESSAGES[0]["content"] + "\n\n" + text}]
    assert placed == [{"role": "developer", "content": text}, *MESSAGES]


def test_prompt_placement_into_messages_made_of_parts() -> None:
    """A message whose content is a list of parts (text, images) gets the prompt as a
    text part of its own: no second system message, no two user messages in a row,
    which chat templates refuse."""
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    system = {"role": "system", "content": [{"type": "text", "text": "Be brief."}]}
    user = {"role": "user", "content": [{"type": "text", "text": "Triage this:"}, image]}
    with ScriptedServer([Reply(TEXT), Reply(TEXT)]) as server:
        run_sync(server, messages=[system, user])
        run_sync(server, messages=[system, user], prompt_role="user")
        as_system = server.request(0).body["messages"]
        as_user = server.request(1).body["messages"]
    text = prompt(plan_of(Triage))
    first = {"type": "text", "text": text + "\n\n"}
    assert as_system == [{**system, "content": [first, *system["content"]]}, user]
    last = {"type": "text", "text": "\n\n" + text}
    assert as_user == [system, {**user, "content": [*user["content"], last]}]
    assert system["content"] == [{"type": "text", "text": "Be brief."}]  # not changed


def _first_and_follow_up(**options: Any) -> tuple[list[Any], list[Any]]:
    """The messages of the first request and of its follow-up (priority 7 re-asked)."""
    with ScriptedServer([Reply(replace_value(TRIAGE, 2, "7")), Reply(TEXT)]) as server:
        assert run_sync(server, **options) == TRIAGE
        return server.request(0).body["messages"], server.request(1).body["messages"]


def _alternate(messages: list[Any]) -> bool:
    """The rule of strict chat templates (Gemma's, Mistral's): after an optional
    system message, user and assistant turns alternate, starting with a user turn."""
    roles = [m["role"] for m in messages]
    turns = roles[1:] if roles[:1] == ["system"] else roles
    return all(role == ("user", "assistant")[i % 2] for i, role in enumerate(turns))


@pytest.mark.parametrize("prompt_role", ["system", "user"])
def test_a_follow_up_joins_the_last_user_message(prompt_role: str) -> None:
    """Chat templates that want the turns to alternate (Gemma's and Mistral's raise on
    two user messages in a row) take a follow-up as they took the first request: it
    goes into the last user message, after a blank line, never as a second one."""
    first, follow_up = _first_and_follow_up(prompt_role=prompt_role)
    assert [m["role"] for m in follow_up] == [m["role"] for m in first]
    assert _alternate(first) and _alternate(follow_up)
    assert follow_up[:-1] == first[:-1]
    asked = follow_up[-1]["content"]
    assert asked.startswith(first[-1]["content"] + "\n\n") and "priority" in asked


def test_a_follow_up_joins_a_user_message_made_of_parts() -> None:
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    user = {"role": "user", "content": [{"type": "text", "text": "Triage this:"}, image]}
    first, follow_up = _first_and_follow_up(messages=[user])
    assert _alternate(follow_up) and follow_up[:-1] == first[:-1]
    *parts, asked = follow_up[-1]["content"]
    assert parts == first[-1]["content"] and asked["type"] == "text"
    assert asked["text"].startswith("\n\n") and "priority" in asked["text"]


def test_a_follow_up_after_an_assistant_turn_is_a_user_message_of_its_own() -> None:
    """A conversation the caller ends with an assistant turn (a prefilled answer) gets
    the follow-up as the next user turn, which keeps the turns alternating."""
    messages = [*MESSAGES, {"role": "assistant", "content": "Noted."}]
    first, follow_up = _first_and_follow_up(messages=messages)
    assert follow_up[:-1] == first
    assert follow_up[-1]["role"] == "user" and "priority" in follow_up[-1]["content"]
    assert _alternate(follow_up)


def test_a_message_read_from_a_response_is_sent_as_the_openai_client_sends_it() -> None:
    """``messages.append(response.choices[0].message)`` is how a conversation goes on:
    the message goes out with the fields it was read with, as ``create`` sends it (not
    with every field of the class as null), and its text counts as input."""
    read = (
        openai.types.chat.ChatCompletion.model_validate(
            {
                "id": "c1",
                "object": "chat.completion",
                "created": 0,
                "model": "m",
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {"role": "assistant", "content": "Which ticket?"},
                    }
                ],
            }
        )
        .choices[0]
        .message
    )
    messages = [*MESSAGES, read, {"role": "user", "content": "The export one."}]
    with ScriptedServer([Reply(TEXT), Reply(TEXT)]) as server:
        assert run_sync(server, messages=messages) == TRIAGE
        sent = server.request(0).body["messages"]
        sync_client(server).chat.completions.create(model="m", messages=[read])  # type: ignore[list-item]
        by_openai = server.request(1).body["messages"]
    assert sent[2] == by_openai[0] == {"role": "assistant", "content": "Which ticket?"}
    with ScriptedServer() as server, pytest.raises(TypeError, match=r"messages\[1\]"):
        stream(sync_client(server), model="m", messages=[MESSAGES[0], ("user", "x")], output=Triage)  # type: ignore[list-item]


def test_a_json_schema_dict_gives_a_dict() -> None:
    schema = Triage.model_json_schema()
    with (
        ScriptedServer([Reply(TEXT)]) as server,
        stream(sync_client(server), model="m", messages=MESSAGES, output=schema) as s,
    ):
        result = s.final()
    assert result == TRIAGE.model_dump(mode="json")


def test_a_precompiled_plan_is_used_as_given() -> None:
    plan = plan_of(Triage)
    with ScriptedServer([Reply(TEXT)]) as server:
        client = sync_client(server)
        with stream(client, model="m", messages=MESSAGES, output=plan) as s:
            assert s.plan is plan
            result = s.final()
    assert result == TRIAGE


def test_status_500_raises_upstream_status_error() -> None:
    with ScriptedServer([Reply(status=500, error_message="backend exploded")]) as server:
        with stream(sync_client(server), model="m", messages=MESSAGES, output=Triage) as s:
            seen: list[Event] = []
            with pytest.raises(UpstreamStatusError) as info:
                for event in s:
                    seen.append(event)
        assert len(server.requests) == 1
    error = info.value
    assert error.status_code == 500
    assert "backend exploded" in error.body
    assert isinstance(error.__cause__, openai.InternalServerError)
    assert [e.error.code for e in seen if isinstance(e, ErrorEvent)] == ["upstream_status"]


def test_429_then_success_follows_the_client_retry_policy() -> None:
    replies = [Reply(status=429, retry_after=0.0), Reply(TEXT)]
    with ScriptedServer(replies) as server:
        result = run_sync(server, client=sync_client(server, max_retries=1))
        assert [r.status for r in server.requests] == [429, 200]
    assert result == TRIAGE


def test_429_with_retries_exhausted_raises_with_its_status() -> None:
    replies = [Reply(status=429, retry_after=0.0), Reply(status=429, retry_after=0.0)]
    with ScriptedServer(replies) as server:
        with pytest.raises(UpstreamStatusError) as info:
            run_sync(server, client=sync_client(server, max_retries=1))
        assert len(server.requests) == 2
    assert info.value.status_code == 429


async def test_status_error_async() -> None:
    async with ScriptedServer([Reply(status=503)]) as server:
        with pytest.raises(UpstreamStatusError) as info:
            await acomplete(async_client(server), model="m", messages=MESSAGES, output=Triage)
    assert info.value.status_code == 503
    assert isinstance(info.value.__cause__, openai.APIStatusError)


def test_a_refused_connection_is_a_transport_error() -> None:
    with ScriptedServer() as server:
        base_url = server.base_url
    client = openai.OpenAI(base_url=base_url, api_key="test", max_retries=0)
    with pytest.raises(TransportError) as info:
        complete(client, model="m", messages=MESSAGES, output=Triage)
    assert isinstance(info.value.__cause__, openai.APIConnectionError)


def test_a_text_response_format_passes_through() -> None:
    with ScriptedServer([Reply(TEXT)]) as server:
        assert run_sync(server, response_format={"type": "text"}) == TRIAGE
        assert server.request(0).body["response_format"] == {"type": "text"}


def test_one_choice_passes_through() -> None:
    with ScriptedServer([Reply(TEXT)]) as server:
        assert run_sync(server, n=1) == TRIAGE
        assert server.request(0).body["n"] == 1


def test_complete_returns_the_model() -> None:
    with ScriptedServer([Reply(TEXT, chunks=1)]) as server:
        assert complete(sync_client(server), model="m", messages=MESSAGES, output=Triage) == TRIAGE


async def test_acomplete_returns_the_model() -> None:
    async with ScriptedServer([Reply(TEXT, chunks=2)]) as server:
        client = async_client(server)
        result = await acomplete(client, model="m", messages=MESSAGES, output=Triage)
    assert result == TRIAGE


async def test_astream_sends_the_same_body_as_stream() -> None:
    async with ScriptedServer([Reply(TEXT), Reply(TEXT)]) as server:
        await acomplete(
            async_client(server),
            model="m",
            messages=MESSAGES,
            output=Triage,
            temperature=0,
        )
        complete(
            sync_client(server),
            model="m",
            messages=MESSAGES,
            output=Triage,
            temperature=0,
        )
        first, second = (r.body for r in server.requests)
    assert first == second


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"stream": False}, TypeError),
        ({"max_attempts": 0}, ValueError),
        ({"grammar": "outlines"}, ValueError),
        ({"prompt_role": "assistant"}, ValueError),
        ({"timeout": 0}, ValueError),
        ({"idle_timeout": -1.0}, ValueError),
        ({"extra_body": "top_k=1"}, TypeError),
        ({"response_format": {"type": "json_object"}}, TypeError),
        ({"response_format": {"type": "json_schema", "json_schema": {"name": "x"}}}, TypeError),
        ({"n": 2}, TypeError),
    ],
)
def test_invalid_options_are_refused_before_any_request(
    options: dict[str, Any], error: type[Exception]
) -> None:
    with ScriptedServer() as server:
        with pytest.raises(error):
            stream(
                sync_client(server),
                model="m",
                messages=MESSAGES,
                output=Triage,
                **options,
            )
        assert server.requests == []


async def test_a_client_of_the_wrong_kind_is_refused() -> None:
    async with ScriptedServer() as server:
        wrong_sync: Any = async_client(server)
        wrong_async: Any = sync_client(server)
        with pytest.raises(TypeError, match="astream"):
            stream(wrong_sync, model="m", messages=MESSAGES, output=Triage)
        with pytest.raises(TypeError, match="stream"):
            astream(wrong_async, model="m", messages=MESSAGES, output=Triage)


def test_the_default_syntax_is_the_one_of_the_prompt_and_the_parser() -> None:
    text = render_frames(plan_of(Triage), TRIAGE, DEFAULT_SYNTAX)
    with ScriptedServer([Reply(text, chunks=3)]) as server:
        result = complete(sync_client(server), model="m", messages=MESSAGES, output=Triage)
        body = server.request(0).body
    assert result == TRIAGE
    system = {"role": "system", "content": prompt(plan_of(Triage), DEFAULT_SYNTAX)}
    assert body["messages"][0] == system


@pytest.mark.parametrize("syntax", sorted(SYNTAXES))
def test_every_syntax_can_be_chosen(syntax: str) -> None:
    plan = plan_of(Triage)
    priority = plan.by_path("priority")
    bad = render_frames(plan, {**TRIAGE.model_dump(mode="json"), "priority": 7}, syntax)
    fixed = SYNTAXES[syntax].write(plan, [FrameValue(priority, None, 3)])
    replies = [Reply(bad, chunks=3), Reply(fixed)]
    with ScriptedServer(replies) as server:
        with stream(
            sync_client(server),
            model="m",
            messages=MESSAGES,
            output=Triage,
            syntax=syntax,
            grammar="llama.cpp",
        ) as s:
            result = s.final()
        first, second = (r.body for r in server.requests)
    assert result == TRIAGE.model_copy(update={"priority": 3})
    assert first["messages"][0]["content"] == prompt(plan, syntax, grammar=True)
    assert first["grammar"] == grammar(plan, syntax)
    assert second["grammar"] == SYNTAXES[syntax].grammar(plan, only=[(priority, None, True)])
