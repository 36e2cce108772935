"""The gateway's lean chunk client against the scripted upstream: the same text, usage
and errors as ``openai.AsyncOpenAI``, without building ``ChatCompletionChunk`` models."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import openai
import pytest
from hypothesis import given
from hypothesis import strategies as st
from openai._streaming import SSEDecoder

from slotflight.testing import Reply, ScriptedServer, Usage
from slotflight.web._upstream import LeanChunkClient, LeanSSEDecoder, SSELines

MESSAGES = [{"role": "user", "content": "hi"}]


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


async def test_chunks_carry_the_same_text_and_usage(upstream: ScriptedServer) -> None:
    reply = Reply("Hello there, ünïcödé", chunks=3, usage=Usage(7, 5))
    upstream.add(reply, reply)
    lean = LeanChunkClient(base_url=upstream.base_url, api_key="k", max_retries=0)
    plain = openai.AsyncOpenAI(base_url=upstream.base_url, api_key="k", max_retries=0)
    lean_text, lean_usage, lean_chunks = await read(lean)
    plain_text, plain_usage, _ = await read(plain)
    assert lean_text == plain_text == "Hello there, ünïcödé"
    assert (lean_usage.prompt_tokens, lean_usage.completion_tokens) == (7, 5)
    assert (plain_usage.prompt_tokens, plain_usage.completion_tokens) == (7, 5)
    assert not any(isinstance(c, openai.types.chat.ChatCompletionChunk) for c in lean_chunks)
    assert lean_chunks[0].choices[0].index == 0 and lean_chunks[0].id is None
    await lean.close()
    await plain.close()


async def test_errors_are_openais(upstream: ScriptedServer) -> None:
    upstream.add(
        Reply(status=503, error_message="overloaded"),
        Reply("Hello there", chunks=2, drop_after_bytes=5),
    )
    client = LeanChunkClient(base_url=upstream.base_url, api_key="k", max_retries=0)
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
