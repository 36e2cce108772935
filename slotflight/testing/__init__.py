"""A scripted OpenAI-compatible server for tests that stream chat completions.

:class:`ScriptedServer` serves ``POST /v1/chat/completions`` and ``GET /v1/models`` over
real HTTP on ``127.0.0.1`` (a free port, a background thread), answering each chat
completion with the next scripted :class:`Reply` and recording every request::

    from openai import OpenAI
    from slotflight.testing import Reply, ScriptedServer

    with ScriptedServer([Reply("Hello there", chunks=4)]) as server:
        client = OpenAI(base_url=server.base_url, api_key="test")
        stream = client.chat.completions.create(model="m", messages=[], stream=True)
        text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)

This module needs Starlette and uvicorn (the ``server`` extra); ``import slotflight``
does not. :class:`AppServer`, the same machinery for any ASGI app, serves other apps
(a gateway under test, say) the same way. See ``docs/testing.md``.
"""

from __future__ import annotations

from .._serving.thread import AppServer
from ..client.usage import TokenUsage
from ._recording import RecordedRequest
from ._reply import RandomChunks, Reply, estimate_tokens
from ._server import ScriptedServer

Usage = TokenUsage
"""The token counts a :class:`Reply` reports: :class:`slotflight.TokenUsage`."""

__all__ = [
    "AppServer",
    "RandomChunks",
    "RecordedRequest",
    "Reply",
    "ScriptedServer",
    "TokenUsage",
    "Usage",
    "estimate_tokens",
]
