"""The Redis store bounds the bytes one stream keeps, as the memory store does.

A client may pick ``state_mode="full"``: every message then carries the whole object,
so a message count alone lets one stream's Redis memory grow with the square of its
output. The store keeps only the last messages within ``max_stream_bytes`` (the bytes
of their event names and data; the last message always), trimmed in the same script as
the append; a reader behind them gets ``resume_gap``."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any, cast

import pytest
import redis.asyncio as aioredis

from slotflight.web import RedisEventStore, StoredEvent
from slotflight.web._memory_store import DEFAULT_MAX_STREAM_BYTES
from tests.redis_support import redis_url  # noqa: F401 - the fixture
from tests.web_support import full_mode_past_the_budget

pytestmark = pytest.mark.redis

BUDGET = 64 * 1024


@pytest.fixture
async def admin(redis_url: str) -> AsyncIterator[aioredis.Redis]:  # noqa: F811
    client = aioredis.Redis.from_url(redis_url)
    yield client
    await client.aclose()


def make_store(url: str, **options: Any) -> RedisEventStore:
    return RedisEventStore.from_url(url, prefix=f"test-{uuid.uuid4().hex}:", **options)


async def kept_bytes(admin: aioredis.Redis, store: RedisEventStore, stream_id: str) -> int:
    """The bytes of the event names and data of the entries Redis holds for the stream."""
    entries = cast(
        "list[tuple[bytes, dict[bytes, bytes]]]",
        await admin.xrange(f"{store.prefix}{stream_id}:events"),
    )
    return sum(len(fields[b"e"]) + len(fields[b"d"]) for _, fields in entries)


def event(number: int, data: str) -> StoredEvent:
    return StoredEvent(number, "slot-delta", data)


def codes(events: list[StoredEvent]) -> list[str]:
    return [json.loads(e.data)["error"]["code"] for e in events]


def test_the_default_budget_is_the_memory_stores() -> None:
    store = RedisEventStore(aioredis.Redis())
    assert store.max_stream_bytes == DEFAULT_MAX_STREAM_BYTES
    with pytest.raises(ValueError, match="max_stream_bytes"):
        RedisEventStore(aioredis.Redis(), max_stream_bytes=0)


async def test_the_oldest_messages_leave_once_the_stream_holds_its_byte_budget(
    redis_url: str,  # noqa: F811 - the fixture
    admin: aioredis.Redis,
) -> None:
    store = make_store(redis_url, max_stream_bytes=BUDGET, block_ms=50)
    await store.create("s")
    big = "x" * 10_000
    for number in range(1, 51):  # about 500 KB in all
        await store.append("s", event(number, big))
        assert await kept_bytes(admin, store, "s") <= BUDGET
    stop = asyncio.Event()
    stop.set()  # the stream is live: return instead of waiting for more
    kept = [e async for e in store.follow("s", 44, stop)]
    assert [e.id for e in kept] == [45, 46, 47, 48, 49, 50]
    behind = [e async for e in store.follow("s", 10, stop)]
    assert codes(behind) == ["resume_gap"]
    assert await store.last_id("s") == 50

    huge = "y" * (2 * BUDGET)  # one message over the budget is kept on its own
    await store.append("s", event(51, huge))
    assert [e.id async for e in store.follow("s", 50, stop)] == [51]
    assert await admin.xlen(f"{store.prefix}s:events") == 1

    # The last message a store ends a stream with is bounded the same way.
    assert await store.end("s", json.dumps({"type": "error", "error": {"code": "x"}}))
    assert [e.id async for e in store.follow("s", 51)] == [52]
    assert await kept_bytes(admin, store, "s") <= BUDGET
    await store.aclose()


async def test_the_byte_and_message_bounds_hold_together(
    redis_url: str,  # noqa: F811 - the fixture
) -> None:
    store = make_store(redis_url, max_events=5, max_stream_bytes=1000, block_ms=50)
    await store.create("s")
    stop = asyncio.Event()
    stop.set()
    for number in range(1, 11):  # 60 bytes each: the count bounds them
        await store.append("s", event(number, "z" * 50))
    assert [e.id async for e in store.follow("s", 5, stop)] == [6, 7, 8, 9, 10]
    # 910 bytes more: the oldest leave until the rest hold at most 1,000 bytes.
    await store.append("s", event(11, "z" * 900))
    assert [e.id async for e in store.follow("s", 9, stop)] == [10, 11]
    assert codes([e async for e in store.follow("s", 8, stop)]) == ["resume_gap"]
    await store.aclose()


class _MeasuredStore(RedisEventStore):
    """Records, after every append, the bytes Redis holds for the stream: the largest,
    and what was appended in all (read with its own client: it runs in the app's loop)."""

    appended = 0
    most = 0

    async def append(self, stream_id: str, event: StoredEvent) -> None:
        self.appended += len(event.data)
        await super().append(stream_id, event)
        self.most = max(self.most, await kept_bytes(self.client, self, stream_id))


async def test_a_full_mode_stream_stays_within_the_budget(
    redis_url: str,  # noqa: F811 - the fixture
) -> None:
    store = _MeasuredStore.from_url(
        redis_url, prefix=f"test-{uuid.uuid4().hex}:", max_stream_bytes=BUDGET, block_ms=50
    )
    assert isinstance(store, _MeasuredStore)
    await full_mode_past_the_budget(store)  # ``resume_gap`` for a slow reader
    assert store.appended > BUDGET  # the message count alone would have kept it all
    assert 0 < store.most <= BUDGET
