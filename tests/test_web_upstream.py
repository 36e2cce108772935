"""The gateway's lean chunk client against the scripted upstream: the same text, usage
and errors as ``openai.AsyncOpenAI``, without building ``ChatCompletionChunk`` models."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import httpcore2
import httpx2
import openai
import pytest
from hypothesis import given
from hypothesis import strategies as st
from openai._streaming import SSEDecoder

from slotflight import UpstreamTimeout, astream
from slotflight.testing import AppServer, Reply, ScriptedServer, Usage
from slotflight.web._upstream import (
    LeanChunkClient,
    LeanChunkStream,
    LeanSSEDecoder,
    SSELines,
    _timed_out,
    default_http_client,
)

MESSAGES = [{"role": "user", "content": "hi"}]

#: The HTTP clients the gateway reads the model server with: its default (openai's
#: aiohttp transport) and openai's default httpx2 client.
HTTP_CLIENTS = {"aiohttp": default_http_client, "httpx2": openai.DefaultAsyncHttpxClient}


@pytest.fixture(params=list(HTTP_CLIENTS))
def lean(request: pytest.FixtureRequest) -> Callable[..., LeanChunkClient]:
    """``lean(base_url, **options)``: a lean chunk client over each HTTP client."""

    def make(base_url: str, **options: Any) -> LeanChunkClient:
        return LeanChunkClient(
            base_url=base_url,
            api_key="k",
            max_retries=0,
            http_client=HTTP_CLIENTS[request.param](),
            **options,
        )

    return make


def test_the_gateway_reads_through_aiohttp_by_default() -> None:
    assert type(default_http_client()) is openai.DefaultAioHttpClient


@pytest.fixture
async def upstream() -> AsyncIterator[ScriptedServer]:
    async with ScriptedServer() as server:
        yield server


async def read(client: openai.AsyncOpenAI) -> tuple[str, Any, list[Any]]:
    stream = await client.chat.completions.create(
        model="m", messages=MESSAGES, stream=True, stream_options={"include_usage": True}
    )
    chunks = [chunk async for chunk in stream]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    usage = next(c.usage for c in chunks if c.usage is not None)
    return text, usage, chunks


async def test_chunks_carry_the_same_text_and_usage(
    upstream: ScriptedServer, lean: Callable[..., LeanChunkClient]
) -> None:
    reply = Reply("Hello there, ünïcödé", chunks=3, usage=Usage(7, 5))
    upstream.add(reply, reply)
    lean_client = lean(upstream.base_url)
    plain = openai.AsyncOpenAI(base_url=upstream.base_url, api_key="k", max_retries=0)
    lean_text, lean_usage, lean_chunks = await read(lean_client)
    plain_text, plain_usage, _ = await read(plain)
    assert lean_text == plain_text == "Hello there, ünïcödé"
    assert (lean_usage.prompt_tokens, lean_usage.completion_tokens) == (7, 5)
    assert (plain_usage.prompt_tokens, plain_usage.completion_tokens) == (7, 5)
    assert not any(isinstance(c, openai.types.chat.ChatCompletionChunk) for c in lean_chunks)
    assert lean_chunks[0].choices[0].index == 0 and lean_chunks[0].id is None
    await lean_client.close()
    await plain.close()


async def test_errors_are_openais(
    upstream: ScriptedServer, lean: Callable[..., LeanChunkClient]
) -> None:
    upstream.add(
        Reply(status=503, error_message="overloaded"),
        Reply("Hello there", chunks=2, drop_after_bytes=5),
    )
    client = lean(upstream.base_url)
    with pytest.raises(openai.APIStatusError) as status:
        await read(client)
    assert status.value.status_code == 503
    with pytest.raises(openai.APIConnectionError):
        await read(client)
    await client.close()


_FIELD = st.sampled_from(["data", "event", "id", "retry", "", "x"])
_VALUE = st.text(alphabet=st.characters(codec="utf-8", exclude_characters="\r\n"), max_size=12)
_END = st.sampled_from(["\n", "\r", "\r\n"])


@st.composite
def sse_bytes(draw: st.DrawFn) -> bytes:
    """An SSE body: fields, comments and blank lines, each line ended by CR, LF or
    CRLF (at random), maybe without a last line end."""
    lines = draw(
        st.lists(
            st.one_of(
                st.tuples(_FIELD, st.sampled_from([":", ": "]), _VALUE).map("".join),
                _VALUE.map(lambda v: ":" + v),
                st.just(""),
            ),
            max_size=12,
        )
    )
    text = "".join(line + draw(_END) for line in lines)
    if draw(st.booleans()):
        text += draw(_VALUE)
    return text.encode()


def _events(decoder: SSEDecoder, chunks: list[bytes]) -> list[tuple[Any, ...]]:
    return [(e.event, e.data, e.id, e.retry) for e in decoder.iter_bytes(iter(chunks))]


@given(body=sse_bytes(), cuts=st.lists(st.integers(0, 400), max_size=8))
def test_the_lean_sse_decoder_reads_what_openais_reads(body: bytes, cuts: list[int]) -> None:
    """However the bytes are cut into chunks (a CRLF split included), the lean decoder
    gives the events ``openai``'s decoder gives for the whole body."""
    points = sorted({min(c, len(body)) for c in cuts})
    chunks = [body[a:b] for a, b in zip([0, *points], [*points, len(body)], strict=True)]
    assert _events(LeanSSEDecoder(), chunks) == _events(SSEDecoder(), [body])


