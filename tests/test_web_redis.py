"""Two gateway instances sharing one Redis: a stream produced by one instance is
resumed on the other with ``Last-Event-ID``."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis
from httpx_sse import aconnect_sse

from slotflight.testing import AppServer, Reply, ScriptedServer
from slotflight.web import RedisEventStore, StoredEvent, StoreUnavailable, create_app
from tests.redis_support import redis_server, redis_url  # noqa: F401 - the fixture
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


async def test_a_redis_refusing_writes_is_an_unavailable_store(upstream: ScriptedServer) -> None:
    # Out of memory under maxmemory (as a read-only replica after a failover): Redis
    # answers, but refuses every write. That is 503 store_unavailable, /health too.
    upstream.add(Reply(triage_frames()))
    with redis_server() as server:
        admin = aioredis.Redis.from_url(server.url)
        here = RedisEventStore.from_url(server.url, prefix="refusing:")  # this loop's
        store = RedisEventStore.from_url(server.url, prefix="refusing:", block_ms=200)
        async with (
            AppServer(create_app(upstream.base_url, store=store)) as app,
            httpx.AsyncClient(timeout=30) as client,
        ):
            await admin.config_set("maxmemory", "1")
            health = await client.get(f"{app.url}/health")
            refused = await client.post(f"{app.url}/v1/slot-streams", json=BODY)
            with pytest.raises(StoreUnavailable, match="OutOfMemoryError"):
                await here.append("any", StoredEvent(1, "slot-delta", "{}"))
            await admin.config_set("maxmemory", "0")
            healthy = await client.get(f"{app.url}/health")
            async with aconnect_sse(client, "POST", f"{app.url}/v1/slot-streams", json=BODY) as sse:
                last = [message async for message in sse.aiter_sse()][-1]
        await here.aclose()
        await admin.aclose()
    assert health.status_code == 503
    assert (refused.status_code, refused.json()["error"]["code"]) == (503, "store_unavailable")
    assert healthy.status_code == 200
    assert last.event == "done"
