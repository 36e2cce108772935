"""Closed choices on the embedded server: each closed field's options scored whole
where its line begins, the choice calibrated against a content-free answer and written
(see ``slotflight/local/_closed_choice.py``), over real HTTP on the real model."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any, Literal

import httpx
import pytest
from openai import OpenAI
from pydantic import BaseModel, Field

from tests.local_support import require_local_model

require_local_model()

import slotflight  # noqa: E402
from slotflight.local import LocalServer, start_local_server  # noqa: E402
from slotflight.local._closed_choice import calibrated_choice, calibrated_figures  # noqa: E402
from slotflight.plan.compiler import compile as compile_plan  # noqa: E402
from slotflight.prompting.prompt import prompt  # noqa: E402
from slotflight.syntax import get_syntax  # noqa: E402
from slotflight.syntax.closed_choices import (  # noqa: E402
    closed_choices,
    closed_choices_field,
    content_free_messages,
)

pytestmark = pytest.mark.local_model


class Ticket(BaseModel):
    summary: str = Field(description="One-sentence summary", max_length=200)
    sentiment: Literal["positive", "neutral", "negative"]
    priority: int = Field(ge=1, le=5, description="1 lowest, 5 urgent")
    refund: bool


USER = "Ticket: the blender arrived broken and I want my money back. Very angry!"
PLAN = compile_plan(Ticket)
SYNTAX = get_syntax("v4")


@pytest.fixture(scope="module")
def server() -> Iterator[LocalServer]:
    with start_local_server(seed=5) as running:
        yield running


def _body(user: str = USER, **extra: Any) -> dict[str, Any]:
    text = prompt(PLAN, SYNTAX, grammar=True)
    messages = [{"role": "system", "content": text}, {"role": "user", "content": user}]
    return {
        "model": "local",
        "messages": messages,
        "grammar": SYNTAX.grammar(PLAN, max_string_chars=120),
        "max_tokens": 200,
        "temperature": 0.0,
        "seed": 2,
        "closed_choices": closed_choices_field(
            closed_choices(PLAN, SYNTAX), content_free_messages(messages)
        ),
        **extra,
    }


def _post(server: LocalServer, body: dict[str, Any]) -> dict[str, Any]:
    answer = httpx.post(f"{server.base_url}/chat/completions", json=body, timeout=600)
    assert answer.status_code == 200, answer.text
    data: dict[str, Any] = answer.json()
    return data


def _value_line(text: str, after: str) -> str:
    return next(line for line in text.splitlines() if line.startswith(after))[len(after) :]


def test_each_closed_field_writes_its_calibrated_option(server: LocalServer) -> None:
    body = _body(user="Ticket: the kettle works fine, thanks, no refund needed.")
    first = _post(server, body)
    again = _post(server, body)
    text = first["choices"][0]["message"]["content"]
    report = first["closed_choices"]
    assert [r["after"] for r in report] == ["sentiment:", "priority:", "refund:"]
    for field, closed in zip(report, closed_choices(PLAN, SYNTAX), strict=True):
        figures, prior = field["figures"], field["prior"]
        assert set(figures) == set(prior) == set(closed.options)
        assert math.isclose(sum(figures.values()), 1.0) and math.isclose(sum(prior.values()), 1.0)
        # the written value is the option with the best probability over its prior
        assert field["chosen"] == calibrated_choice(figures, prior)
        assert _value_line(text, field["after"]) == field["chosen"]
        assert all(v is not None and v < 0 for v in field["logprobs"].values())
    # The content-free pass ran for the first request only, and was counted with it.
    assert [r["prior"] for r in again["closed_choices"]] == [r["prior"] for r in report]
    extra = first["usage"]["prompt_tokens"] - again["usage"]["prompt_tokens"]
    assert extra > 0
    assert first["usage"]["completion_tokens"] > again["usage"]["completion_tokens"]


def test_a_chosen_option_is_reported_with_its_calibrated_probability(
    server: LocalServer,
) -> None:
    answer = _post(server, _body(logprobs=True))
    tokens = answer["choices"][0]["logprobs"]["content"]
    text = "".join(t["token"] for t in tokens)
    assert text == answer["choices"][0]["message"]["content"]
    for field in answer["closed_choices"]:
        # the tokens after the field's name, up to its line's end: the chosen option
        start = text.index("\n" + field["after"]) + 1 + len(field["after"])
        at, reported, written = 0, [], ""
        for token in tokens:
            if at >= start:
                if "\n" in token["token"]:
                    break
                written += token["token"]
                reported.append(token["logprob"])
            at += len(token["token"])
        assert written == field["chosen"]
        assert field["calibrated"] == calibrated_figures(field["figures"], field["prior"])
        # the first token carries the option's calibrated probability, the rest nothing
        assert reported[0] == pytest.approx(math.log(field["calibrated"][field["chosen"]]))
        assert reported[1:] == [0.0] * (len(reported) - 1)
    # the tokens around the choices keep the model's own figures
    others = [t["logprob"] for t in tokens if t["logprob"] != 0.0]
    assert others and all(v < 0 for v in others)


def test_options_the_grammar_does_not_allow_change_nothing_but_their_figures(
    server: LocalServer,
) -> None:
    body = _body()
    plain = {k: v for k, v in body.items() if k != "closed_choices"}
    body["closed_choices"]["fields"] = [
        {"after": "sentiment:", "options": [" furious", " calm"], "end": ""}
    ]
    odd = _post(server, body)
    expected = _post(server, plain)["choices"][0]["message"]["content"]
    assert odd["closed_choices"][0]["chosen"] in (" furious", " calm")
    # the grammar refused the forced token: the answer is the one without closed choices
    assert odd["choices"][0]["message"]["content"] == expected
    assert "closed_choices" not in _post(server, plain)


def test_a_streamed_answer_carries_the_choices_on_its_last_chunk(server: LocalServer) -> None:
    body = _body(stream=True)
    chunks = []
    with httpx.stream(
        "POST", f"{server.base_url}/chat/completions", json=body, timeout=600
    ) as answer:
        for line in answer.iter_lines():
            if line.startswith("data: {"):
                chunks.append(json.loads(line[6:]))
    carrying = [c for c in chunks if "closed_choices" in c]
    assert len(carrying) == 1 and carrying[0]["choices"][0]["finish_reason"] is not None
    assert [r["after"] for r in carrying[0]["closed_choices"]] == [
        "sentiment:",
        "priority:",
        "refund:",
    ]


def test_the_sdk_calibrates_by_default_with_the_llama_cpp_grammar(server: LocalServer) -> None:
    client = OpenAI(base_url=server.base_url, api_key="local", max_retries=0)
    finals = {}
    for calibrate in (None, False):
        with slotflight.stream(
            client,
            model=server.model,
            messages=[{"role": "user", "content": USER}],
            output=Ticket,
            grammar="llama.cpp",
            grammar_max_string_chars=120,
            max_tokens=200,
            temperature=0.0,
            seed=2,
            calibrate=calibrate,
        ) as s:
            finals[calibrate] = s.final()
            requests = s.usage.requests
        assert isinstance(finals[calibrate], Ticket) and requests
    # the same request through HTTP, closed choices named: the values the SDK got
    sent = _post(
        server,
        {
            **_body(),
            "messages": [
                {"role": "system", "content": prompt(PLAN, SYNTAX, grammar=True)},
                {"role": "user", "content": USER},
            ],
        },
    )
    chosen = {r["after"].rstrip(":"): r["chosen"].strip() for r in sent["closed_choices"]}
    calibrated = finals[None].model_dump(mode="json")
    assert {k: json.dumps(calibrated[k]).strip('"') for k in chosen} == chosen


class Mood(BaseModel):
    sentiment: Literal["positive", "neutral", "negative"]
    summary: str = Field(description="One-sentence summary", max_length=200)


def test_a_closed_first_field_is_chosen_right_after_the_opening(server: LocalServer) -> None:
    plan = compile_plan(Mood)
    messages = [
        {"role": "system", "content": prompt(plan, SYNTAX, grammar=True)},
        {"role": "user", "content": USER},
    ]
    body = {
        **_body(),
        "messages": messages,
        "grammar": SYNTAX.grammar(plan, max_string_chars=120),
        "closed_choices": closed_choices_field(
            closed_choices(plan, SYNTAX), content_free_messages(messages)
        ),
    }
    answer = _post(server, body)
    text = answer["choices"][0]["message"]["content"]
    (field,) = answer["closed_choices"]
    # "sentiment:" was read with the prompt; the field was seen where its line began
    assert field["after"] == "sentiment:" and field["chosen"] is not None
    assert text.startswith("sentiment:" + field["chosen"] + "\n")