async def test_the_lean_sse_decoder_reads_async_chunks_as_openais() -> None:
    body = b'data: {"a": 1}\r\n\r\nevent: x\rdata: 2\r\rdata: [DONE]\n\n'

    async def chunks() -> AsyncIterator[bytes]:
        for i in range(0, len(body), 3):
            yield body[i : i + 3]

    lean = [(e.event, e.data) async for e in LeanSSEDecoder().aiter_bytes(chunks())]
    assert lean == [(e[0], e[1]) for e in _events(SSEDecoder(), [body])]
    assert lean == [(None, '{"a": 1}'), ("x", "2"), (None, "[DONE]")]


def test_a_long_line_cut_in_many_chunks_is_joined_once() -> None:
    lines = SSELines()
    assert all(lines.feed(b"x" * 10) == [] for _ in range(1000))
    assert lines.feed(b"y\nz") == [b"x" * 10_000 + b"y"]
    assert lines.finish() == [b"z"]


async def test_a_streamed_body_is_read_without_a_timer_per_read(upstream: ScriptedServer) -> None:
    """The head is awaited under the read timeout; the body is not (the slot stream
    bounds each wait for a chunk itself)."""
    upstream.add(Reply("Hello there", chunks=2))
    client = LeanChunkClient(
        base_url=upstream.base_url,
        api_key="k",
        max_retries=0,
        timeout=5,
        http_client=openai.DefaultAsyncHttpxClient(),
    )
    stream = await client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
    assert isinstance(stream, LeanChunkStream)
    assert stream.response.request.extensions["timeout"]["read"] is None
    assert stream.response.request.extensions["timeout"]["connect"] == 5
    assert "".join([c.choices[0].delta.content or "" async for c in stream]) == "Hello there"
    await client.close()


async def test_a_head_that_does_not_come_still_times_out(
    upstream: ScriptedServer, lean: Callable[..., LeanChunkClient]
) -> None:
    upstream.add(Reply("Hello there", delay=30))
    client = lean(upstream.base_url, timeout=0.3)
    with pytest.raises(openai.APITimeoutError):
        await client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
    await client.close()


async def test_a_stalled_body_ends_the_slot_stream_at_its_idle_timeout(
    upstream: ScriptedServer, lean: Callable[..., LeanChunkClient]
) -> None:
    upstream.add(Reply("summary: a", stall_after_bytes=40))
    client = lean(upstream.base_url)
    output = {"type": "object", "properties": {"summary": {"type": "string"}}}
    stream = astream(client, model="m", messages=MESSAGES, output=output, idle_timeout=0.3)
    async with stream:
        with pytest.raises(UpstreamTimeout, match="idle"):
            await stream.final()
    await client.close()


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (b'data: {"error": {"message": "overloaded"}}\n\n', openai.APIError),
        (b"data: {not json\n\n", json.JSONDecodeError),
    ],
)
async def test_errors_inside_the_stream_are_openais(
    body: bytes, error: type[Exception], lean: Callable[..., LeanChunkClient]
) -> None:
    """An ``error`` payload and invalid JSON raise what ``openai``'s own stream raises."""

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        headers = [(b"content-type", b"text/event-stream")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    for make in (lean, openai.AsyncOpenAI):
        async with AppServer(app) as server:
            client = (
                lean(server.url)
                if make is lean
                else openai.AsyncOpenAI(base_url=server.url, api_key="k", max_retries=0)
            )
            stream = await client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
            with pytest.raises(error) as raised:
                [chunk async for chunk in stream]
            if isinstance(raised.value, openai.APIError):
                assert raised.value.message == "overloaded"
            await client.close()


async def test_a_refused_or_dropped_connection_is_a_connection_error(
    lean: Callable[..., LeanChunkClient],
) -> None:
    """Not a timeout: ``openai``'s aiohttp transport raises both as ``ConnectTimeout``."""

    async def hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(100)
        writer.close()

    server = await asyncio.start_server(hang_up, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    refused = socket.socket()
    refused.bind(("127.0.0.1", 0))  # bound, never listening: connections are refused
    try:
        for url in (
            f"http://127.0.0.1:{port}/v1",
            f"http://127.0.0.1:{refused.getsockname()[1]}/v1",
        ):
            client = lean(url)
            with pytest.raises(openai.APIConnectionError) as raised:
                await client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
            assert not isinstance(raised.value, openai.APITimeoutError)
            await client.close()
    finally:
        refused.close()
        server.close()
        await server.wait_closed()


@pytest.mark.parametrize(
    ("cause", "timed_out"),
    [
        (aiohttp.ServerDisconnectedError(), False),
        (aiohttp.ClientConnectionError("refused"), False),
        (aiohttp.SocketTimeoutError("sock_read"), True),
        (aiohttp.ConnectionTimeoutError("connect"), True),
        (httpcore2.ReadTimeout("read"), True),
        (None, True),
    ],
)
def test_which_timeouts_are_timeouts(cause: BaseException | None, timed_out: bool) -> None:
    """Read or connect timeouts, wherever they come from, are timeouts; an aiohttp
    connection error ``openai``'s transport raised as a timeout is not."""
    exc = httpx2.ConnectTimeout("x")
    exc.__cause__ = cause
    assert _timed_out(exc) is timed_out
