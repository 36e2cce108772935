"""The recording of slotflight.testing.ScriptedServer: snapshots are independent of the
recording and of each other, and a hostile request body is recorded, not fatal."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from openai import OpenAI

from slotflight.testing import RecordedRequest, Reply, ScriptedServer
from tests.test_testing_server import MESSAGES


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as running:
        yield running


def _ask(server: ScriptedServer) -> None:
    client = OpenAI(base_url=server.base_url, api_key="test", max_retries=0)
    client.chat.completions.create(
        model="scripted", messages=MESSAGES, extra_headers={"x-trace": "abc"}
    )


def _mutate(request: RecordedRequest) -> None:
    request.body["messages"].append({"role": "user", "content": "injected"})
    request.body["messages"][0]["content"] = "changed"
    request.body["model"] = "other"


def _assert_untouched(request: RecordedRequest) -> None:
    assert request.headers["x-trace"] == "abc"
    assert request.body["messages"] == MESSAGES
    assert request.body["model"] == "scripted"
    assert request.body == json.loads(request.raw_body)


def test_a_snapshot_s_headers_are_read_only(server: ScriptedServer) -> None:
    server.add("ok")
    _ask(server)
    snapshot = server.requests[0]
    with pytest.raises(TypeError):
        snapshot.headers["x-trace"] = "changed"  # type: ignore[index]
    assert server.request(0).headers["x-trace"] == "abc"


def test_changing_a_snapshot_s_body_changes_neither_the_recording_nor_other_snapshots(
    server: ScriptedServer,
) -> None:
    server.add("ok")
    _ask(server)
    kept = server.request(0)
    _mutate(server.requests[0])
    _assert_untouched(server.request(0))
    _assert_untouched(server.requests[0])
    _assert_untouched(kept)
    _mutate(server.request(0))
    _assert_untouched(server.requests[0])
    _assert_untouched(kept)


def test_snapshots_from_waiting_are_independent_of_the_recording(
    server: ScriptedServer,
) -> None:
    server.add("ok")
    _ask(server)
    _mutate(server.wait_for_request(0))
    _mutate(server.wait_for(lambda requests: len(requests) == 1)[0])

    def mutating(requests: list[RecordedRequest]) -> bool:
        _mutate(requests[0])
        return True

    server.wait_for(mutating)
    _assert_untouched(server.request(0))


def test_a_match_that_changes_the_body_does_not_change_the_recording(
    server: ScriptedServer,
) -> None:
    def changing(body: Any) -> bool:
        body["messages"].clear()
        body["model"] = "other"
        return True

    server.add(Reply("ok", match=changing))
    _ask(server)
    _assert_untouched(server.request(0))


def test_a_deeply_nested_body_is_copied_whole(server: ScriptedServer) -> None:
    depth = 500  # within what the JSON parser accepts
    nested: Any = "leaf"
    for _ in range(depth):
        nested = [nested, {"k": 1}]
    body = {"model": "scripted", "messages": MESSAGES, "extra": nested}
    server.add("ok")
    httpx.post(f"{server.base_url}/chat/completions", json=body, timeout=30).raise_for_status()
    recorded = server.request(0)
    assert recorded.body == body
    recorded.body["extra"][0][0][1]["k"] = 2
    assert server.request(0).body == body


def test_a_body_nested_past_the_parser_is_answered_400_and_recorded(
    server: ScriptedServer,
) -> None:
    raw = b"[" * 100_000
    server.add("ok")
    response = httpx.post(
        f"{server.base_url}/chat/completions",
        content=raw,
        headers={"content-type": "application/json"},
        timeout=30,
    )
    assert response.status_code == 400
    recorded = server.wait_for_request(0)
    assert recorded.body is None
    assert recorded.raw_body == raw
    assert recorded.status == 400
    assert server.remaining == 1
