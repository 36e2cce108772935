"""The text a grammar fixes at the start of every answer is read with the prompt and
streamed first (``slotflight/local/_opening.py``), over real HTTP on the real model."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, Literal

import httpx
import pytest
from pydantic import BaseModel, Field

from tests.local_support import require_local_model

require_local_model()

from slotflight.local import LocalServer, start_local_server  # noqa: E402
from slotflight.plan.compiler import compile as compile_plan  # noqa: E402
from slotflight.prompting.prompt import prompt  # noqa: E402
from slotflight.syntax import get_syntax  # noqa: E402

pytestmark = pytest.mark.local_model


class Ticket(BaseModel):
    summary: str = Field(description="One-sentence summary", max_length=200)
    sentiment: Literal["positive", "neutral", "negative"]


PLAN = compile_plan(Ticket)
SYNTAX = get_syntax("v4")
USER = "Ticket: the blender arrived broken and I want my money back."


@pytest.fixture(scope="module")
def server() -> Iterator[LocalServer]:
    with start_local_server(seed=5) as running:
        yield running


def _body(**extra: Any) -> dict[str, Any]:
    return {
        "model": "local",
        "messages": [
            {"role": "system", "content": prompt(PLAN, SYNTAX, grammar=True)},
            {"role": "user", "content": USER},
        ],
        "grammar": SYNTAX.grammar(PLAN, max_string_chars=120),
        "max_tokens": 80,
        "temperature": 0.0,
        **extra,
    }


def _post(server: LocalServer, body: dict[str, Any]) -> dict[str, Any]:
    answer = httpx.post(f"{server.base_url}/chat/completions", json=body, timeout=600)
    assert answer.status_code == 200, answer.text
    data: dict[str, Any] = answer.json()
    return data


def _stream(server: LocalServer, body: dict[str, Any]) -> list[dict[str, Any]]:
    chunks = []
    with httpx.stream(
        "POST", f"{server.base_url}/chat/completions", json={**body, "stream": True}, timeout=600
    ) as answer:
        assert answer.status_code == 200
        for line in answer.iter_lines():
            if line.startswith("data: {"):
                chunks.append(json.loads(line[6:]))
    return chunks


def test_the_opening_arrives_whole_first_and_is_counted_as_written(server: LocalServer) -> None:
    chunks = _stream(server, _body(logprobs=True, stream_options={"include_usage": True}))
    deltas = [c["choices"][0]["delta"].get("content") for c in chunks if c["choices"]]
    texts = [d for d in deltas if d]
    # "summary: " is fixed: all of it but the space (which may join the value's first
    # word) comes in one piece, before anything the model sampled
    assert texts[0] == "summary:"
    answer = "".join(texts)
    assert answer.startswith("summary: ") and "\nsentiment: " in answer
    tokens = [
        t
        for c in chunks
        if c["choices"] and c["choices"][0].get("logprobs")
        for t in c["choices"][0]["logprobs"]["content"]
    ]
    assert "".join(t["token"] for t in tokens) == answer
    # the grammar left no other token: probability 1; the model's own figures after
    opening = [t for t in tokens[:2]]
    assert "".join(t["token"] for t in opening) == "summary:"
    assert [t["logprob"] for t in opening] == [0.0, 0.0]
    assert tokens[2]["logprob"] < 0
    usage = next(c["usage"] for c in chunks if c.get("usage"))
    assert usage["completion_tokens"] == len(tokens) + 1  # and the end-of-turn token


def test_a_repeated_request_reuses_its_prompt_not_more(server: LocalServer) -> None:
    first = _post(server, _body())
    again = _post(server, _body())
    assert again["choices"][0]["message"]["content"] == first["choices"][0]["message"]["content"]
    usage = again["usage"]
    assert usage["prompt_tokens"] == first["usage"]["prompt_tokens"]
    assert 0 < usage["prompt_tokens_details"]["cached_tokens"] <= usage["prompt_tokens"]


def test_a_stop_sequence_the_opening_holds_is_found_where_it_is(server: LocalServer) -> None:
    answer = _post(server, _body(stop=["ary"]))
    # read with the prompt, the opening would have hidden the stop: it is sampled
    assert answer["choices"][0]["message"]["content"] == "summ"
    assert answer["choices"][0]["finish_reason"] == "stop"


@pytest.mark.parametrize(("max_tokens", "sampled"), [(1, 1), (2, 2), (3, 3)])
def test_max_tokens_counts_the_opening(server: LocalServer, max_tokens: int, sampled: int) -> None:
    answer = _post(server, _body(max_tokens=max_tokens, logprobs=True))
    content = answer["choices"][0]["message"]["content"]
    assert answer["choices"][0]["finish_reason"] == "length"
    assert answer["usage"]["completion_tokens"] == sampled
    assert len(answer["choices"][0]["logprobs"]["content"]) == sampled
    assert "summary:".startswith(content) or content.startswith("summary:")
