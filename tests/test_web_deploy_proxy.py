"""The gateway and the route helper behind what a deployment puts in front of them: a
reverse proxy that publishes them under a path prefix, caches and compressing
intermediaries, Starlette's GZip and CORS middleware, HTTP/1.0 clients. Real HTTP on
127.0.0.1 throughout (uvicorn, httpx, the scripted upstream)."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator
from typing import Any

import httpx
import openai
import pytest
from httpx_sse import aconnect_sse
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.middleware.gzip import GZipMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from slotflight.cli import build_parser
from slotflight.client.async_stream import astream
from slotflight.testing import AppServer, Reply, ScriptedServer
from slotflight.web import create_app, slot_event_response
from tests.web_support import (
    TRIAGE_BODY,
    TRIAGE_SCHEMA,
    TRIAGE_VALUE,
    apply_messages,
    gateway_process,
    triage_frames,
)

PREFIX = "/api"


@pytest.fixture
async def upstream() -> AsyncIterator[ScriptedServer]:
    async with ScriptedServer() as server:
        yield server


def prefix_proxy(target: str, prefix: str = PREFIX) -> ASGIApp:
    """A reverse proxy that publishes ``target`` under ``prefix``: it forwards
    ``{prefix}/x`` to ``{target}/x`` (the prefix removed, as nginx's ``location
    /api/ { proxy_pass http://gateway/; }`` does) and streams the answer back."""
    client = httpx.AsyncClient(base_url=target, timeout=30)

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await client.aclose()
            await send({"type": "lifespan.shutdown.complete"})
            return
        path: str = scope["path"]
        if not path.startswith(prefix + "/"):
            await JSONResponse({"proxy": "no such route"}, 404)(scope, receive, send)
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        query = scope["query_string"].decode()
        request = client.build_request(
            scope["method"],
            path.removeprefix(prefix) + (f"?{query}" if query else ""),
            headers=[(k, v) for k, v in scope["headers"] if k != b"host"],
            content=body,
        )
        answer = await client.send(request, stream=True)
        hop = {"transfer-encoding", "connection", "content-length", "keep-alive"}
        response = StreamingResponse(
            answer.aiter_raw(),
            answer.status_code,
            headers={k: v for k, v in answer.headers.items() if k.lower() not in hop},
            background=BackgroundTask(answer.aclose),
        )
        await response(scope, receive, send)

    return app


async def read_ids(source: Any, limit: int) -> list[int]:
    ids = []
    async for message in source.aiter_sse():
        ids.append(int(message.id))
        if len(ids) == limit:
            break
    return ids


async def test_behind_a_prefix_proxy_location_names_where_to_reconnect(
    upstream: ScriptedServer,
) -> None:
    # The page and the JS client resolve Location against the URL they posted to; the
    # gateway, published under /api, named a path without it, which the proxy does not
    # serve: a dropped connection could not be resumed.
    upstream.add(Reply(triage_frames(), chunks=4, chunk_delay=0.01))
    async with (
        gateway_process(upstream, "--root-path", PREFIX) as gateway,
        AppServer(prefix_proxy(gateway.url)) as proxy,
        httpx.AsyncClient(timeout=30) as client,
    ):
        posted = f"{proxy.url}{PREFIX}/v1/slot-streams"
        async with aconnect_sse(client, "POST", posted, json=TRIAGE_BODY) as source:
            location = source.response.headers["location"]
            head = await read_ids(source, 3)
        again = httpx.URL(posted).join(location)
        async with aconnect_sse(
            client, "GET", str(again), headers={"Last-Event-ID": "3"}
        ) as source:
            assert source.response.status_code == 200
            rest = [message async for message in source.aiter_sse()]
        # Routes are still served without the prefix (health checks on the port).
        direct = await client.get(f"{gateway.url}/health")
    stream_id = location.split("/")[-2]
    assert location == f"{PREFIX}/v1/slot-streams/{stream_id}/events"
    assert head == [1, 2, 3]
    assert [int(m.id) for m in rest] == list(range(4, 4 + len(rest)))
    assert rest[-1].event == "done"
    assert json.loads(rest[-1].data)["state"] == TRIAGE_VALUE
    assert direct.status_code == 200


@pytest.mark.parametrize("value", ["api", "/api/", "/a b", "/api?x=1", "//api"])
def test_serve_refuses_a_root_path_that_is_not_a_path_prefix(
    capsys: pytest.CaptureFixture[str], value: str
) -> None:
    argv = ["serve", "--upstream-base-url", "http://127.0.0.1:9/v1", f"--root-path={value}"]
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(argv)
    assert exited.value.code == 2
    assert "argument --root-path: expected a path such as /api" in capsys.readouterr().err


def triage_stream(client: openai.AsyncOpenAI) -> Any:
    """A one-attempt slot stream of the triage schema from the scripted upstream."""
    return astream(
        client,
        model="scripted",
        messages=[{"role": "user", "content": "x"}],
        output=TRIAGE_SCHEMA,
        max_attempts=1,
    )


def helper_app(upstream: ScriptedServer) -> Starlette:
    client = openai.AsyncOpenAI(base_url=upstream.base_url, api_key="test", max_retries=0)

    async def triage(request: Request) -> Response:
        return slot_event_response(triage_stream(client), request=request)

    return Starlette(routes=[Route("/triage", triage, methods=["GET", "POST"])])


def assert_stream_headers(headers: httpx.Headers) -> None:
    cache = {part.strip() for part in headers["cache-control"].split(",")}
    assert {"no-store", "no-transform"} <= cache
    assert headers["x-accel-buffering"] == "no"
    assert headers["content-type"] == "text/event-stream; charset=utf-8"
    assert "content-length" not in headers


async def test_stream_headers_keep_caches_buffers_and_compression_out(
    upstream: ScriptedServer,
) -> None:
    # Without no-transform, an intermediary that compresses text (as Express's
    # compression and several CDNs do unless told not to) holds messages back until its
    # compressor's buffer fills.
    upstream.add(Reply(triage_frames(), chunks=6), Reply(triage_frames(), chunks=6))
    async with (
        AppServer(create_app(upstream.base_url)) as gateway,
        AppServer(helper_app(upstream)) as helper,
        httpx.AsyncClient(base_url=gateway.url, timeout=30) as client,
    ):
        async with aconnect_sse(client, "POST", "/v1/slot-streams", json=TRIAGE_BODY) as source:
            posted = source.response.headers
            location = posted["location"]
            await read_ids(source, 2)
        async with aconnect_sse(client, "GET", location, headers={"Last-Event-ID": "1"}) as source:
            resumed = source.response.headers
            await read_ids(source, 1)
        async with aconnect_sse(client, "POST", f"{helper.url}/triage") as source:
            routed = source.response.headers
            await read_ids(source, 1)
    for headers in (posted, resumed, routed):
        assert_stream_headers(headers)


async def test_a_cache_control_of_the_caller_is_kept(upstream: ScriptedServer) -> None:
    async def route(request: Request) -> Response:
        async def nothing() -> AsyncIterator[Any]:
            return
            yield

        return slot_event_response(nothing(), headers={"cache-control": "public, max-age=5"})

    app = Starlette(routes=[Route("/s", route, methods=["GET"])])
    async with AppServer(app) as server, httpx.AsyncClient(timeout=30) as client:
        response = await client.get(f"{server.url}/s")
    assert response.headers["cache-control"] == "public, max-age=5"


async def test_gzip_middleware_around_the_gateway_leaves_the_stream_live(
    upstream: ScriptedServer,
) -> None:
    # The upstream sends the summary's first bytes, then nothing until the client
    # leaves: messages must arrive uncompressed and at once, not when the stream ends.
    upstream.add(Reply(triage_frames(), chunks=4, stall_after_bytes=20))
    app = GZipMiddleware(create_app(upstream.base_url), minimum_size=1)
    async with (
        AppServer(app) as server,
        httpx.AsyncClient(base_url=server.url, timeout=30) as client,
        aconnect_sse(
            client,
            "POST",
            "/v1/slot-streams",
            json=TRIAGE_BODY,
            headers={"accept-encoding": "gzip"},
        ) as source,
    ):
        assert "content-encoding" not in source.response.headers
        assert_stream_headers(source.response.headers)
        # Read while the upstream is silent: buffered messages would never come.
        assert await read_ids(source, 2) == [1, 2]


async def test_cors_lets_another_origin_resume_with_last_event_id(
    upstream: ScriptedServer,
) -> None:
    origin = "https://app.example"
    upstream.add(Reply(triage_frames(), chunks=6))
    async with (
        AppServer(create_app(upstream.base_url, cors_origins=[origin], token="t")) as server,
        httpx.AsyncClient(base_url=server.url, timeout=30) as client,
    ):
        auth = {"origin": origin, "authorization": "Bearer t"}
        posted = await client.post("/v1/slot-streams", json=TRIAGE_BODY, headers=auth)
        location = posted.headers["location"]
        preflight = await client.options(
            location,
            headers={
                "origin": origin,
                "access-control-request-method": "GET",
                "access-control-request-headers": "authorization, last-event-id, accept",
            },
        )
        resumed = await client.get(location, headers={**auth, "last-event-id": "2"})
    assert preflight.status_code == 200
    assert preflight.headers["access-control-allow-origin"] == origin
    allowed = {
        h.strip().lower() for h in preflight.headers["access-control-allow-headers"].split(",")
    }
    assert {"authorization", "last-event-id", "accept"} <= allowed
    assert "GET" in preflight.headers["access-control-allow-methods"]
    for response in (posted, resumed):
        assert response.status_code == 200
        assert response.headers["access-control-allow-origin"] == origin
        exposed = {
            h.strip().lower() for h in response.headers["access-control-expose-headers"].split(",")
        }
        assert {"location", "slot-stream-id"} <= exposed
    assert event_ids(resumed.text)[0] == 3


def event_ids(text: str) -> list[int]:
    return [int(line[4:]) for line in text.splitlines() if line.startswith("id: ")]


def raw_exchange(port: int, request: bytes) -> bytes:
    """Send ``request`` on a new connection and read until the server closes it."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(request)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    return received


async def test_an_http_1_0_client_reads_the_whole_stream(upstream: ScriptedServer) -> None:
    # HTTP/1.0 has no chunked encoding: the body ends when the connection closes (what
    # nginx's default proxy_http_version 1.0 reads).
    upstream.add(Reply(triage_frames(), chunks=6))
    body = json.dumps(TRIAGE_BODY).encode()
    request = (
        b"POST /v1/slot-streams HTTP/1.0\r\ncontent-type: application/json\r\n"
        b"content-length: %d\r\n\r\n%s" % (len(body), body)
    )
    async with AppServer(create_app(upstream.base_url)) as server:
        answer = await asyncio.to_thread(raw_exchange, server.port, request)
    head, _, text = answer.partition(b"\r\n\r\n")
    lines = head.decode().lower().split("\r\n")
    assert lines[0].endswith("200 ok")
    assert "connection: close" in lines and not any(
        line.startswith(("transfer-encoding", "content-length")) for line in lines
    )
    messages = [
        json.loads(line[6:]) for line in text.decode().splitlines() if line.startswith("data: ")
    ]
    assert messages[-1]["type"] == "done"
    assert apply_messages(messages) == TRIAGE_VALUE
