"""Keep-alive comments while the model is silent, their bounds, and what a client that
goes away mid-stream costs upstream, on both event stores. Real HTTP on 127.0.0.1
(uvicorn, httpx, the scripted upstream, a real ``redis-server`` for ``-m redis``)."""

from __future__ import annotations

import asyncio
import math
import socket
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from slotflight.cli import build_parser
from slotflight.testing import AppServer, Reply, ScriptedServer
from slotflight.web import (
    MemoryEventStore,
    RedisEventStore,
    StoredEvent,
    create_app,
    slot_event_response,
    stored_event_response,
)
from slotflight.web._sse import MIN_PING_S
from tests.redis_support import redis_url  # noqa: F401 - the fixture
from tests.web_support import TRIAGE_BODY, triage_frames


@pytest.fixture
async def upstream() -> AsyncIterator[ScriptedServer]:
    async with ScriptedServer() as server:
        yield server


async def test_a_silent_model_gets_keep_alive_comments_one_per_interval(
    upstream: ScriptedServer,
) -> None:
    # The summary's first bytes, then nothing until the client leaves: a proxy's idle
    # timeout would cut the connection but for the comments.
    upstream.add(Reply(triage_frames(), chunks=4, stall_after_bytes=20))
    lines: list[str] = []
    async with (
        AppServer(create_app(upstream.base_url, ping_s=MIN_PING_S)) as server,
        httpx.AsyncClient(base_url=server.url, timeout=30) as client,
        client.stream("POST", "/v1/slot-streams", json=TRIAGE_BODY) as response,
    ):
        async for line in response.aiter_lines():
            lines.append(line)
            if sum(line.startswith(":") for line in lines) == 3:
                break
    comments = [line for line in lines if line.startswith(":")]
    first = lines.index(comments[0])
    # Once the model is silent nothing but comments comes, each a short line.
    assert all(line.startswith(":") or not line for line in lines[first:])
    assert all(len(line) < 80 for line in comments)
    assert len(upstream.requests) == 1


@pytest.mark.parametrize("ping_s", [-1.0, math.nan, math.inf, 1e-9, MIN_PING_S / 2])
async def test_a_keep_alive_interval_out_of_bounds_is_refused_before_serving(
    upstream: ScriptedServer, ping_s: float
) -> None:
    # A negative interval failed each stream after its model request had started; a
    # NaN one sent no comment at all; a tiny one a comment per turn of the event loop.
    with pytest.raises(ValueError, match="ping_s"):
        create_app(upstream.base_url, ping_s=ping_s)

    async def events() -> AsyncIterator[Any]:
        return
        yield

    with pytest.raises(ValueError, match="ping_s"):
        slot_event_response(events(), ping_s=ping_s)


@pytest.mark.parametrize("retry_ms", [-1, 1.5, True])
def test_a_retry_hint_out_of_bounds_is_refused(upstream: ScriptedServer, retry_ms: Any) -> None:
    with pytest.raises(ValueError, match="retry_ms"):
        create_app(upstream.base_url, retry_ms=retry_ms)


