"""The real gateway and a scripted model server on 127.0.0.1, driven by the JS tests.

Started by ``test/support.mjs`` with the repository's Python; prints one JSON line,
``{"gateway": URL, "upstream": URL}``, then answers one JSON line per command read on
standard input:

- ``{"op": "add", "replies": [REPLY, ...]}`` queues model replies. A REPLY has ``value``
  (an object written as the frames a model would send for it under ``schema``) or
  ``text`` (the model's text as is), and any of ``chunks``, ``chunk_delay``, ``delay``,
  ``status``, ``stall_after_bytes``, ``drop_after_bytes`` (see ``slotflight.testing.Reply``);
- ``{"op": "wait_disconnect", "index": N}`` waits until the model request ``N`` was
  closed by the gateway (``{"ok": false}`` after ``timeout`` seconds);
- ``{"op": "requests"}`` answers how many model requests were made;
- ``{"op": "gateway_requests", "header": NAME}`` answers ``{"requests": [[METHOD, PATH,
  VALUE], ...]}``: every request the gateway received, with its ``NAME`` header's value
  (``null`` when it had none).

Options: ``--resume-grace-s`` and ``--retry-ms`` are passed to ``create_app``. It exits
when standard input closes.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

from slotflight.plan.compiler import compile as compile_schema
from slotflight.plan.instance import walk_instance
from slotflight.syntax import get_syntax
from slotflight.testing import AppServer, Reply, ScriptedServer
from slotflight.web import create_app

REPLY_FIELDS = ("chunks", "chunk_delay", "delay", "status", "stall_after_bytes", "drop_after_bytes")


def frames(schema: dict[str, Any], value: Any) -> str:
    """The frame text a model would write for ``value`` under ``schema``."""
    plan = compile_schema(schema)
    return get_syntax().write(plan, list(walk_instance(plan, value)))


def reply(spec: dict[str, Any]) -> Reply:
    text = frames(spec["schema"], spec["value"]) if "value" in spec else spec.get("text", "")
    return Reply(text, **{key: spec[key] for key in REPLY_FIELDS if key in spec})


class RequestLog:
    """The ASGI app ``app``, recording the method, path and headers of each HTTP request."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.seen: list[tuple[str, str, dict[str, str]]] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
            self.seen.append((scope["method"], scope["path"], headers))
        await self.app(scope, receive, send)


def answer(upstream: ScriptedServer, log: RequestLog, command: dict[str, Any]) -> dict[str, Any]:
    op = command.get("op")
    if op == "add":
        upstream.add(*(reply(spec) for spec in command["replies"]))
        return {"ok": True}
    if op == "wait_disconnect":
        try:
            upstream.wait_for_disconnect(command["index"], timeout=command.get("timeout", 5.0))
        except TimeoutError:
            return {"ok": False}
        return {"ok": True}
    if op == "requests":
        return {"count": len(upstream.requests)}
    if op == "gateway_requests":
        name = str(command["header"]).lower()
        return {"requests": [[m, p, h.get(name)] for m, p, h in list(log.seen)]}
    return {"error": f"unknown op {op!r}"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--resume-grace-s", type=float, default=5.0)
    parser.add_argument("--retry-ms", type=int, default=1000)
    args = parser.parse_args()
    with ScriptedServer() as upstream:
        app = create_app(
            upstream.base_url, resume_grace_s=args.resume_grace_s, retry_ms=args.retry_ms
        )
        log = RequestLog(app)
        with AppServer(log) as gateway:
            print(json.dumps({"gateway": gateway.url, "upstream": upstream.url}), flush=True)
            for line in sys.stdin:
                try:
                    result = answer(upstream, log, json.loads(line))
                except Exception as exc:  # reported to the test, which fails on it
                    result = {"error": f"{type(exc).__name__}: {exc}"}
                print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
