"""Shared parts of the web tests: the triage schema, scripted frame text for it, a free
port and patch replay. Apps are served with :class:`slotflight.testing.AppServer`."""

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

from slotflight.plan.compiler import compile as compile_schema
from slotflight.plan.instance import UnexpressibleValue, walk_instance
from slotflight.syntax import get_syntax
from slotflight.testing import ScriptedServer
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
