"""Shared parts of the web tests: a uvicorn server on a thread, the triage schema and
scripted frame text for it."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Iterable
from importlib import resources
from types import TracebackType
from typing import Any, Self

import uvicorn
from starlette.types import ASGIApp

from slotflight._compiler import compile as compile_schema
from slotflight._render import render_frames
from slotflight._request import DEFAULT_SYNTAX

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


def frame(slot_id: int, value: Any, index: int | None = None) -> str:
    tag = str(slot_id) if index is None else f"{slot_id}:{index}"
    return f"<{tag}>\n{value}\n</{tag}>\n"


def triage_frames(value: dict[str, Any] = TRIAGE_VALUE, syntax: str = DEFAULT_SYNTAX) -> str:
    """The frame text a model would write for ``value`` under ``TRIAGE_SCHEMA``."""
    return render_frames(compile_schema(TRIAGE_SCHEMA), value, syntax)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


class AppServer:
    """Serves an ASGI app with uvicorn on ``127.0.0.1`` (a free port) on a thread."""

    def __init__(self, app: ASGIApp, *, lifespan: str = "on") -> None:
        self._sock = socket.socket()
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((HOST, 0))
        self.port: int = self._sock.getsockname()[1]
        config = uvicorn.Config(
            app,
            host=HOST,
            port=self.port,
            log_level="warning",
            lifespan=lifespan,  # type: ignore[arg-type]
            timeout_graceful_shutdown=2,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def _run(self) -> None:
        asyncio.run(self._server.serve(sockets=[self._sock]))

    def start(self) -> Self:
        self._thread.start()
        for _ in range(1000):
            if self._server.started or not self._thread.is_alive():
                break
            threading.Event().wait(0.01)
        if not self._server.started:
            raise RuntimeError("the app server did not start")
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(10)
        self._sock.close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    async def __aenter__(self) -> Self:
        return await asyncio.to_thread(self.start)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await asyncio.to_thread(self.stop)


def apply_patches(messages: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The state a client reaches by applying every message's ``patch`` in order."""
    import jsonpatch

    state: dict[str, Any] = {}
    for data in messages:
        if data.get("patch"):
            state = jsonpatch.apply_patch(state, data["patch"])
    return state
