"""Two gateway instances sharing one Redis: a stream produced by one instance is
resumed on the other with ``Last-Event-ID``."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from httpx_sse import aconnect_sse

from slotflight.testing import AppServer, Reply, ScriptedServer
from slotflight.web import RedisEventStore, create_app
from tests.redis_support import redis_url  # noqa: F401 - the fixture
from tests.web_support import TRIAGE_SCHEMA, TRIAGE_VALUE, triage_frames

pytestmark = pytest.mark.redis

BODY: dict[str, Any] = {
    "model": "scripted",
    "messages": [{"role": "user", "content": "The export fails."}],
    "schema": TRIAGE_SCHEMA,
}


@pytest.fixture
async def upstream() -> AsyncIterator[ScriptedServer]:
    async with ScriptedServer() as server:
        yield server


def instance(upstream: ScriptedServer, url: str, prefix: str, **options: Any) -> AppServer:
    store = RedisEventStore.from_url(url, prefix=prefix, block_ms=200)
    return AppServer(create_app(upstream.base_url, store=store, **options))


async def test_resume_on_another_instance(upstream: ScriptedServer, redis_url: str) -> None:  # noqa: F811
    # About 3 s of streaming: longer than the producer's grace without readers, so it
    # only completes because the reader on the other instance counts as watching.
    upstream.add(Reply(triage_frames(), chunks=3, chunk_delay=0.03))
    prefix = f"test-{uuid.uuid4().hex}:"
    async with (
        instance(upstream, redis_url, prefix, resume_grace_s=0.5) as first,
        instance(upstream, redis_url, prefix) as second,
        httpx.AsyncClient(timeout=30) as client,
    ):
        async with aconnect_sse(
            client, "POST", f"{first.url}/v1/slot-streams", json=BODY
        ) as source:
            location = source.response.headers["location"]
            head = []
            async for message in source.aiter_sse():
                head.append(message)
                if len(head) == 4:
                    break
        async with aconnect_sse(
            client, "GET", f"{second.url}{location}", headers={"Last-Event-ID": head[-1].id}
        ) as source:
            assert source.response.status_code == 200
            rest = [message async for message in source.aiter_sse()]
        unknown = await client.get(f"{second.url}/v1/slot-streams/{uuid.uuid4().hex}/events")

    ids = [int(m.id) for m in head + rest]
    assert ids == list(range(1, len(ids) + 1))
    assert rest[-1].event == "done", rest[-1].data
    assert json.loads(rest[-1].data)["state"] == TRIAGE_VALUE
    assert len(upstream.requests) == 1
    assert upstream.request(0).completed
    assert unknown.status_code == 404
