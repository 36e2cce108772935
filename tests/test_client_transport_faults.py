"""What the server does wrong at the HTTP level (real HTTP, the real ``openai`` client):
a close during the request, retries past the timeouts, keep-alive comments, the client's
own read timeout, bytes that are not UTF-8, chunks of the wrong shape."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import httpx2
import openai
import pytest

import slotflight
from slotflight._errors import (
    SlotflightError,
    StreamClosed,
    TransportError,
    UpstreamStatusError,
    UpstreamTimeout,
)
from slotflight._serving.thread import AppServer
from slotflight.client.async_stream import astream
from slotflight.client.core import new_core
from slotflight.client.request import StreamOptions
from slotflight.client.sync_stream import stream
from slotflight.testing import Reply, ScriptedServer
from tests.client_support import (
    MESSAGES,
    TRIAGE,
    Triage,
    async_client,
    bytes_before,
    close_while_reading,
    frames,
    sync_client,
)

TEXT = frames(TRIAGE)
FIRST_FRAME = bytes_before(TRIAGE, 2) + 1

# -- close() while the request is pending ---------------------------------------------------


async def test_async_close_during_the_request_closes_the_response() -> None:
    async with ScriptedServer([Reply(TEXT, delay=0.5, stall_after_bytes=FIRST_FRAME)]) as server:
        s = astream(async_client(server), model="m", messages=MESSAGES, output=Triage)
        task = asyncio.create_task(s.final())
        await asyncio.to_thread(server.wait_for, lambda r: len(r) == 1)
        await s.close()  # the reading task is inside create()
        with pytest.raises(StreamClosed):
            await asyncio.wait_for(task, 10)
        record = await asyncio.to_thread(server.wait_for_disconnect, 0, 5.0)
        assert record.disconnected


def test_sync_close_during_the_request_closes_the_response() -> None:
    with ScriptedServer([Reply(TEXT, delay=0.5, stall_after_bytes=FIRST_FRAME)]) as server:
        s = stream(sync_client(server), model="m", messages=MESSAGES, output=Triage)
        errors = close_while_reading(s, server)  # the reading thread is inside create()
        assert len(errors) == 1 and isinstance(errors[0], StreamClosed), errors
        assert server.wait_for_disconnect(0, 5.0).disconnected


# -- the openai client's own retries under the stream's timeouts ----------------------------


@pytest.mark.parametrize("option", ["timeout", "idle_timeout"])
def test_sync_timeouts_are_not_retried_by_the_client(option: str) -> None:
    with ScriptedServer([Reply(TEXT, delay=30)] * 3) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="t")  # max_retries=2
        options: dict[str, Any] = {option: 0.5}
        with (
            stream(client, model="m", messages=MESSAGES, output=Triage, **options) as s,
            pytest.raises(UpstreamTimeout),
        ):
            s.final()
        assert len(server.requests) == 1


@pytest.mark.parametrize("option", ["timeout", "idle_timeout"])
async def test_async_timeouts_are_not_retried_by_the_client(option: str) -> None:
    async with ScriptedServer([Reply(TEXT, delay=30)] * 3) as server:
        client = openai.AsyncOpenAI(base_url=server.base_url, api_key="t")
        options: dict[str, Any] = {option: 0.5}
        async with astream(client, model="m", messages=MESSAGES, output=Triage, **options) as s:
            with pytest.raises(UpstreamTimeout):
                await s.final()
        assert len(server.requests) == 1


def test_a_retry_after_is_not_slept_through_past_the_timeout() -> None:
    with ScriptedServer([Reply(status=503, retry_after=3.0), Reply(TEXT)]) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="t")
        started = time.monotonic()
        with (
            stream(client, model="m", messages=MESSAGES, output=Triage, timeout=0.5) as s,
            pytest.raises(UpstreamStatusError),
        ):
            s.final()
        assert time.monotonic() - started < 2.5  # well before the 3 s retry-after
        assert len(server.requests) == 1


def test_without_timeouts_the_client_still_retries() -> None:
    with ScriptedServer([Reply(status=503, retry_after=0.01), Reply(TEXT)]) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="t", max_retries=1)
        assert slotflight.complete(client, model="m", messages=MESSAGES, output=Triage) == TRIAGE
        assert len(server.requests) == 2


# -- keep-alive comments and nothing else -------------------------------------------------

KEEPALIVE_SECONDS = 5.0


async def _keepalive_app(scope: Any, receive: Any, send: Any) -> None:
    """SSE comment lines for a while, then the whole answer."""
    assert scope["type"] == "http"
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-type", b"text/event-stream")],
        }
    )
    end = time.monotonic() + KEEPALIVE_SECONDS
    while time.monotonic() < end:
        await send({"type": "http.response.body", "body": b": keep-alive\n\n", "more_body": True})
        await asyncio.sleep(0.1)
    choice = {"index": 0, "delta": {"content": TEXT}, "finish_reason": "stop"}
    chunk = {"id": "x", "object": "chat.completion.chunk", "created": 0, "model": "m"}
    body = json.dumps({**chunk, "choices": [choice]}).encode()
    await send({"type": "http.response.body", "body": b"data: " + body + b"\n\ndata: [DONE]\n\n"})


TIMEOUTS = pytest.mark.parametrize(
    ("timeout", "idle"), [(0.5, None), (None, 0.5)], ids=["total", "idle"]
)


@TIMEOUTS
def test_sync_timeouts_fire_while_the_server_sends_only_comments(
    timeout: float | None, idle: float | None
) -> None:
    with AppServer(_keepalive_app, lifespan="off") as server:
        client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="t", max_retries=0)
        started = time.monotonic()
        with (
            stream(
                client,
                model="m",
                messages=MESSAGES,
                output=Triage,
                timeout=timeout,
                idle_timeout=idle,
            ) as s,
            pytest.raises(UpstreamTimeout) as caught,
        ):
            s.final()
        assert time.monotonic() - started < KEEPALIVE_SECONDS - 1  # before the answer
    assert ("total" in str(caught.value)) == (timeout is not None)


@TIMEOUTS
async def test_async_timeouts_fire_while_the_server_sends_only_comments(
    timeout: float | None, idle: float | None
) -> None:
    server = AppServer(_keepalive_app, lifespan="off")
    await asyncio.to_thread(server.start)
    try:
        client = openai.AsyncOpenAI(base_url=f"{server.url}/v1", api_key="t", max_retries=0)
        started = time.monotonic()
        async with astream(
            client, model="m", messages=MESSAGES, output=Triage, timeout=timeout, idle_timeout=idle
        ) as s:
            with pytest.raises(UpstreamTimeout):
                await s.final()
        assert time.monotonic() - started < KEEPALIVE_SECONDS - 1
    finally:
        await asyncio.to_thread(server.stop)


# -- the client's own read timeout ---------------------------------------------------------


@pytest.mark.parametrize(
    "client_timeout", [0.5, openai.Timeout(10.0, read=0.5)], ids=["float", "Timeout"]
)
def test_the_request_keeps_a_shorter_client_read_timeout(client_timeout: Any) -> None:
    core = new_core(
        Triage,
        model="m",
        messages=MESSAGES,
        options=StreamOptions(timeout=30.0, idle_timeout=20.0),
        params={},
        client_timeout=client_timeout,
    )
    kwargs = core.next_request()
    assert kwargs is not None
    assert kwargs["timeout"].read == 0.5


def test_a_shorter_client_read_timeout_fires_over_http() -> None:
    with ScriptedServer([Reply(TEXT, stall_after_bytes=FIRST_FRAME)]) as server:
        client = sync_client(server, timeout=0.5)
        started = time.monotonic()
        with (
            stream(client, model="m", messages=MESSAGES, output=Triage, timeout=30.0) as s,
            pytest.raises(UpstreamTimeout),
        ):
            s.final()
        assert time.monotonic() - started < 20.0  # well before the total timeout


# -- bodies that are not what a chunk should be -------------------------------------------


def _sse(*payloads: Any) -> bytes:
    return b"".join(b"data: " + json.dumps(p).encode() + b"\n\n" for p in payloads) + (
        b"data: [DONE]\n\n"
    )


NOT_UTF8 = (
    b'data: {"choices":[{"index":0,"delta":{"content":"summary: \xff\xfe"}}]}\n\ndata: [DONE]\n\n'
)
BODIES = {
    "not-utf-8": NOT_UTF8,
    "choices-int": _sse({"choices": 5}),
    "choices-true": _sse({"choices": True}),
    "choices-object": _sse({"choices": {"index": 0}}),
}


def _handler(body: bytes) -> Any:
    def handle(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    return handle


@pytest.mark.parametrize("name", sorted(BODIES))
def test_sync_a_malformed_body_is_a_slotflight_error(name: str) -> None:
    transport = httpx2.MockTransport(_handler(BODIES[name]))
    client = openai.OpenAI(
        base_url="http://test/v1",
        api_key="k",
        max_retries=0,
        http_client=httpx2.Client(transport=transport),
    )
    expected = TransportError if name == "not-utf-8" else SlotflightError
    with pytest.raises(expected):
        slotflight.complete(client, model="m", messages=MESSAGES, output=Triage, max_attempts=1)


@pytest.mark.parametrize("name", sorted(BODIES))
async def test_async_a_malformed_body_is_a_slotflight_error(name: str) -> None:
    handle = _handler(BODIES[name])

    async def ahandle(request: httpx2.Request) -> httpx2.Response:
        return handle(request)

    client = openai.AsyncOpenAI(
        base_url="http://test/v1",
        api_key="k",
        max_retries=0,
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(ahandle)),
    )
    expected = TransportError if name == "not-utf-8" else SlotflightError
    with pytest.raises(expected):
        await slotflight.acomplete(
            client, model="m", messages=MESSAGES, output=Triage, max_attempts=1
        )
