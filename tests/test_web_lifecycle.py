"""Every stream's last message is ``done`` or ``error``, also when the gateway producing
it dies or is stopped: real gateway processes (``python -m slotflight.cli serve``), a
real ``redis-server``, the scripted upstream and httpx-sse readers."""

from __future__ import annotations

import asyncio
import json
import signal
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

import httpx
import pytest
from httpx_sse import aconnect_sse

from slotflight.testing import Reply, ScriptedServer
from tests.redis_support import redis_url  # noqa: F401 - the fixture
from tests.web_support import TRIAGE_SCHEMA, TRIAGE_VALUE, gateway_process, triage_frames


def body(ticket: str) -> dict[str, Any]:
    return {
        "model": "scripted",
        "messages": [{"role": "user", "content": ticket}],
        "schema": TRIAGE_SCHEMA,
        "options": {"max_attempts": 1},
    }


def for_ticket(ticket: str) -> Any:
    def match(request: Mapping[str, Any]) -> bool:
        return any(ticket in str(m.get("content")) for m in request.get("messages", []))

    return match


@pytest.fixture
async def upstream() -> AsyncIterator[ScriptedServer]:
    async with ScriptedServer() as server:
        yield server


@pytest.mark.redis
async def test_readers_of_a_killed_producer_end_with_producer_lost(
    upstream: ScriptedServer,
    redis_url: str,  # noqa: F811
) -> None:
    # The stream stalls after its first bytes: only the producer's death can end it.
    upstream.add(Reply(triage_frames(), chunks=4, stall_after_bytes=40))
    redis = ("--redis-url", redis_url)
    async with (
        gateway_process(upstream, *redis) as producer,
        gateway_process(upstream, *redis) as other,
        httpx.AsyncClient(timeout=60) as client,
    ):
        async with aconnect_sse(
            client, "POST", f"{producer.url}/v1/slot-streams", json=body("lost")
        ) as source:
            location = source.response.headers["location"]
            head = []
            async for message in source.aiter_sse():
                head.append(message)
                if len(head) == 2:
                    break
        async with aconnect_sse(
            client, "GET", f"{other.url}{location}", headers={"Last-Event-ID": head[-1].id}
        ) as source:
            producer.process.kill()
            killed_at = time.monotonic()
            rest = [message async for message in source.aiter_sse()]
            waited = time.monotonic() - killed_at
        # Any instance now reports the same end, from the store.
        async with aconnect_sse(client, "GET", f"{other.url}{location}?last_event_id=0") as source:
            replay = [message async for message in source.aiter_sse()]

    print(f"producer_lost after {waited:.1f} s")
    assert rest[-1].event == "error"
    assert json.loads(rest[-1].data)["error"]["code"] == "producer_lost"
    assert int(rest[-1].id) == int(head[-1].id) + len(rest)
    assert waited < 15  # lease 5 s + one idle check; generous for a busy machine
    assert [m.data for m in replay[-1:]] == [rest[-1].data]


async def test_sigterm_lets_streams_finish_then_ends_the_rest(upstream: ScriptedServer) -> None:
    frames = triage_frames()
    upstream.add(
        Reply(frames, chunks=4, chunk_delay=0.03, match=for_ticket("finishing")),
        Reply(frames, chunks=4, stall_after_bytes=40, match=for_ticket("stalled")),
    )

    async def read(client: httpx.AsyncClient, url: str, ticket: str, started: asyncio.Event) -> Any:
        async with aconnect_sse(client, "POST", url, json=body(ticket)) as source:
            messages = []
            async for message in source.aiter_sse():
                messages.append(message)
                started.set()
            return messages

    async with (
        gateway_process(upstream, "--drain-s", "5") as gateway,
        httpx.AsyncClient(timeout=60) as client,
    ):
        url = f"{gateway.url}/v1/slot-streams"
        first, second = asyncio.Event(), asyncio.Event()
        finishing = asyncio.create_task(read(client, url, "finishing", first))
        stalled = asyncio.create_task(read(client, url, "stalled", second))
        await asyncio.wait_for(asyncio.gather(first.wait(), second.wait()), 30)
        gateway.process.send_signal(signal.SIGTERM)
        stopped_at = time.monotonic()
        done_messages, stalled_messages = await asyncio.wait_for(
            asyncio.gather(finishing, stalled), 60
        )
        ended_after = time.monotonic() - stopped_at
        status = await asyncio.wait_for(gateway.process.wait(), 30)

    assert done_messages[-1].event == "done"
    assert json.loads(done_messages[-1].data)["state"] == TRIAGE_VALUE
    last = json.loads(stalled_messages[-1].data)
    assert stalled_messages[-1].event == "error" and last["error"]["code"] == "shutting_down"
    assert stalled_messages[-1].id  # stored as the stream's own last message
    assert 4 < ended_after < 30  # the drain waited for the running streams first
    assert status in (0, -signal.SIGTERM)  # uvicorn re-raises the signal once it stopped
