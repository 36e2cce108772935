"""Stream shapes of OpenAI-compatible servers through the gateway's own chunk reader
(``LeanChunkClient``), over real HTTP: blank ``data:`` keep-alives, a refusal, and
bytes that never make an event."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from slotflight.testing import AppServer
from slotflight.web import _upstream, create_app
from tests.client_support import TRIAGE, Triage
from tests.test_client_upstream_shapes_sse import (
    ANSWER,
    DONE,
    HEAD,
    REFUSAL,
    TEXT,
    Answer,
    Upstream,
    _choice,
    chunk,
    event,
)


def through_gateway(answers: list[Answer]) -> tuple[list[dict[str, Any]], Upstream]:
    """The messages of one slot stream of ``Triage`` through the gateway."""
    upstream = Upstream(answers)
    with (
        AppServer(upstream, lifespan="off") as model,
        AppServer(create_app(f"{model.url}/v1")) as gateway,
    ):
        body = {
            "model": "m",
            "messages": [{"role": "user", "content": "x"}],
            "schema": Triage.model_json_schema(),
        }
        answer = httpx.post(f"{gateway.url}/v1/slot-streams", json=body, timeout=60)
    lines = answer.text.splitlines()
    return [json.loads(line[6:]) for line in lines if line.startswith("data: ")], upstream


def test_blank_data_keepalives_are_skipped() -> None:
    parts = [b"data:\n\n", event(chunk(TEXT[:20])), b"data: \n\n", *ANSWER[1:]]
    messages, upstream = through_gateway([Answer(parts)])
    assert messages[-1]["type"] == "done"
    assert Triage.model_validate(messages[-1]["state"]) == TRIAGE
    assert len(upstream.bodies) == 1


def test_a_refusal_is_not_asked_again() -> None:
    parts = [
        event(_choice({"role": "assistant", "content": None, "refusal": REFUSAL})),
        event(_choice({}, "stop")),
        DONE,
    ]
    messages, upstream = through_gateway([Answer(parts), Answer(ANSWER)])
    assert len(upstream.bodies) == 1
    assert messages[-1]["type"] == "error"
    assert messages[-1]["error"]["code"] == "refused"


#: What would read as chunks, and the stream end ``done``, were it not for the bound.
ENDLESS = {
    "padded-chunk": event(chunk(TEXT[len(HEAD) :], "stop", pad="x" * (3 << 20))),
    "comments": b": keep-alive\n" * (3 << 18) + event(chunk(TEXT[len(HEAD) :], "stop")),
}


@pytest.mark.parametrize("name", sorted(ENDLESS))
def test_bytes_without_an_event_are_read_to_a_bounded_size(
    monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    monkeypatch.setattr(_upstream, "EVENT_LIMIT", 1 << 20)
    size = 256 << 10
    endless = ENDLESS[name]
    parts = [event(chunk(HEAD)), *(endless[i : i + size] for i in range(0, len(endless), size))]
    messages, upstream = through_gateway([Answer([*parts, DONE])])
    assert messages[-1]["type"] == "error"
    assert messages[-1]["error"]["code"] == "transport_error"
    assert len(upstream.bodies) == 1
    assert messages[-1]["state"]["summary"] == TRIAGE.summary  # what came before is kept


def test_an_error_object_in_the_stream_keeps_its_status_and_not_its_text() -> None:
    failure = {"error": {"message": "key sk-secret rejected upstream", "code": 502}}
    parts = [event(chunk(HEAD)), event(failure)]
    messages, upstream = through_gateway([Answer(parts)] * 3)
    assert len(upstream.bodies) == 3  # a 502 is a drop: the rest asked for again
    error = messages[-1]["error"]
    assert error["code"] == "upstream_status" and error["status"] == 502
    assert "sk-secret" not in json.dumps(messages)
    assert messages[-1]["state"]["summary"] == TRIAGE.summary


def test_a_transport_error_never_takes_a_status_from_the_servers_text() -> None:
    failure = {"error": {"message": "bad things (code 418)", "code": "weird"}}
    messages, _ = through_gateway([Answer([event(chunk(HEAD)), event(failure)])])
    error = messages[-1]["error"]
    assert error["code"] == "transport_error" and "status" not in error
