"""Requests a deployed gateway and route helper meet besides the usual ones: clients
that accept JSON only, ``Last-Event-ID`` headers that are huge, not ASCII or given
twice, ``HEAD``. Real HTTP on 127.0.0.1 (uvicorn, httpx, the scripted upstream)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import openai
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from slotflight.testing import AppServer, Reply, ScriptedServer
from slotflight.web import create_app, slot_event_response
from tests.test_web_deploy_proxy import triage_stream
from tests.web_support import TRIAGE_BODY, event_ids, triage_frames


@pytest.fixture
async def upstream() -> AsyncIterator[ScriptedServer]:
    async with ScriptedServer() as server:
        yield server


@pytest.fixture
async def gateway(upstream: ScriptedServer) -> AsyncIterator[httpx.AsyncClient]:
    async with (
        AppServer(create_app(upstream.base_url)) as server,
        httpx.AsyncClient(base_url=server.url, timeout=30) as client,
    ):
        yield client


async def finished_stream(upstream: ScriptedServer, client: httpx.AsyncClient) -> tuple[str, int]:
    """A stream read to its end: its Location and how many messages it has."""
    upstream.add(Reply(triage_frames(), chunks=6))
    response = await client.post("/v1/slot-streams", json=TRIAGE_BODY)
    assert response.status_code == 200
    return response.headers["location"], len(event_ids(response.text))


@pytest.mark.parametrize(
    "accept",
    ["application/json", "application/json, text/html;q=0.9", "text/event-stream;q=0"],
)
async def test_a_client_that_accepts_no_event_stream_starts_no_model_request(
    upstream: ScriptedServer, gateway: httpx.AsyncClient, accept: str
) -> None:
    # It was answered with a stream it cannot read, and the model was asked all the same.
    location, _ = await finished_stream(upstream, gateway)
    upstream.add(Reply(triage_frames(), chunks=6))
    posted = await gateway.post("/v1/slot-streams", json=TRIAGE_BODY, headers={"accept": accept})
    resumed = await gateway.get(location, headers={"accept": accept, "last-event-id": "1"})
    for response in (posted, resumed):
        assert response.status_code == 406
        assert response.headers["content-type"] == "application/json"
        assert response.json()["error"]["code"] == "not_acceptable"
    assert len(upstream.requests) == 1  # the first stream's only


@pytest.mark.parametrize(
    "accept",
    [
        "text/event-stream",
        "*/*",
        "text/*",
        "application/json, text/plain, */*",
        "application/json, text/event-stream;q=0.5",
        "TEXT/EVENT-STREAM; charset=utf-8",
        "text/event-stream;q=not-a-number",
        "",
    ],
)
async def test_a_client_that_accepts_an_event_stream_gets_one(
    upstream: ScriptedServer, gateway: httpx.AsyncClient, accept: str
) -> None:
    upstream.add(Reply(triage_frames(), chunks=6))
    response = await gateway.post("/v1/slot-streams", json=TRIAGE_BODY, headers={"accept": accept})
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")


@pytest.mark.parametrize(
    "headers",
    [
        [("last-event-id", "3"), ("last-event-id", "30")],
        [("last-event-id", "3, 30")],
        [("last-event-id", "9" * 5000)],
        [("last-event-id", "1" * 19)],
        [("last-event-id", "\u0663".encode())],  # ARABIC-INDIC DIGIT THREE
        [("last-event-id", b"\xff\xfe")],
        [("last-event-id", "-3")],
        [("last-event-id", "+3")],
    ],
    ids=["repeated", "folded", "huge", "19-digits", "unicode-digit", "not-utf8", "neg", "plus"],
)
async def test_a_last_event_id_that_is_not_one_message_id_is_refused(
    upstream: ScriptedServer, gateway: httpx.AsyncClient, headers: list[tuple[str, Any]]
) -> None:
    # Given twice with different values, the first one was taken, where a proxy that
    # folds repeated headers into one ("3, 30") had it refused.
    location, _ = await finished_stream(upstream, gateway)
    response = await gateway.get(location, headers=headers)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_last_event_id"


async def test_a_query_last_event_id_given_twice_with_different_values_is_refused(
    upstream: ScriptedServer, gateway: httpx.AsyncClient
) -> None:
    location, _ = await finished_stream(upstream, gateway)
    response = await gateway.get(f"{location}?last_event_id=3&last_event_id=5")
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_last_event_id"


async def test_a_last_event_id_repeated_with_one_value_resumes_after_it(
    upstream: ScriptedServer, gateway: httpx.AsyncClient
) -> None:
    location, count = await finished_stream(upstream, gateway)
    response = await gateway.get(location, headers=[("last-event-id", "3"), ("last-event-id", "3")])
    query = await gateway.get(f"{location}?last_event_id=3&last_event_id=3")
    for answer in (response, query):
        assert answer.status_code == 200
        assert event_ids(answer.text) == list(range(4, count + 1))


async def test_head_on_the_gateway_stream_sends_headers_only(
    upstream: ScriptedServer, gateway: httpx.AsyncClient
) -> None:
    location, _ = await finished_stream(upstream, gateway)
    response = await gateway.head(location)
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/event-stream; charset=utf-8"
    assert response.content == b""
    # The connection serves the next request: the response ended.
    assert (await gateway.get("/health")).status_code == 200


class Recorded:
    """A slot stream that records whether it was read and closed."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.read = False
        self.closed = False

    def __aiter__(self) -> Recorded:
        return self

    async def __anext__(self) -> Any:
        self.read = True
        return await self.stream.__anext__()

    async def aclose(self) -> None:
        self.closed = True
        await self.stream.aclose()


async def test_head_on_a_route_helper_closes_the_stream_unread(upstream: ScriptedServer) -> None:
    # sse-starlette answers HEAD without reading the body: the stream was left open.
    client = openai.AsyncOpenAI(base_url=upstream.base_url, api_key="test", max_retries=0)
    streams: list[Recorded] = []

    async def triage(request: Request) -> Response:
        streams.append(Recorded(triage_stream(client)))
        return slot_event_response(streams[-1], request=request)

    app = Starlette(routes=[Route("/triage", triage, methods=["GET"])])
    upstream.add(Reply(triage_frames(), chunks=6))
    async with AppServer(app) as server, httpx.AsyncClient(timeout=30) as http:
        head = await http.head(f"{server.url}/triage")
        got = await http.get(f"{server.url}/triage")
    assert head.status_code == 200 and head.content == b""
    assert head.headers["content-type"] == "text/event-stream; charset=utf-8"
    assert streams[0].closed and not streams[0].read
    assert json.loads(got.text.split("data: ")[-1].split("\r\n")[0])["type"] == "done"
    assert streams[1].read and streams[1].closed
    assert len(upstream.requests) == 1  # the GET's only
