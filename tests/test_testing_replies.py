"""slotflight.testing.ScriptedServer: log probabilities, the recorded size of error
answers, and replies refused at construction, through the real openai client over HTTP."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from openai import OpenAI

from slotflight.testing import Reply, ScriptedServer, Usage

TOKENS = [("Sun", -0.1), ("ny", -0.2), (" and", -0.3), (" warm", -0.4)]


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as running:
        yield running


def client_for(server: ScriptedServer) -> OpenAI:
    return OpenAI(base_url=server.base_url, api_key="test", max_retries=0)


def token_list(logprobs: Any) -> list[tuple[str, float]]:
    return [(entry.token, entry.logprob) for entry in logprobs.content]


def test_a_whole_completion_carries_every_token_when_asked(server: ScriptedServer) -> None:
    server.add(Reply(logprobs=TOKENS), Reply(logprobs=TOKENS))
    client = client_for(server)
    asked = client.chat.completions.create(model="m", messages=[], logprobs=True)
    assert asked.choices[0].message.content == "Sunny and warm"
    assert token_list(asked.choices[0].logprobs) == TOKENS
    assert asked.choices[0].logprobs.content[0].bytes == list(b"Sun")
    not_asked = client.chat.completions.create(model="m", messages=[])
    assert not_asked.choices[0].logprobs is None


def test_a_chunk_cut_short_carries_the_tokens_sent_whole(server: ScriptedServer) -> None:
    # one chunk of the whole text, cut inside " warm": the first three tokens were sent
    cut = len("Sunny and wa")
    server.add(Reply(logprobs=TOKENS, chunks=["Sunny and warm"], drop_after_bytes=cut))
    stream = client_for(server).chat.completions.create(
        model="m", messages=[], logprobs=True, stream=True
    )
    chunks = []
    with pytest.raises(openai.APIConnectionError):
        chunks.extend(stream)
    content = [c for c in chunks if c.choices and c.choices[0].delta.content]
    assert [c.choices[0].delta.content for c in content] == ["Sunny and wa"]
    assert token_list(content[0].choices[0].logprobs) == TOKENS[:3]


def test_error_answers_record_the_bytes_they_sent(server: ScriptedServer) -> None:
    with httpx.Client(base_url=server.url) as http:
        missing = http.get("/v1/nothing")
        no_reply = http.post("/v1/chat/completions", json={"model": "m", "messages": []})
        models = http.get("/v1/models")
    assert [missing.status_code, no_reply.status_code, models.status_code] == [404, 500, 200]
    sent = [len(r.content) for r in (missing, no_reply, models)]
    assert [r.bytes_sent for r in server.requests] == sent
    assert json.loads(no_reply.content)["error"]["message"] == server.request(1).error


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"text": "abc", "delay": math.nan}, ValueError),
        ({"text": "abc", "chunk_delay": math.inf}, ValueError),
        ({"text": "abc", "drop_after_bytes": 1.5}, TypeError),
        ({"text": "abc", "stall_after_bytes": True}, TypeError),
        ({"status": 429.0}, TypeError),
        ({"text": "abc", "retry_after": 1}, ValueError),
        ({"text": "abc", "error_message": "never sent"}, ValueError),
        ({"text": "abc", "usage": (1, 2)}, TypeError),
    ],
)
def test_replies_that_could_not_be_sent_as_written_are_refused(
    options: dict[str, Any], error: type[Exception]
) -> None:
    with pytest.raises(error):
        Reply(**options)


def test_valid_numbers_are_still_taken() -> None:
    reply = Reply("abc", delay=0, chunk_delay=0.5, drop_after_bytes=0, usage=Usage(1, 2))
    assert reply.cut_after_bytes == 0
    assert Reply(status=429, retry_after=0, error_message="slow down").status == 429
