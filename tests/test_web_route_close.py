"""The route helper closes its stream when the client goes away, over real HTTP.

sse-starlette cancels the response through an anyio cancel scope, which cancels every
later await of the task again: the stream's ``aclose()`` must still be reached."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
from httpx_sse import aconnect_sse
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from slotflight.assemble.events import Event, SlotComplete
from slotflight.testing import AppServer
from slotflight.web import slot_event_response


class _WaitingSource:
    """A slot stream that sends one event, then waits (like a stream waiting for a
    retry), and records whether it was closed."""

    def __init__(self, closed: asyncio.Event) -> None:
        self.closed = closed
        self.sent = False

    def __aiter__(self) -> AsyncIterator[Event]:
        return self

    async def __anext__(self) -> Event:
        if not self.sent:
            self.sent = True
            return SlotComplete(1, "summary", "/summary", None, 1, (), "ok")
        await asyncio.Event().wait()  # until cancelled
        raise AssertionError("unreachable")

    async def aclose(self) -> None:
        self.closed.set()


async def test_a_client_disconnect_closes_the_stream() -> None:
    closed = asyncio.Event()

    async def route(request: Request) -> Response:
        return slot_event_response(_WaitingSource(closed))

    app = Starlette(routes=[Route("/s", route, methods=["POST"])])
    async with AppServer(app) as server, httpx.AsyncClient(timeout=30) as client:
        async with aconnect_sse(client, "POST", f"{server.url}/s") as source:
            async for message in source.aiter_sse():
                assert message.event == "slot-complete"
                break
        # Without the close the stream stays open until garbage collection: a generous
        # bound only keeps a failing run from hanging.
        await asyncio.wait_for(closed.wait(), 10)
