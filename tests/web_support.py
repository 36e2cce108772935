"""Shared parts of the web tests: the triage and summary schemas, scripted frame text
and request bodies for them, a gateway on a store, a free port and patch replay. Apps
are served with :class:`slotflight.testing.AppServer`."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from importlib import resources
from typing import Any

import httpx
import pytest
from httpx_sse import ServerSentEvent, aconnect_sse

from slotflight.plan.compiler import compile as compile_schema
from slotflight.plan.instance import UnexpressibleValue, walk_instance
from slotflight.syntax import get_syntax
from slotflight.testing import AppServer, Reply, ScriptedServer
from slotflight.web import EventStore, create_app
from tests.assembler_support import as_written

HOST = "127.0.0.1"

TRIAGE_SCHEMA: dict[str, Any] = json.loads(
    resources.files("slotflight.web").joinpath("static/triage.schema.json").read_text("utf-8")
)

TRIAGE_VALUE: dict[str, Any] = {
    "summary": "Export job fails with a timeout for large workspaces",
    "sentiment": "negative",
    "priority": 2,
    "tags": ["export", "timeout"],
    "action_items": [
        {"task": "Raise the export timeout", "owner": "platform", "due": "2025-07-01"},
        {"task": "Reply to the customer", "owner": "support", "due": "2025-06-20"},
    ],
}


def triage_frames(value: dict[str, Any] = TRIAGE_VALUE) -> str:
    """The frame text a model would write for ``value`` under ``TRIAGE_SCHEMA``, in the
    default syntax. A value that does not fit its slot is written as given."""
    plan = compile_schema(TRIAGE_SCHEMA)
    misfits = {}  # top-level scalar keys the writer refuses: written as given
    for key, given in value.items():
        try:
            list(walk_instance(plan, {key: given}))
        except UnexpressibleValue:
            misfits[key] = given
    fitted = {**value, **{key: TRIAGE_VALUE[key] for key in misfits}}
    frames = [
        as_written(f.slot, f.index, misfits[f.slot.path]) if f.slot.path in misfits else f
        for f in walk_instance(plan, fitted)
    ]
    return get_syntax().write(plan, frames)


#: A request for a triage in one attempt.
TRIAGE_BODY: dict[str, Any] = {
    "model": "scripted",
    "messages": [{"role": "user", "content": "The export fails."}],
    "schema": TRIAGE_SCHEMA,
    "options": {"max_attempts": 1},
}

SUMMARY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"summary": {"type": "string"}},
    "required": ["summary"],
}


def summary_frames(value: str) -> str:
    """The frame text a model would write for ``{"summary": value}`` under
    ``SUMMARY_SCHEMA``, in the default syntax."""
    plan = compile_schema(SUMMARY_SCHEMA)
    return get_syntax().write(plan, list(walk_instance(plan, {"summary": value})))


def summary_body(state_mode: str) -> dict[str, Any]:
    """A request for a summary in ``state_mode``, without coalescing, in one attempt."""
    return {
        "model": "scripted",
        "messages": [{"role": "user", "content": "Summarise."}],
        "schema": SUMMARY_SCHEMA,
        "options": {"state_mode": state_mode, "coalesce_ms": 0, "max_attempts": 1},
    }


def event_ids(text: str) -> list[int]:
    """The ids of the messages in the event-stream ``text``, in order."""
    return [int(line[4:]) for line in text.splitlines() if line.startswith("id: ")]


@asynccontextmanager
async def gateway_on(
    store: EventStore | None = None, *, timeout: float = 30
) -> AsyncIterator[tuple[ScriptedServer, httpx.AsyncClient]]:
    """A scripted model server and a client of a gateway app that streams from it and
    keeps its streams in ``store`` (which the app closes; default: a memory store)."""
    async with (
        ScriptedServer() as upstream,
        AppServer(create_app(upstream.base_url, store=store)) as app,
        httpx.AsyncClient(base_url=app.url, timeout=timeout) as client,
    ):
        yield upstream, client


async def post_triage(upstream: ScriptedServer, client: httpx.AsyncClient) -> httpx.Response:
    """A triage stream started with ``TRIAGE_BODY`` and read to its end, the model
    writing it in 6-character chunks."""
    upstream.add(Reply(triage_frames(), chunks=6))
    return await client.post("/v1/slot-streams", json=TRIAGE_BODY)


async def stream_through(
    text: str,
    body: dict[str, Any],
    *,
    store: EventStore | None = None,
    chunks: int = 4,
    timeout: float = 30,
) -> list[ServerSentEvent]:
    """Every message of the stream ``body`` starts on a gateway (see :func:`gateway_on`)
    whose model writes ``text`` in ``chunks``-character chunks."""
    async with gateway_on(store, timeout=timeout) as (upstream, client):
        upstream.add(Reply(text, chunks=chunks))
        async with aconnect_sse(client, "POST", "/v1/slot-streams", json=body) as source:
            return [message async for message in source.aiter_sse()]


async def full_mode_past_the_budget(store: EventStore) -> None:
    """Streams a 16 KB summary through a gateway on ``store`` in full mode without
    coalescing, read to the end: ``done``, or ``error`` (``resume_gap``) where the reader
    fell behind a 64 KB byte budget. The held delta, ``slot-complete`` and ``done`` each
    carry the value twice (``value`` and ``state``), more than that budget together
    however the deltas are coalesced."""
    messages = await stream_through(
        summary_frames("abcd" * 4000), summary_body("full"), store=store
    )
    assert messages[-1].event in ("done", "error")


@asynccontextmanager
async def live_stream(
    upstream: ScriptedServer, client: httpx.AsyncClient
) -> AsyncIterator[tuple[str, str]]:
    """A triage stream that stays live (the model sends its first bytes, then nothing),
    read to its first message: its location and that message's id."""
    upstream.add(Reply(triage_frames(), chunks=4, stall_after_bytes=20))
    async with aconnect_sse(client, "POST", "/v1/slot-streams", json=TRIAGE_BODY) as source:
        location = source.response.headers["location"]
        first = None
        async for message in source.aiter_sse():
            first = message.id
            break
        assert first is not None
        yield location, first


