"""The memory store bounds the bytes one stream keeps, not only its message count.

A client may pick ``state_mode="full"``: every message then carries the whole object,
so 10,000 kept messages of a long value hold 10,000 times its bytes. The budget keeps
only the last messages within ``max_stream_bytes``; a reader behind them gets
``resume_gap``."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from slotflight.web import MemoryEventStore, StoredEvent
from tests.web_support import full_mode_past_the_budget

BUDGET = 64 * 1024


def event(number: int, data: str) -> StoredEvent:
    return StoredEvent(number, "slot-delta", data)


async def test_the_oldest_messages_leave_once_the_stream_holds_its_byte_budget() -> None:
    store = MemoryEventStore(max_stream_bytes=BUDGET)
    await store.create("s")
    big = "x" * 10_000
    for number in range(1, 51):  # about 500 KB in all
        await store.append("s", event(number, big))
        assert store.stream_bytes("s") <= BUDGET
    stop = asyncio.Event()
    stop.set()  # the stream is live: return instead of waiting for more
    kept = [e async for e in store.follow("s", 44, stop)]
    assert [e.id for e in kept] == [45, 46, 47, 48, 49, 50]
    assert sum(sys.getsizeof(e.data) + sys.getsizeof(e.event) for e in kept) <= BUDGET
    behind = [e async for e in store.follow("s", 10, stop)]
    assert [json.loads(e.data)["error"]["code"] for e in behind] == ["resume_gap"]

    huge = "y" * (2 * BUDGET)  # one message over the budget is kept on its own
    await store.append("s", event(51, huge))
    assert [e.id async for e in store.follow("s", 50, stop)] == [51]


class _MeasuredStore(MemoryEventStore):
    """Records, after every append, the bytes the stream holds: the largest, and what
    was appended in all."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.appended = 0
        self.most = 0

    async def append(self, stream_id: str, event: StoredEvent) -> None:
        self.appended += len(event.data)
        await super().append(stream_id, event)
        self.most = max(self.most, self.stream_bytes(stream_id))


async def test_a_full_mode_stream_without_coalescing_stays_within_the_budget() -> None:
    store = _MeasuredStore(max_stream_bytes=BUDGET)
    # The reader keeps up to ``done``, or falls behind the budget and gets
    # ``resume_gap``: either way the stream stored more than the budget.
    await full_mode_past_the_budget(store)
    assert store.appended > BUDGET  # the message count alone would have kept it all
    assert 0 < store.most <= BUDGET
