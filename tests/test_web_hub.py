"""StreamHub.start under concurrency: starts that wait on the store at the same time.

The in-memory store never suspends, so it runs here behind a store that yields to the
event loop on every call, as Redis does; Redis itself runs too.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator

import pytest

from slotflight.assemble.events import Event
from slotflight.web import EventStore, EventStoreFull, MemoryEventStore, RedisEventStore
from slotflight.web._hub import ShuttingDown, StreamHub
from tests.redis_support import redis_url  # noqa: F401 - the fixture


class YieldingStore(MemoryEventStore):
    """The in-memory store, answering each call only after a few turns of the loop."""

    async def heartbeat(self, producer: str, seconds: float) -> None:
        await _turns()
        await super().heartbeat(producer, seconds)

    async def create(self, stream_id: str, producer: str = "") -> None:
        await _turns()
        await super().create(stream_id, producer)

    async def touch(self, stream_id: str, seconds: float) -> None:
        await _turns()
        await super().touch(stream_id, seconds)

    async def end(self, stream_id: str, data: str) -> None:
        await _turns()
        await super().end(stream_id, data)


async def _turns() -> None:
    for _ in range(3):
        await asyncio.sleep(0)


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
async def store(request: pytest.FixtureRequest) -> AsyncIterator[EventStore]:
    made: EventStore
    if request.param == "memory":
        made = YieldingStore()
    else:
        url = request.getfixturevalue("redis_url")
        made = RedisEventStore.from_url(url, prefix=f"hub-{uuid.uuid4().hex}:", block_ms=50)
    yield made
    await made.aclose()


class Source:
    """A slot stream that never yields; records whether it was closed."""

    def __init__(self) -> None:
        self.closed = False

    def __aiter__(self) -> Source:
        return self

    async def __anext__(self) -> Event:
        await asyncio.Event().wait()
        raise StopAsyncIteration  # pragma: no cover

    async def aclose(self) -> None:
        self.closed = True


def _lease_tasks() -> list[asyncio.Task[object]]:
    return [t for t in asyncio.all_tasks() if t.get_name() == "slot-stream-lease" and not t.done()]


async def _stored(store: EventStore, stream_id: str) -> list[dict[str, object]]:
    return [json.loads(e.data) async for e in store.follow(stream_id)]


async def test_concurrent_first_starts_run_one_lease_and_close_it(store: EventStore) -> None:
    hub = StreamHub(store, resume_grace_s=30)
    await asyncio.gather(*(hub.start(uuid.uuid4().hex, Source()) for _ in range(3)))
    assert hub.active == 3
    assert len(_lease_tasks()) == 1
    await hub.aclose()
    assert _lease_tasks() == []


async def test_concurrent_starts_keep_to_max_active(store: EventStore) -> None:
    hub = StreamHub(store, resume_grace_s=30, max_active=2)
    sources = [Source() for _ in range(5)]
    results = await asyncio.gather(
        *(hub.start(uuid.uuid4().hex, source) for source in sources), return_exceptions=True
    )
    assert sum(result is None for result in results) == 2
    refused = [s for s, r in zip(sources, results, strict=True) if isinstance(r, EventStoreFull)]
    assert len(refused) == 3 and all(source.closed for source in refused)
    assert hub.active == 2
    assert hub._starting == 0  # the refused starts gave their places back
    await hub.aclose()


async def test_a_start_overtaken_by_a_drain_is_refused_and_ended(store: EventStore) -> None:
    hub = StreamHub(store, resume_grace_s=30)
    stream_id = uuid.uuid4().hex
    source = Source()
    starting = asyncio.create_task(hub.start(stream_id, source))
    await asyncio.sleep(0)  # past its checks, waiting for the store
    await hub.drain(timeout=0)  # nothing was running: over at once
    with pytest.raises(ShuttingDown):
        await starting
    assert source.closed and hub.active == 0
    stored = await _stored(store, stream_id)
    assert [m["type"] for m in stored] == ["error"]
    assert stored[0]["error"]["code"] == "shutting_down"  # type: ignore[index]
    await hub.aclose()
    assert _lease_tasks() == []


async def test_a_failed_first_lease_is_tried_again_by_the_next_start() -> None:
    class FailingOnce(YieldingStore):
        calls = 0

        async def heartbeat(self, producer: str, seconds: float) -> None:
            self.calls += 1
            if self.calls == 1:
                await _turns()
                raise ConnectionError("the store is away")
            await super().heartbeat(producer, seconds)

    store = FailingOnce()
    hub = StreamHub(store, resume_grace_s=30)
    first = await asyncio.gather(
        *(hub.start(uuid.uuid4().hex, Source()) for _ in range(2)), return_exceptions=True
    )
    assert [type(r) for r in first] == [ConnectionError, ConnectionError]
    assert store.calls == 1  # both waited for the one lease
    await hub.start(uuid.uuid4().hex, Source())
    assert hub.active == 1 and store.calls == 2
    await hub.aclose()
    await store.aclose()


async def test_a_drain_while_an_abandoned_stream_ends_keeps_its_last_message(
    store: EventStore,
) -> None:
    """The watcher cancelled a producer (no reader left) and it is storing its
    ``abandoned`` end when a drain comes: the end is stored, not lost to the second
    cancellation."""
    hub = StreamHub(store, resume_grace_s=30)
    stream_id = uuid.uuid4().hex
    source = Source()
    await hub.start(stream_id, source)
    producer = hub._producers[stream_id]
    await asyncio.sleep(0)  # the producer waits for its source
    producer.cancel()  # as the watcher does
    await asyncio.sleep(0)  # the producer is inside the store's end()
    assert not producer.done()
    await hub.drain(timeout=0)
    assert producer.done() and source.closed and hub.active == 0
    stored = await _stored(store, stream_id)
    assert [m["type"] for m in stored] == ["error"]
    assert stored[0]["error"]["code"] == "abandoned"  # type: ignore[index]
    await hub.aclose()