def test_serve_takes_the_keep_alive_interval(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["serve", "--upstream-base-url", "http://127.0.0.1:9/v1"]
    assert build_parser().parse_args([*argv, "--ping-s", "5"]).ping_s == 5.0
    assert build_parser().parse_args([*argv, "--ping-s", "0"]).ping_s == 0.0
    assert build_parser().parse_args(argv).ping_s == 15.0
    for value in ("nan", "-1", "0.01", "inf"):
        with pytest.raises(SystemExit) as exited:
            build_parser().parse_args([*argv, f"--ping-s={value}"])
        assert exited.value.code == 2
        assert "argument --ping-s: expected 0 or a number of seconds >=" in capsys.readouterr().err


@pytest.mark.parametrize("store", ["memory", pytest.param("redis", marks=pytest.mark.redis)])
async def test_a_client_gone_mid_stream_closes_the_upstream_request(
    upstream: ScriptedServer, store: str, request: pytest.FixtureRequest
) -> None:
    # docs/web.md: with resume_grace_s=0 a disconnect closes the upstream request
    # (within about half a second); the stream ends with "abandoned".
    upstream.add(Reply(triage_frames(), chunks=4, stall_after_bytes=20))
    options: dict[str, Any] = {"resume_grace_s": 0}
    if store == "redis":
        url = request.getfixturevalue("redis_url")
        options["store"] = RedisEventStore.from_url(url, prefix=f"t-{uuid.uuid4().hex}:")
    async with (
        AppServer(create_app(upstream.base_url, **options)) as server,
        httpx.AsyncClient(base_url=server.url, timeout=30) as client,
    ):
        async with client.stream("POST", "/v1/slot-streams", json=TRIAGE_BODY) as response:
            location = response.headers["location"]
            async for line in response.aiter_lines():
                if line.startswith("id: 2"):
                    break
        record = await asyncio.to_thread(upstream.wait_for_disconnect, 0, 10.0)
        assert record.disconnected and not record.completed
        rest = await client.get(location, headers={"last-event-id": "2"})
    assert '"code":"abandoned"' in rest.text


#: Messages of 256 KiB: 64 of them (16 MiB) fill any socket buffer of a client that
#: reads nothing.
BIG = "x" * (256 * 1024)


def big_messages(count: int = 64) -> list[StoredEvent]:
    return [StoredEvent(i, "slot-delta", f'{{"delta":"{BIG}"}}') for i in range(1, count + 1)]


def open_without_reading(port: int, path: str) -> socket.socket:
    """A connection that sends ``GET path`` and then reads nothing."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    sock.sendall(f"GET {path} HTTP/1.1\r\nhost: x\r\n\r\n".encode())
    return sock


def read_to_the_end(sock: socket.socket) -> int:
    """Read until the server closes the connection (a socket timeout if it does not)."""
    sock.settimeout(30)
    total = 0
    with sock:
        while chunk := sock.recv(1 << 20):
            total += len(chunk)
    return total


async def eventually(condition: Callable[[], bool], polls: int = 400) -> bool:
    for _ in range(polls):
        if condition():
            return True
        await asyncio.sleep(0.05)
    return condition()


async def test_a_client_that_reads_nothing_is_let_go() -> None:
    # Its response waited forever for room in the socket's buffers: no message and no
    # ping could go out, and the connection and the stream were held as long as the
    # client kept its socket open.
    closed = asyncio.Event()

    async def messages() -> AsyncGenerator[StoredEvent, None]:
        try:
            for event in big_messages():
                yield event
            await asyncio.Event().wait()  # a live stream with nothing more to say
        finally:
            closed.set()

    async def route(request: Request) -> Response:
        return stored_event_response(messages(), ping_s=MIN_PING_S)

    app = Starlette(routes=[Route("/s", route, methods=["GET"])])
    async with AppServer(app) as server:
        sock = open_without_reading(server.port, "/s")
        assert await eventually(closed.is_set)
        received = await asyncio.to_thread(read_to_the_end, sock)
    assert received < 64 * len(BIG)  # it was let go before the messages were all sent


async def test_a_gateway_reader_that_reads_nothing_is_let_go(upstream: ScriptedServer) -> None:
    store = MemoryEventStore()
    stream_id = uuid.uuid4().hex
    await store.create(stream_id)
    for event in big_messages():
        await store.append(stream_id, event)
    app = create_app(upstream.base_url, store=store, ping_s=MIN_PING_S)
    hub = app.state.hub
    async with AppServer(app) as server:
        sock = open_without_reading(server.port, f"/v1/slot-streams/{stream_id}/events")
        assert await eventually(lambda: stream_id in hub._readers)
        assert await eventually(lambda: stream_id not in hub._readers)
        await asyncio.to_thread(read_to_the_end, sock)


@pytest.mark.parametrize(
    ("option", "value"),
    [("state_mode", "ful"), ("coalesce_ms", -1), ("coalesce_ms", math.nan), ("coalesce_ms", "5")],
)
def test_the_route_helper_refuses_a_bad_encoding_before_anything_is_read(
    option: str, value: Any
) -> None:
    """A bad ``state_mode`` or ``coalesce_ms`` was found only once the response started:
    the client got a 200 holding one ``internal_error``, and the stream was never closed."""

    async def events() -> AsyncIterator[Any]:
        return
        yield

    with pytest.raises(ValueError, match=option):
        slot_event_response(events(), **{option: value})
