"""Resuming with a ``Last-Event-ID`` beyond the stream's last message is refused, on
both stores: no client can have seen that id, and answering with nothing (a finished
stream) or with the messages after it (a live one) leaves an ``EventSource``
reconnecting forever or silently missing messages."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
from httpx_sse import aconnect_sse

from slotflight.testing import AppServer, Reply, ScriptedServer
from slotflight.web import EventStore, MemoryEventStore, RedisEventStore, StoredEvent, create_app
from tests.redis_support import redis_url  # noqa: F401 - the fixture
from tests.test_web_store import event
from tests.web_support import TRIAGE_SCHEMA, triage_frames

BODY: dict[str, Any] = {
    "model": "scripted",
    "messages": [{"role": "user", "content": "The export fails."}],
    "schema": TRIAGE_SCHEMA,
    "options": {"max_attempts": 1},
}

#: ``make_store()``: a new store of the kind under test (closed by the fixture).
StoreFactory = Callable[[], EventStore]


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
async def make_store(request: pytest.FixtureRequest) -> AsyncIterator[StoreFactory]:
    made: list[EventStore] = []
    prefix = f"test-{uuid.uuid4().hex}:"

    def factory() -> EventStore:
        store: EventStore
        if request.param == "memory":
            store = MemoryEventStore()
        else:
            url = request.getfixturevalue("redis_url")
            store = RedisEventStore.from_url(url, prefix=prefix, block_ms=50)
        made.append(store)
        return store

    yield factory
    for store in made:
        await store.aclose()


def error_code(message: StoredEvent) -> str:
    assert message.event == "error" and message.id is None
    return str(json.loads(message.data)["error"]["code"])


async def test_a_finished_stream_refuses_a_resume_beyond_its_end(
    make_store: StoreFactory,
) -> None:
    store = make_store()
    await store.create("s")
    for number in (1, 2):
        await store.append("s", event(number))
    await store.append("s", event(3, "done"))

    assert [e async for e in store.follow("s", 3)] == []  # it read the end: nothing more
    beyond = [e async for e in store.follow("s", 4)]
    assert [error_code(e) for e in beyond] == ["invalid_last_event_id"]
    assert await store.last_id("s") == 3
    assert await store.last_id("other") is None


async def test_a_live_stream_refuses_a_resume_beyond_its_last_message(
    make_store: StoreFactory,
) -> None:
    store = make_store()
    await store.create("s")
    await store.append("s", event(1))
    await store.append("s", event(2))
    stop = asyncio.Event()
    stop.set()  # a reader that waits returns at once: the answer comes without waiting

    beyond = [e async for e in store.follow("s", 50, stop)]
    assert [error_code(e) for e in beyond] == ["invalid_last_event_id"]
    assert [e.id async for e in store.follow("s", 1, stop)] == [2]
    assert await store.last_id("s") == 2


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
def gateway_store(request: pytest.FixtureRequest) -> EventStore:
    """A store for a gateway (which closes it)."""
    if request.param == "memory":
        return MemoryEventStore()
    url = request.getfixturevalue("redis_url")
    return RedisEventStore.from_url(url, prefix=f"test-{uuid.uuid4().hex}:", block_ms=200)


async def test_the_gateway_answers_400_to_a_resume_beyond_a_finished_stream(
    gateway_store: EventStore,
) -> None:
    async with (
        ScriptedServer() as upstream,
        AppServer(create_app(upstream.base_url, store=gateway_store)) as app,
        httpx.AsyncClient(base_url=app.url, timeout=30) as client,
    ):
        upstream.add(Reply(triage_frames(), chunks=6))
        posted = await client.post("/v1/slot-streams", json=BODY)
        location = posted.headers["location"]
        last = max(int(line[4:]) for line in posted.text.splitlines() if line.startswith("id: "))

        ended = await client.get(location, headers={"Last-Event-ID": str(last)})
        assert ended.status_code == 200
        for after in (last + 1, 1000):
            refused = await client.get(location, headers={"Last-Event-ID": str(after)})
            assert refused.status_code == 400
            assert refused.json()["error"]["code"] == "invalid_last_event_id"


async def test_the_gateway_answers_400_to_a_resume_beyond_a_live_stream(
    gateway_store: EventStore,
) -> None:
    async with (
        ScriptedServer() as upstream,
        AppServer(create_app(upstream.base_url, store=gateway_store)) as app,
        httpx.AsyncClient(base_url=app.url, timeout=30) as client,
    ):
        # The model sends the first bytes, then nothing: the stream stays live.
        upstream.add(Reply(triage_frames(), chunks=4, stall_after_bytes=20))
        async with aconnect_sse(client, "POST", "/v1/slot-streams", json=BODY) as source:
            location = source.response.headers["location"]
            first = None
            async for message in source.aiter_sse():
                first = int(message.id)
                break
            assert first is not None
            async with client.stream("GET", location, headers={"Last-Event-ID": "1000"}) as refused:
                assert refused.status_code == 400
                body = json.loads(await refused.aread())
            assert body["error"]["code"] == "invalid_last_event_id"
