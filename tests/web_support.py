"""Shared parts of the web tests: the triage schema, scripted frame text for it, a free
port and patch replay. Apps are served with :class:`slotflight.testing.AppServer`."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterable
from importlib import resources
from typing import Any

from slotflight.plan.compiler import compile as compile_schema
from slotflight.syntax import render_frames

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
    return render_frames(compile_schema(TRIAGE_SCHEMA), value)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


def apply_patches(messages: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The state a client reaches by applying every message's ``patch`` in order."""
    import jsonpatch

    state: dict[str, Any] = {}
    for data in messages:
        if data.get("patch"):
            state = jsonpatch.apply_patch(state, data["patch"])
    return state
