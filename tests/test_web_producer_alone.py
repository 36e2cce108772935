"""A stream's producer runs to its end after every reader left, so a later reader can
resume it (docs/web.md, "When nobody reads": only ``resume_grace_s`` without any reader
stops it, and then with ``abandoned``)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator
from typing import Any

import httpx
from httpx_sse import aconnect_sse

from slotflight.testing import AppServer, Reply, ScriptedServer
from slotflight.web import MemoryEventStore, StoredEvent, create_app
from tests.web_support import summary_body, summary_frames

VALUE = "abcd" * 1000
GATE = 10  # the producer holds this message until the first reader left
GUARD_S = 30  # a failure guard only: a stalled producer would hold the stream 60 s


class _GatedStore(MemoryEventStore):
    """Appends message :data:`GATE` only once a reader of its stream has left (so that
    reader left mid-stream), and records the last message appended."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.left = asyncio.Event()
        self.last: StoredEvent | None = None

    async def append(self, stream_id: str, event: StoredEvent) -> None:
        if event.id == GATE:
            await self.left.wait()
        self.last = event
        await super().append(stream_id, event)

    async def follow(
        self,
        stream_id: str,
        after: int = 0,
        stop: asyncio.Event | None = None,
        *,
        checked: bool = False,
    ) -> AsyncGenerator[StoredEvent, None]:
        try:
            async for event in super().follow(stream_id, after, stop, checked=checked):
                yield event
        finally:
            self.left.set()


async def _ended(app: Any) -> None:
    """Wait (guarded) until the app's producers all ended."""
    async with asyncio.timeout(GUARD_S):
        while app.state.hub.active:
            await asyncio.sleep(0.01)


async def test_a_stream_whose_reader_left_mid_stream_runs_to_done_for_a_resume() -> None:
    store = _GatedStore()
    async with ScriptedServer() as upstream:
        upstream.add(Reply(summary_frames(VALUE), chunks=4))
        app = create_app(upstream.base_url, store=store)
        async with (
            AppServer(app) as server,
            httpx.AsyncClient(base_url=server.url, timeout=GUARD_S) as client,
        ):
            async with aconnect_sse(
                client, "POST", "/v1/slot-streams", json=summary_body("patch")
            ) as s:
                stream_id = s.response.headers["slot-stream-id"]
                seen = []
                async for message in s.aiter_sse():
                    seen.append(int(message.id))
                    if len(seen) == GATE - 1:
                        break  # leave mid-stream: message GATE is not stored yet
            assert seen == list(range(1, GATE))
            await _ended(app)  # with no reader attached anywhere
            url = f"/v1/slot-streams/{stream_id}/events"
            headers = {"Last-Event-ID": str(GATE - 1)}
            async with aconnect_sse(client, "GET", url, headers=headers) as resumed:
                rest = [message async for message in resumed.aiter_sse()]
    assert [int(m.id) for m in rest] == list(range(GATE, GATE + len(rest)))
    assert rest[-1].event == "done"
    assert json.loads(rest[-1].data)["state"] == {"summary": VALUE}


class _LastStore(MemoryEventStore):
    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.last: StoredEvent | None = None

    async def append(self, stream_id: str, event: StoredEvent) -> None:
        self.last = event
        await super().append(stream_id, event)


async def test_a_stream_whose_reader_fell_behind_its_byte_budget_runs_to_done() -> None:
    # Full mode without coalescing: the reader falls behind the small budget, gets
    # ``resume_gap`` and leaves; the stream itself must still end with ``done``.
    store = _LastStore(max_stream_bytes=64 * 1024)
    async with ScriptedServer() as upstream:
        upstream.add(Reply(summary_frames(VALUE), chunks=4))
        app = create_app(upstream.base_url, store=store)
        async with (
            AppServer(app) as server,
            httpx.AsyncClient(base_url=server.url, timeout=GUARD_S) as client,
            aconnect_sse(client, "POST", "/v1/slot-streams", json=summary_body("full")) as source,
        ):
            last = [message async for message in source.aiter_sse()][-1]
            assert last.event in ("done", "error")
            await _ended(app)
    assert store.last is not None and store.last.event == "done"
    assert json.loads(store.last.data)["state"] == {"summary": VALUE}
