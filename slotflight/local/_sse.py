"""A server-sent-events response that notices a client going away.

Starlette's ``StreamingResponse`` learns of a disconnect only when a write fails (ASGI
2.4 servers such as uvicorn). Here the ASGI ``receive`` channel is watched while the
events are sent: an ``http.disconnect`` cancels the sending task at once, even while it
waits for the next event, and the event iterator is closed, which runs its ``finally``
blocks (where the generation is cancelled).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator

import anyio
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

__all__ = ["EventStream"]

_HEADERS = {"cache-control": "no-cache", "x-accel-buffering": "no"}


class EventStream(Response):
    """Sends the byte strings of ``events`` (already framed as SSE) as they come."""

    media_type = "text/event-stream"

    def __init__(self, events: AsyncGenerator[bytes, None]) -> None:
        # Like StreamingResponse, skip Response.__init__: it would declare an empty body.
        self.status_code = 200
        self.background = None
        self.init_headers(_HEADERS)
        self._events = events

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            async with anyio.create_task_group() as group:

                async def watch_disconnect() -> None:
                    while (await receive())["type"] != "http.disconnect":
                        pass
                    group.cancel_scope.cancel()

                group.start_soon(watch_disconnect)
                with contextlib.suppress(OSError):  # the connection broke mid-write
                    await self._send_events(send)
                group.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                await self._events.aclose()

    async def _send_events(self, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        async for event in self._events:
            await send({"type": "http.response.body", "body": event, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})
