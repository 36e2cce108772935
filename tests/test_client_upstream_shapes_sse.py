"""Stream shapes that OpenAI-compatible servers and proxies send, over real HTTP on
127.0.0.1 to the real ``openai`` client, sync and async: an error object inside the
stream, keep-alives, a JSON answer to a streamed request, refusals, content filters,
tool calls, odd choices and usage in every chunk. The upstream is a small ASGI app that
sends raw bytes."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

import openai
import pytest

import slotflight
from slotflight._errors import (
    OutputValidationError,
    SlotflightError,
    TransportError,
    UpstreamStatusError,
    UpstreamTimeout,
)
from slotflight._serving.thread import AppServer
from slotflight.assemble.assembler import Limits
from slotflight.assemble.events import ErrorEvent, Event, Retry
from tests.client_support import (
    MESSAGES,
    TRIAGE,
    Triage,
    asked_for,
    bytes_before,
    frames,
    last_message,
    plan_of,
)

TEXT = frames(TRIAGE)
SUMMARY, SENTIMENT, TAGS = 1, 3, 4  # slot ids of Triage
#: The summary and priority lines: two values accepted before what comes next.
HEAD = TEXT[: bytes_before(TRIAGE, SENTIMENT)]
USAGE = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
SSE = b"text/event-stream"
JSON = b"application/json"
MODES = pytest.mark.parametrize("mode", ["sync", "async"])


def chunk(content: str | None = None, finish: str | None = None, **extra: Any) -> dict[str, Any]:
    """A ``chat.completion.chunk`` with one choice (``extra`` replaces or adds fields)."""
    delta = {} if content is None else {"content": content}
    data: dict[str, Any] = {
        "id": "c",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    data.update(extra)
    return data


def event(payload: Any) -> bytes:
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


DONE = b"data: [DONE]\n\n"
#: The whole answer in two chunks, as a well-behaved server streams it.
ANSWER = [event(chunk(TEXT[:20])), event(chunk(TEXT[20:], "stop")), DONE]
COMPLETION: dict[str, Any] = {
    "id": "c",
    "object": "chat.completion",
    "created": 0,
    "model": "m",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": TEXT},
            "finish_reason": "stop",
        }
    ],
    "usage": USAGE,
}


@dataclass(frozen=True)
class Answer:
    """One response: its status, content type, and the body in the parts sent."""

    parts: list[bytes]
    content_type: bytes = SSE
    status: int = 200
    stall: bool = False  # after the parts, send nothing until the client goes away


class Upstream:
    """An ASGI app that answers each request with the next :class:`Answer` (the last
    one again once they run out) and keeps the request bodies."""

    def __init__(self, answers: list[Answer]) -> None:
        self.answers = answers
        self.bodies: list[dict[str, Any]] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        assert scope["type"] == "http"
        raw = b""
        while True:
            message = await receive()
            raw += message.get("body", b"")
            if not message.get("more_body"):
                break
        self.bodies.append(json.loads(raw))
        answer = self.answers[min(len(self.bodies), len(self.answers)) - 1]
        headers = [(b"content-type", answer.content_type)]
        await send({"type": "http.response.start", "status": answer.status, "headers": headers})
        for part in answer.parts:
            await send({"type": "http.response.body", "body": part, "more_body": True})
            await asyncio.sleep(0)  # each part its own network write
        if answer.stall:
            while (await receive())["type"] != "http.disconnect":
                pass
            return
        await send({"type": "http.response.body", "body": b""})


@dataclass
class Run:
    """What a stream did against an :class:`Upstream`."""

    result: Any = None
    error: SlotflightError | None = None
    events: list[Event] = field(default_factory=list)
    completed: dict[str, Any] = field(default_factory=dict)
    usage: Any = None
    bodies: list[dict[str, Any]] = field(default_factory=list)


def run(mode: str, answers: list[Answer], **options: Any) -> Run:
    """Stream ``Triage`` from an upstream sending ``answers``, with ``stream`` (sync)
    or ``astream`` (async), to its end."""
    upstream = Upstream(answers)
    out = Run(bodies=upstream.bodies)
    with AppServer(upstream, lifespan="off") as server:
        url = f"{server.url}/v1"
        if mode == "sync":
            client = openai.OpenAI(base_url=url, api_key="k", max_retries=0)
            with slotflight.stream(
                client, model="m", messages=MESSAGES, output=Triage, **options
            ) as s:
                try:
                    out.events.extend(s)
                    out.result = s.final()
                except SlotflightError as exc:
                    out.error = exc
                out.completed, out.usage = s.completed(), s.usage
            client.close()
        else:
            asyncio.run(_run_async(url, out, options))
    return out


async def _run_async(url: str, out: Run, options: dict[str, Any]) -> None:
    client = openai.AsyncOpenAI(base_url=url, api_key="k", max_retries=0)
    async with slotflight.astream(
        client, model="m", messages=MESSAGES, output=Triage, **options
    ) as s:
        try:
            async for e in s:
                out.events.append(e)
            out.result = await s.final()
        except SlotflightError as exc:
            out.error = exc
        out.completed, out.usage = s.completed(), s.usage
    await client.close()


def accepted_head(out: Run) -> None:
    """The values before the failure are kept (state, completed)."""
    assert out.completed["/summary"] == TRIAGE.summary
    assert out.completed["/priority"] == TRIAGE.priority


# -- an error object inside the stream ------------------------------------------------------

TRANSIENT_ERRORS = {
    "vllm-502": {"error": {"message": "Provider returned error", "code": 502}},
    "status-as-text": {"error": {"message": "Bad gateway", "code": "503"}},
    "openai-server-error": {"error": {"message": "Internal", "type": "server_error", "code": None}},
    "openrouter": chunk(
        "", "error", error={"code": "server_error", "message": "Provider disconnected"}
    ),
}


@MODES
@pytest.mark.parametrize("name", sorted(TRANSIENT_ERRORS))
def test_a_transient_error_event_keeps_the_accepted_values_and_asks_for_the_rest(
    mode: str, name: str
) -> None:
    cut = Answer([event(chunk(HEAD)), event(TRANSIENT_ERRORS[name])])
    out = run(mode, [cut, Answer(ANSWER)])
    assert out.error is None and out.result == TRIAGE
    assert len(out.bodies) == 2
    asked = asked_for(plan_of(Triage), last_message(out.bodies[1]))
    assert (SUMMARY, None) not in asked and (SENTIMENT, None) in asked
    assert sum(isinstance(e, Retry) for e in out.events) == 1


@MODES
def test_a_transient_error_event_on_the_last_attempt_raises_its_status(mode: str) -> None:
    cut = Answer([event(chunk(HEAD)), event(TRANSIENT_ERRORS["vllm-502"])])
    out = run(mode, [cut], max_attempts=1)
    assert isinstance(out.error, UpstreamStatusError)
    assert out.error.status_code == 502 and out.error.code == "upstream_status"
    assert "Provider returned error" in out.error.message
    assert isinstance(out.error.__cause__, openai.APIError)
    assert len(out.bodies) == 1
    accepted_head(out)


FATAL_ERRORS: dict[str, tuple[dict[str, Any], int | None]] = {
    "bad-request": ({"error": {"message": "prompt too long", "code": 400}}, 400),
    "rate-limited": ({"error": {"message": "slow down", "code": 429}}, 429),
    "unknown-code": ({"error": {"message": "no such model", "code": "model_not_found"}}, None),
    "text-only": ({"error": "Request failed during generation: out of memory"}, None),
}


@MODES
@pytest.mark.parametrize("name", sorted(FATAL_ERRORS))
def test_any_other_error_event_ends_the_stream_at_once_with_its_code(mode: str, name: str) -> None:
    payload, status = FATAL_ERRORS[name]
    out = run(mode, [Answer([event(chunk(HEAD)), event(payload)]), Answer(ANSWER)])
    assert len(out.bodies) == 1  # not asked again
    assert isinstance(out.error, TransportError)
    if status is None:
        assert not isinstance(out.error, UpstreamStatusError)
        assert out.error.code == "transport_error"
    else:
        assert isinstance(out.error, UpstreamStatusError) and out.error.status_code == status
    error = payload["error"]
    said = error if isinstance(error, str) else error["message"]
    assert said in out.error.message
    assert isinstance(out.events[-1], ErrorEvent)
    assert out.events[-1].error.code == out.error.code
    accepted_head(out)


# -- keep-alives and framing ------------------------------------------------------------------


@MODES
def test_blank_data_keepalives_are_skipped(mode: str) -> None:
    parts = [b"data:\n\n", ANSWER[0], b"data: \n\n", b"data:\r\n\r\n", ANSWER[1], ANSWER[2]]
    out = run(mode, [Answer(parts)])
    assert out.error is None and out.result == TRIAGE
    assert len(out.bodies) == 1


COMMENT = b": OPENROUTER PROCESSING\n\n"
FRAMINGS = {
    "comments": [COMMENT, ANSWER[0], COMMENT, *ANSWER[1:]],
    "event-field": [b"event: message\n" + part for part in ANSWER[:2]] + [DONE],
    "crlf": [part.replace(b"\n", b"\r\n") for part in ANSWER],
    "no-done": ANSWER[:2],
    "split-mid-line": [b"".join(ANSWER)[:17], b"".join(ANSWER)[17:]],
}


@MODES
@pytest.mark.parametrize("name", sorted(FRAMINGS))
def test_sse_framings_read_as_one_answer(mode: str, name: str) -> None:
    out = run(mode, [Answer(FRAMINGS[name])])
    assert out.error is None and out.result == TRIAGE
    assert len(out.bodies) == 1


# -- a JSON answer to a streamed request -------------------------------------------------------


@MODES
@pytest.mark.parametrize("content_type", [JSON, b"application/json; charset=utf-8", SSE])
def test_a_completion_answered_whole_is_read_as_one_chunk(mode: str, content_type: bytes) -> None:
    body = json.dumps(COMPLETION).encode()
    out = run(mode, [Answer([body[:40], body[40:]], content_type)])
    assert out.error is None and out.result == TRIAGE
    assert len(out.bodies) == 1
    assert out.usage.requests[0].total_tokens == USAGE["total_tokens"]


@MODES
@pytest.mark.parametrize("content_type", [JSON, SSE])
def test_an_error_answered_with_status_200_is_typed_and_not_asked_again(
    mode: str, content_type: bytes
) -> None:
    body = json.dumps({"error": {"message": "Rate limit exceeded", "code": 429}}).encode()
    out = run(mode, [Answer([body], content_type)])
    assert isinstance(out.error, UpstreamStatusError) and out.error.status_code == 429
    assert len(out.bodies) == 1


@MODES
def test_a_json_answer_that_stalls_ends_at_the_idle_timeout(mode: str) -> None:
    body = json.dumps(COMPLETION).encode()
    out = run(mode, [Answer([body[:40]], JSON, stall=True)], idle_timeout=0.3)
    assert isinstance(out.error, UpstreamTimeout) and "idle" in out.error.message
    assert len(out.bodies) == 1


@MODES
def test_sse_sent_as_json_is_read_as_sse(mode: str) -> None:
    out = run(mode, [Answer(ANSWER, JSON)])
    assert out.error is None and out.result == TRIAGE


@MODES
@pytest.mark.parametrize("body", [b'{"object": "list", "data": []}', b"[1, 2]", b"not json"])
def test_a_json_answer_that_is_no_completion_is_a_transport_error(mode: str, body: bytes) -> None:
    out = run(mode, [Answer([body], JSON)])
    assert type(out.error) is TransportError
    assert len(out.bodies) == 1


@MODES
def test_a_json_answer_is_read_to_a_bounded_size(mode: str) -> None:
    limits = Limits(max_total_chars=1000)  # room for 1 MiB at least
    filler = json.dumps({**COMPLETION, "pad": "x" * (2 << 20)}).encode()
    out = run(mode, [Answer(_parts(filler), JSON)], limits=limits)
    assert type(out.error) is TransportError and "larger than" in out.error.message
    assert len(out.bodies) == 1


# -- how the model ended an answer it did not write ---------------------------------------------


def _choice(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return chunk(choices=[{"index": 0, "delta": delta, "finish_reason": finish}])


REFUSAL = "I'm sorry, I can't help with that."


@MODES
def test_a_refusal_ends_the_stream_with_a_typed_error_naming_it(mode: str) -> None:
    parts = [
        event(_choice({"role": "assistant", "content": None, "refusal": ""})),
        event(_choice({"content": None, "refusal": REFUSAL[:10]})),
        event(_choice({"content": None, "refusal": REFUSAL[10:]})),
        event(_choice({}, "stop")),
        DONE,
    ]
    out = run(mode, [Answer(parts), Answer(ANSWER)])
    assert len(out.bodies) == 1  # not asked again
    assert isinstance(out.error, OutputValidationError) and out.error.code == "refused"
    assert REFUSAL in out.error.message
    assert {e.code for e in out.error.errors} == {"missing"}
    assert out.events[-1].to_json()["error"]["code"] == "refused"


@MODES
def test_a_content_filter_is_not_asked_again_and_keeps_the_accepted_values(mode: str) -> None:
    parts = [event(chunk(HEAD)), event(chunk(finish="content_filter")), DONE]
    out = run(mode, [Answer(parts), Answer(ANSWER)])
    assert len(out.bodies) == 1
    assert isinstance(out.error, OutputValidationError) and out.error.code == "content_filter"
    assert out.error.partial["summary"] == TRIAGE.summary
    accepted_head(out)


@MODES
def test_a_content_filter_in_an_optional_value_ends_valid(mode: str) -> None:
    in_tags = TEXT[: bytes_before(TRIAGE, TAGS, 0, inside=True)]
    parts = [event(chunk(in_tags)), event(chunk(finish="content_filter")), DONE]
    out = run(mode, [Answer(parts), Answer(ANSWER)])
    assert out.error is None and len(out.bodies) == 1
    assert out.result.sentiment == TRIAGE.sentiment


@MODES
def test_a_tool_call_is_not_asked_again(mode: str) -> None:
    call = {"index": 0, "id": "t", "type": "function", "function": {"name": "f", "arguments": ""}}
    parts = [
        event(_choice({"role": "assistant", "tool_calls": [call]})),
        event(_choice({}, "tool_calls")),
        DONE,
    ]
    out = run(mode, [Answer(parts), Answer(ANSWER)])
    assert len(out.bodies) == 1
    assert isinstance(out.error, OutputValidationError) and out.error.code == "tool_calls"


# -- choices and usage -----------------------------------------------------------------------


CHOICES = {
    "choices-null": [event(chunk(choices=None)), *ANSWER],
    "choices-empty-with-usage": [*ANSWER[:2], event(chunk(choices=[], usage=USAGE)), DONE],
    "delta-missing": [event(chunk(choices=[{"index": 0, "finish_reason": None}])), *ANSWER],
    "content-null": [event(_choice({"role": "assistant", "content": None})), *ANSWER],
    "several-choices": [
        event(
            chunk(
                choices=[
                    {"index": 1, "delta": {"content": "summary: other\n"}, "finish_reason": None},
                    {"index": 0, "delta": {"content": TEXT}, "finish_reason": None},
                ]
            )
        ),
        event(
            chunk(
                choices=[
                    {"index": 1, "delta": {}, "finish_reason": "stop"},
                    {"index": 0, "delta": {}, "finish_reason": "stop"},
                ]
            )
        ),
        DONE,
    ],
}


@MODES
@pytest.mark.parametrize("name", sorted(CHOICES))
def test_chunks_without_text_or_with_other_choices_are_read_as_nothing(
    mode: str, name: str
) -> None:
    out = run(mode, [Answer(CHOICES[name])])
    assert out.error is None and out.result == TRIAGE
    assert len(out.bodies) == 1


@MODES
def test_usage_in_every_chunk_counts_the_last_one_once(mode: str) -> None:
    """vLLM's continuous usage stats: each chunk's usage so far; the last one counts."""
    parts = [
        event(chunk(TEXT[:20], usage={"prompt_tokens": 10, "completion_tokens": 2})),
        event(chunk(TEXT[20:], "stop", usage={"prompt_tokens": 10, "completion_tokens": 5})),
        event(chunk(choices=[], usage=USAGE)),
        DONE,
    ]
    out = run(mode, [Answer(parts)])
    assert out.result == TRIAGE
    assert [u.total_tokens for u in out.usage.requests] == [USAGE["total_tokens"]]
    assert out.usage.total.completion_tokens == USAGE["completion_tokens"]


# -- JSON that cannot be read ----------------------------------------------------------------


@MODES
def test_json_nested_too_deeply_is_a_transport_error(mode: str) -> None:
    deep = b"data: " + b"[" * 100_000 + b"]" * 100_000 + b"\n\n"
    out = run(mode, [Answer([event(chunk(HEAD)), deep, DONE])])
    assert type(out.error) is TransportError and "nested too deeply" in out.error.message
    accepted_head(out)


def _parts(body: bytes, size: int = 256 << 10) -> list[bytes]:
    return [body[i : i + size] for i in range(0, len(body), size)]


ENDLESS = {
    "line": b"data: " + b"x" * (2 << 20),
    "event": b"data: x\n" * (2 << 18),
    "comments": b": keep-alive\n" * (2 << 17),
}


@MODES
@pytest.mark.parametrize("name", sorted(ENDLESS))
def test_bytes_without_an_event_are_read_to_a_bounded_size(mode: str, name: str) -> None:
    limits = Limits(max_total_chars=1000)  # room for 1 MiB at least
    parts = [event(chunk(HEAD)), *_parts(ENDLESS[name]), DONE]
    out = run(mode, [Answer(parts)], limits=limits)
    assert type(out.error) is TransportError and "without an event" in out.error.message
    assert len(out.bodies) == 1
    accepted_head(out)


@MODES
def test_a_request_cut_short_keeps_the_usage_of_the_last_chunk_read(mode: str) -> None:
    """A server that sends the usage so far with every chunk (vLLM's continuous usage
    stats): a request the stream cuts short (here by early exit, the server still
    writing) reports the figures of the last chunk it read."""
    body = TEXT[: TEXT.index("tags:")]  # the required values, and no end line
    so_far = {"prompt_tokens": 10, "completion_tokens": 7}
    parts = [event(chunk(body, usage=so_far))]
    out = run(mode, [Answer(parts, stall=True)], early_exit=True)
    assert out.error is None and out.result == TRIAGE.model_copy(update={"tags": []})
    (usage,) = out.usage.requests
    assert (usage.prompt_tokens, usage.completion_tokens) == (10, 7)
