"""examples/fastapi_app.py served by uvicorn against the scripted upstream."""

from __future__ import annotations

import importlib
import json
from collections.abc import AsyncIterator

import httpx
import pytest
from httpx_sse import aconnect_sse

from slotflight.plan.compiler import compile as compile_schema
from slotflight.syntax import render_frames
from slotflight.testing import AppServer, Reply, ScriptedServer
from tests.web_support import apply_messages

VALUE = {
    "customer": "Dana Whitfield",
    "company": "Harbor Freight Logistics",
    "summary": "The nightly CSV export fails for files over 2 GB.",
    "area": "export",
    "sentiment": "negative",
    "deadline": "Friday",
}


@pytest.fixture
async def upstream() -> AsyncIterator[ScriptedServer]:
    async with ScriptedServer() as server:
        yield server


async def test_example_route_streams_the_triage(
    upstream: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", upstream.base_url)
    example = importlib.reload(importlib.import_module("examples.fastapi_app"))
    upstream.add(Reply(render_frames(compile_schema(example.Triage), VALUE), chunks=5))
    async with (
        AppServer(example.app) as server,
        httpx.AsyncClient(base_url=server.url, timeout=30) as client,
        aconnect_sse(client, "POST", "/triage", json={"ticket": "Exports fail."}) as source,
    ):
        # a ping (a comment) after an event with an id reads as an empty message
        data = [json.loads(m.data) async for m in source.aiter_sse() if m.data]
    assert data[-1]["type"] == "done"
    assert apply_messages(data) == VALUE == data[-1]["state"]
    assert upstream.request(0).body["messages"][-1]["content"].endswith("Exports fail.")
