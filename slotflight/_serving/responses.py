"""Responses that notice a client going away, and OpenAI-style error responses.

Starlette's ``StreamingResponse`` learns of a disconnect only when a write fails (ASGI
2.4 servers such as uvicorn). :class:`EventStream` watches the ASGI ``receive`` channel
while it sends: an ``http.disconnect`` cancels the sending task at once, even while it
waits for the next event, and the event iterator is closed, which runs its ``finally``
blocks (where a server stops the work behind the stream). :func:`until_disconnect` is
the same watch for responses that wait before they answer.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, Mapping

import anyio
from starlette.responses import JSONResponse, Response
from starlette.types import Receive, Scope, Send

from .payloads import error_body

__all__ = ["EventStream", "error_response", "until_disconnect"]

_HEADERS = {"cache-control": "no-cache", "x-accel-buffering": "no"}


async def until_disconnect(receive: Receive) -> None:
    """Return when the ASGI server reports that the client went away."""
    while (await receive())["type"] != "http.disconnect":
        pass


def error_response(
    status: int,
    message: str,
    *,
    code: str | None = None,
    param: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    """:func:`~slotflight._serving.payloads.error_body` as a JSON response with ``status``."""
    return JSONResponse(
        error_body(status, message, code=code, param=param),
        status_code=status,
        headers=dict(headers) if headers else None,
    )


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

                async def cancel_on_disconnect() -> None:
                    await until_disconnect(receive)
                    group.cancel_scope.cancel()

                group.start_soon(cancel_on_disconnect)
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