@pytest.fixture
async def upstream() -> AsyncIterator[ScriptedServer]:
    """A scripted model server on a free port (import the fixture into a test module)."""
    async with ScriptedServer() as server:
        yield server


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class Gateway:
    process: asyncio.subprocess.Process
    url: str


@asynccontextmanager
async def gateway_process(
    upstream: ScriptedServer, *options: str, env: Mapping[str, str] | None = None
) -> AsyncIterator[Gateway]:
    """``slotflight serve`` in a child process, once its ``/health`` answers; ``env``
    adds to the environment it inherits."""
    port = free_port()
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "slotflight.cli",
        "serve",
        "--upstream-base-url",
        upstream.base_url,
        "--port",
        str(port),
        *options,
        env={**os.environ, **(env or {})},
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        async with httpx.AsyncClient(timeout=5) as client:
            for _ in range(600):
                try:
                    if (await client.get(f"{url}/health")).status_code == 200:
                        break
                except httpx.TransportError:
                    await asyncio.sleep(0.05)
            else:
                raise RuntimeError("the gateway did not start")
        yield Gateway(process, url)
    finally:
        if process.returncode is None:
            process.kill()
        await process.wait()


def apply_messages(messages: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The state a client reaches from patch-mode messages: each ``slot-delta``'s
    ``delta`` appended to the string at its ``path``, every other ``patch`` applied."""
    import jsonpatch
    import jsonpointer

    state: dict[str, Any] = {}
    for data in messages:
        if data["type"] == "slot-delta":
            parent, key = jsonpointer.JsonPointer(data["path"]).to_last(state)
            parent[key] += data["delta"]
        elif data.get("patch"):
            state = jsonpatch.apply_patch(state, data["patch"])
    return state
