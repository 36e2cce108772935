"""The gateway's lean chunk client against the scripted upstream: the same text, usage
and errors as ``openai.AsyncOpenAI``, without building ``ChatCompletionChunk`` models."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import openai
import pytest

from slotflight.testing import Reply, ScriptedServer, Usage
from slotflight.web._upstream import LeanChunkClient

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
