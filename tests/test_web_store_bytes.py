"""The memory store bounds the bytes one stream keeps, not only its message count.

A client may pick ``state_mode="full"`` with ``coalesce_ms=0``: every message then
carries the whole object, so 10,000 kept messages of a long value hold O(n²) bytes. The
budget keeps only the last messages within ``max_stream_bytes``; a reader behind them
gets ``resume_gap``."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import httpx
from httpx_sse import aconnect_sse

from slotflight.plan.compiler import compile as compile_schema
from slotflight.plan.instance import walk_instance
from slotflight.syntax import get_syntax
from slotflight.testing import AppServer, Reply, ScriptedServer
from slotflight.web import MemoryEventStore, StoredEvent, create_app

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"summary": {"type": "string"}},
    "required": ["summary"],
}
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
    plan = compile_schema(SCHEMA)
    value = "abcd" * 1000
    text = get_syntax().write(plan, list(walk_instance(plan, {"summary": value})))
    store = _MeasuredStore(max_stream_bytes=BUDGET)
    body = {
        "model": "scripted",
        "messages": [{"role": "user", "content": "Summarise."}],
        "schema": SCHEMA,
        "options": {"state_mode": "full", "coalesce_ms": 0, "max_attempts": 1},
    }
    async with ScriptedServer() as upstream:
        upstream.add(Reply(text, chunks=4))
        async with (
            AppServer(create_app(upstream.base_url, store=store)) as app,
            httpx.AsyncClient(base_url=app.url, timeout=30) as client,
            aconnect_sse(client, "POST", "/v1/slot-streams", json=body) as source,
        ):
            # The reader keeps up to ``done``, or falls behind the budget and gets
            # ``resume_gap``: either way the stream stored more than the budget.
            last = [message async for message in source.aiter_sse()][-1]
            assert last.event in ("done", "error")
    assert store.appended > BUDGET  # the message count alone would have kept it all
    assert 0 < store.most <= BUDGET
