"""The event store contract, run against the in-memory store and Redis Streams."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Callable

import pytest

from slotflight.web import (
    EventStore,
    EventStoreFull,
    MemoryEventStore,
    RedisEventStore,
    StoredEvent,
)
from tests.redis_support import redis_url  # noqa: F401 - the fixture

StoreFactory = Callable[..., EventStore]


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
async def make_store(request: pytest.FixtureRequest) -> AsyncIterator[StoreFactory]:
    made: list[EventStore] = []
    if request.param == "memory":

        def factory(**options: float) -> EventStore:
            store = MemoryEventStore(**options)  # type: ignore[arg-type]
            made.append(store)
            return store
    else:
        url = request.getfixturevalue("redis_url")
        prefix = f"test-{uuid.uuid4().hex}:"

        def factory(**options: float) -> EventStore:
            options.pop("max_streams", None)
            store = RedisEventStore.from_url(url, prefix=prefix, block_ms=50, **options)
            made.append(store)
            return store

    yield factory
    for store in made:
        await store.aclose()


def event(number: int, kind: str = "slot-delta") -> StoredEvent:
    return StoredEvent(number, kind, json.dumps({"type": kind, "n": number}))


async def read_all(store: EventStore, stream_id: str, after: int = 0) -> list[StoredEvent]:
    return [e async for e in store.follow(stream_id, after)]


async def test_replay_from_any_position(make_store: StoreFactory) -> None:
    store = make_store()
    await store.create("s")
    for number in range(1, 6):
        await store.append("s", event(number))
    await store.append("s", event(6, "done"))

    assert await store.exists("s") and not await store.exists("other")
    assert [e.id for e in await read_all(store, "s")] == [1, 2, 3, 4, 5, 6]
    assert await read_all(store, "s", 4) == [event(5), event(6, "done")]
    assert await read_all(store, "s", 6) == []


async def test_follow_goes_live_until_the_terminal_event(make_store: StoreFactory) -> None:
    store = make_store()
    await store.create("s")
    await store.append("s", event(1))

    async def produce() -> None:
        for number in range(2, 5):
            await asyncio.sleep(0.02)
            await store.append("s", event(number))
        await store.append("s", event(5, "error"))
        await store.append("s", event(6))  # after the terminal event: never read

    producer = asyncio.create_task(produce())
    received = await asyncio.wait_for(read_all(store, "s"), 10)
    await producer
    assert [e.id for e in received] == [1, 2, 3, 4, 5]
    assert received[-1].terminal


async def test_trimmed_history_is_reported_as_a_gap(make_store: StoreFactory) -> None:
    store = make_store(max_events=3)
    await store.create("s")
    for number in range(1, 400):
        await store.append("s", event(number))
    received = await asyncio.wait_for(read_all(store, "s", 0), 10)
    assert len(received) == 1 and received[0].id is None
    assert json.loads(received[0].data)["error"]["code"] == "resume_gap"
    # Reading from a retained position still works.
    await store.append("s", event(400, "done"))
    assert [e.id for e in await read_all(store, "s", 398)] == [399, 400]


async def test_streams_expire_after_the_ttl(make_store: StoreFactory) -> None:
    store = make_store(ttl=1.0)
    await store.create("s")
    await store.append("s", event(1))
    assert await store.exists("s")
    follower = asyncio.create_task(read_all(store, "s"))
    received = await asyncio.wait_for(follower, 10)
    assert received[0] == event(1)
    assert received[-1].id is None
    assert json.loads(received[-1].data)["error"]["code"] == "stream_expired"
    assert not await store.exists("s")


async def test_presence_lasts_for_the_touch_window(make_store: StoreFactory) -> None:
    store = make_store()
    await store.create("s")
    assert not await store.watched("s")
    await store.touch("s", 1.0)
    assert await store.watched("s")
    await asyncio.sleep(1.3)
    assert not await store.watched("s")


async def test_memory_store_bounds_the_number_of_streams() -> None:
    store = MemoryEventStore(max_streams=2)
    await store.create("a")
    await store.create("b")
    with pytest.raises(EventStoreFull):
        await store.create("c")  # both still running
    await store.append("a", event(1, "done"))
    await store.create("c")  # the finished stream made room
    assert not await store.exists("a")
    assert await store.exists("b") and await store.exists("c")
    assert len(store) == 2


async def test_a_finished_memory_stream_is_read_back_from_where_the_reader_resumes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from slotflight.web import _memory_store

    store = MemoryEventStore(max_events=1000)
    await store.create("s")
    for number in range(1, 1201):  # the first 200 fall out of the retained 1000
        await store.append("s", event(number, "done" if number == 1200 else "slot-delta"))
    unpacked: list[int] = []
    unpack = _memory_store._unpack
    monkeypatch.setattr(_memory_store, "_unpack", lambda block: unpacked.append(1) or unpack(block))
    block = _memory_store.PACKED_BLOCK
    for after in (200, 201, 200 + block - 1, 200 + block, 200 + block + 1, 1198, 1199):
        unpacked.clear()
        read = await read_all(store, "s", after)
        assert read == [
            event(n, "done" if n == 1200 else "slot-delta") for n in range(after + 1, 1201)
        ]
        # only the blocks holding what the reader asked for are unpacked
        assert len(unpacked) == -(-(1200 - 200) // block) - (after - 200) // block
    assert [e.event for e in await read_all(store, "s", 10)] == ["error"]  # a gap


async def test_a_lapsed_producer_lease_ends_the_stream(make_store: StoreFactory) -> None:
    store = make_store()
    await store.heartbeat("instance-a", 1.0)
    await store.create("s", "instance-a")
    await store.append("s", event(1))
    started = asyncio.get_running_loop().time()
    received = await asyncio.wait_for(read_all(store, "s"), 10)
    waited = asyncio.get_running_loop().time() - started

    assert [e.id for e in received] == [1, 2]
    assert received[-1].terminal and json.loads(received[-1].data)["error"]["code"] == (
        "producer_lost"
    )
    assert 0.5 < waited < 5  # the lease (1 s) lapsed, then a reader's check found it
    # The producer, only slow, cannot go on: its next id is no longer new.
    with pytest.raises(Exception):  # noqa: B017 - ValueError (memory) or ResponseError (Redis)
        await store.append("s", event(2))
    assert [e.id for e in await read_all(store, "s")] == [1, 2]


async def test_a_renewed_lease_keeps_the_stream_alive(make_store: StoreFactory) -> None:
    store = make_store()
    await store.heartbeat("instance-a", 1.0)
    await store.create("s", "instance-a")

    async def produce() -> None:
        # 1.8 s in all, longer than one lease; each renewal comes 0.7 s before it lapses.
        for _ in range(6):
            await store.heartbeat("instance-a", 1.0)
            await asyncio.sleep(0.3)
        await store.append("s", event(1, "done"))

    producer = asyncio.create_task(produce())
    received = await asyncio.wait_for(read_all(store, "s"), 10)
    await producer
    assert [(e.id, e.event) for e in received] == [(1, "done")]


@pytest.mark.redis
async def test_a_terminal_message_stored_between_a_read_and_the_finished_check_is_read(
    redis_url: str,  # noqa: F811 - the fixture
) -> None:
    """A Redis reader whose read came back empty, and whose stream then finished before it
    looked whether it had, still reads the terminal message (it read nothing before)."""
    store = RedisEventStore.from_url(redis_url, prefix=f"test-{uuid.uuid4().hex}:", block_ms=50)
    try:
        await store.create("s")
        await store.append("s", event(1))
        real_get = store.client.get
        appended: list[bool] = []

        async def get_after_the_end(name: str) -> object:
            if not appended:  # the producer ends the stream just before the reader looks
                appended.append(True)
                await store.append("s", event(2, "done"))
            return await real_get(name)

        store.client.get = get_after_the_end  # type: ignore[method-assign]
        received = await asyncio.wait_for(read_all(store, "s"), 10)
        assert appended
        assert [(e.id, e.event) for e in received] == [(1, "slot-delta"), (2, "done")]
    finally:
        await store.aclose()


async def test_follow_returns_when_told_to_stop(make_store: StoreFactory) -> None:
    store = make_store()
    await store.create("s")
    await store.append("s", event(1))
    stop = asyncio.Event()
    follower = asyncio.create_task(_collect(store.follow("s", 0, stop)))
    await asyncio.sleep(0.2)
    assert not follower.done()
    stop.set()
    received = await asyncio.wait_for(follower, 5)
    assert [e.id for e in received] == [1]


async def _collect(events: AsyncIterator[StoredEvent]) -> list[StoredEvent]:
    return [e async for e in events]


async def test_end_stores_a_last_message_once(make_store: StoreFactory) -> None:
    store = make_store()
    await store.ping()
    await store.create("s")
    await store.append("s", event(1))
    await store.append("s", event(2))
    failure = json.dumps({"type": "error", "error": {"code": "internal_error"}})
    assert await store.end("s", failure)
    assert not await store.end("s", failure)  # it has ended: nothing more is stored
    assert await read_all(store, "s") == [event(1), event(2), StoredEvent(3, "error", failure)]
    assert not await store.end("unknown", failure)
    assert not await store.exists("unknown")
    with pytest.raises(ValueError):  # a producer that goes on after the end is refused
        await store.append("s", event(3))
