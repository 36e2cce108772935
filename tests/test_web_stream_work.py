"""The gateway keeps serving while one stream's costly step runs.

Closing a value validates it and runs its slot checks: work proportional to the value,
and more when many earlier texts share its words. Here the built-in ``placeholder``
check is made to block on one value until the test lets it go; meanwhile ``/health``
and a whole other stream must be served. The check waits at most :data:`BOUND_S`
seconds (so that a stalled gateway fails the test instead of hanging it) and records
whether the test released it or the bound ran out: nothing here depends on how long
anything takes.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from httpx_sse import aconnect_sse

from slotflight.assemble import checks as check_module
from slotflight.assemble.checks import CheckFailure, CheckState
from slotflight.client.feed_placement import COSTLY_STEP_S, OFFLOAD_CHARS
from slotflight.plan.compiler import compile as compile_schema
from slotflight.plan.model import Slot
from slotflight.syntax import DEFAULT_SYNTAX, render_frames
from slotflight.testing import AppServer, Reply, ScriptedServer
from slotflight.web import create_app
from tests.web_support import TRIAGE_SCHEMA, TRIAGE_VALUE, triage_frames

#: Seconds the blocking check waits for the test at most.
BOUND_S = 10.0

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"summary": {"type": "string"}, "owner": {"type": "string"}},
    "required": ["summary", "owner"],
}
#: A value long enough to be fed on a worker from its :data:`OFFLOAD_CHARS` th character.
LARGE = " ".join(f"word{i}" for i in range(5000))
#: A short value, and one whose check costs more CPU than :data:`COSTLY_STEP_S`.
SHORT = "the platform team"
COSTLY = "a summary whose check is costly"


@pytest.fixture
async def upstream() -> AsyncIterator[ScriptedServer]:
    async with ScriptedServer() as server:
        yield server


class SlowCheck:
    """The built-in ``placeholder`` check, blocking on ``blocked`` until released and
    spending CPU on ``costly``."""

    def __init__(self, blocked: str, costly: str | None = None) -> None:
        self.blocked = blocked
        self.costly = costly
        self.entered = threading.Event()
        self.release = threading.Event()
        self.outcomes: list[str] = []  # per blocked call: "released" or "bound ran out"
        self.threads: list[str] = []
        self._check = check_module.check_placeholder

    def __call__(self, slot: Slot, value: Any, state: CheckState) -> CheckFailure | None:
        if value == self.costly:
            started = time.thread_time()
            while time.thread_time() - started <= 4 * COSTLY_STEP_S:
                pass
        if value == self.blocked:
            self.threads.append(threading.current_thread().name)
            self.entered.set()
            released = self.release.wait(BOUND_S)
            self.outcomes.append("released" if released else "bound ran out")
        return self._check(slot, value, state)


async def _read(client: httpx.AsyncClient, body: dict[str, Any]) -> list[dict[str, Any]]:
    async with aconnect_sse(client, "POST", "/v1/slot-streams", json=body) as source:
        return [json.loads(message.data) async for message in source.aiter_sse()]


async def _served_while_blocked(
    upstream: ScriptedServer, check: SlowCheck, value: dict[str, str], chunks: int
) -> list[dict[str, Any]]:
    """Stream ``value``; while ``check`` blocks on it, ``/health`` and a whole triage
    stream must be answered. The messages of ``value``'s stream."""
    frames = render_frames(compile_schema(SCHEMA), value, DEFAULT_SYNTAX)
    upstream.add(Reply(frames, chunks=chunks), Reply(triage_frames(), chunks=6))
    body = {"model": "scripted", "messages": [{"role": "user", "content": "Summarise."}]}
    async with (
        AppServer(create_app(upstream.base_url)) as app,
        httpx.AsyncClient(base_url=app.url, timeout=BOUND_S * 3) as client,
    ):
        first = asyncio.create_task(_read(client, {**body, "schema": SCHEMA}))
        assert await asyncio.to_thread(check.entered.wait, BOUND_S)
        health = await client.get("/health")
        other = await _read(client, {**body, "schema": TRIAGE_SCHEMA})
        served_while_blocked = not check.outcomes
        check.release.set()
        messages = await first
    assert served_while_blocked
    assert check.outcomes == ["released"]
    assert health.status_code == 200 and health.json()["active_streams"] == 1
    assert other[-1]["type"] == "done" and other[-1]["state"] == TRIAGE_VALUE
    # The blocked stream is whole and in order; its check ran on a worker thread.
    assert messages[-1]["type"] == "done" and messages[-1]["state"] == value
    for path, text in value.items():
        deltas = [
            m["delta"] for m in messages if m["type"] == "slot-delta" and m["path"] == f"/{path}"
        ]
        assert "".join(deltas) == text
    assert check.threads and all(name.startswith("slotflight-stream") for name in check.threads)
    return messages


async def test_closing_a_large_value_stalls_neither_health_nor_other_streams(
    upstream: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert len(LARGE) > 2 * OFFLOAD_CHARS
    check = SlowCheck(blocked=LARGE)
    monkeypatch.setitem(check_module._BUILT_IN, "placeholder", check)
    await _served_while_blocked(upstream, check, {"summary": LARGE, "owner": SHORT}, chunks=50)


async def test_after_a_costly_step_even_short_values_close_on_a_worker(
    upstream: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The first value's check costs more CPU than a step may on the event loop; the
    # second value is short, but its stream is costly now.
    check = SlowCheck(blocked=SHORT, costly=COSTLY)
    monkeypatch.setitem(check_module._BUILT_IN, "placeholder", check)
    await _served_while_blocked(upstream, check, {"summary": COSTLY, "owner": SHORT}, chunks=4)
