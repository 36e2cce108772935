"""Regressions of the async stream's close(): it ends a request still waiting for its
response headers (or inside the ``openai`` client's own retry wait) at once, closing
the HTTP request, instead of leaving both until the server answers."""

from __future__ import annotations

import asyncio

import pytest

import slotflight
from slotflight import StreamClosed
from slotflight.testing import Reply, ScriptedServer
from tests.client_support import MESSAGES, TRIAGE, Triage, async_client, frames

TEXT = frames(TRIAGE)

# The server holds the answer this long; each test ends long before (failure guards).
SLOW = 30.0
GUARD = 10.0


@pytest.mark.parametrize("timeout", [None, 60.0])
async def test_async_close_ends_a_request_waiting_for_its_headers(timeout: float | None) -> None:
    # ``timeout`` set: the stream sends through a copy of the client, under its own
    # deadline; unset: through the client as given. Either way close() must end the
    # request now, not when the headers come.
    async with ScriptedServer([Reply(TEXT, delay=SLOW)]) as server:
        s = slotflight.astream(
            async_client(server), model="m", messages=MESSAGES, output=Triage, timeout=timeout
        )
        reader = asyncio.create_task(s.final())
        await asyncio.to_thread(server.wait_for, lambda r: len(r) == 1)
        await s.close()
        with pytest.raises(StreamClosed, match="during the request"):
            await asyncio.wait_for(reader, GUARD)
        record = await asyncio.to_thread(server.wait_for_disconnect, 0, GUARD)
        assert record.status is None  # the server never answered
        assert server.remaining == 0


async def test_async_close_ends_the_clients_own_retry_wait() -> None:
    # No timeout: the openai client retries the 503 itself, inside the request, after
    # sleeping the retry-after. close() ends that sleep; no retry is sent.
    replies = [Reply(status=503, retry_after=SLOW), Reply(TEXT)]
    async with ScriptedServer(replies) as server:
        client = async_client(server, max_retries=1)
        s = slotflight.astream(client, model="m", messages=MESSAGES, output=Triage)
        reader = asyncio.create_task(s.final())
        await asyncio.to_thread(server.wait_for_request, 0, lambda r: r.finished)
        await s.close()
        with pytest.raises(StreamClosed, match="during the request"):
            await asyncio.wait_for(reader, GUARD)
        assert len(server.requests) == 1
        assert server.remaining == 1
