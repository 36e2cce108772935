"""Resuming with a ``Last-Event-ID`` beyond the stream's last message is refused, on
both stores: no client can have seen that id, and answering with nothing (a finished
stream) or with the messages after it (a live one) leaves an ``EventSource``
reconnecting forever or silently missing messages."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest

from slotflight.web import EventStore, MemoryEventStore, RedisEventStore, StoredEvent
from tests.redis_support import redis_url  # noqa: F401 - the fixture
from tests.test_web_store import StoreFactory, event, make_store  # noqa: F401 - the fixture
from tests.web_support import event_ids, gateway_on, live_stream, post_triage


async def finished_stream(store: EventStore) -> EventStore:
    """``store`` with the stream ``s``: two messages, then ``done`` (id 3)."""
    await store.create("s")
    for number in (1, 2):
        await store.append("s", event(number))
    await store.append("s", event(3, "done"))
    return store


def error_code(message: StoredEvent) -> str:
    assert message.event == "error" and message.id is None
    return str(json.loads(message.data)["error"]["code"])


async def test_a_finished_stream_refuses_a_resume_beyond_its_end(
    make_store: StoreFactory,  # noqa: F811 - the fixture
) -> None:
    store = await finished_stream(make_store())
    assert [e async for e in store.follow("s", 3)] == []  # it read the end: nothing more
    beyond = [e async for e in store.follow("s", 4)]
    assert [error_code(e) for e in beyond] == ["invalid_last_event_id"]
    assert await store.last_id("s") == 3
    assert await store.last_id("other") is None


async def test_a_live_stream_refuses_a_resume_beyond_its_last_message(
    make_store: StoreFactory,  # noqa: F811 - the fixture
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
    async with gateway_on(gateway_store) as (upstream, client):
        posted = await post_triage(upstream, client)
        location = posted.headers["location"]
        last = max(event_ids(posted.text))

        ended = await client.get(location, headers={"Last-Event-ID": str(last)})
        assert ended.status_code == 204  # it read the end: nothing more
        for after in (last + 1, 1000):
            refused = await client.get(location, headers={"Last-Event-ID": str(after)})
            assert refused.status_code == 400
            assert refused.json()["error"]["code"] == "invalid_last_event_id"


async def test_the_gateway_answers_400_to_a_resume_beyond_a_live_stream(
    gateway_store: EventStore,
) -> None:
    async with (
        gateway_on(gateway_store) as (upstream, client),
        live_stream(upstream, client) as (location, first),
    ):
        int(first)  # the id is a number
        async with client.stream("GET", location, headers={"Last-Event-ID": "1000"}) as refused:
            assert refused.status_code == 400
            body = json.loads(await refused.aread())
        assert body["error"]["code"] == "invalid_last_event_id"
