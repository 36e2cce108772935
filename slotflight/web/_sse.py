"""SSE responses: a slot stream, or a stored stream, as an ``EventSourceResponse``.

:func:`slot_event_response` is the route helper::

    @app.post("/triage")
    async def triage(ticket: Ticket) -> EventSourceResponse:
        stream = slotflight.astream(client, model=MODEL, messages=[...], output=Triage)
        return slot_event_response(stream)

Every message has ``event:`` (the event type), ``data:`` (the event JSON) and ``id:`` (a
per-stream sequence number: 1, 2, 3 …); the first carries a ``retry:`` hint. Comment
pings keep idle connections open. The last message is ``done`` or ``error``, whatever
fails (an exception while reading the messages ends them with an ``error``
``internal_error``). When the client goes away the response is cancelled and the
stream closed, which closes the upstream model request.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncGenerator, AsyncIterable, Mapping
from typing import Final

import anyio
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.requests import Request
from starlette.types import Message, Send

from ..assemble.events import Event
from ._encode import (
    DEFAULT_COALESCE_MS,
    StateMode,
    close_source_shielded,
    encode_events,
    error_message,
)
from ._store import StoredEvent

__all__ = ["DEFAULT_PING_S", "DEFAULT_RETRY_MS", "slot_event_response", "stored_event_response"]

#: Seconds between keep-alive comments.
DEFAULT_PING_S = 15.0
#: The reconnection delay suggested to clients (``retry:``), in milliseconds.
DEFAULT_RETRY_MS = 1000

_logger = logging.getLogger("slotflight.web")


class _EventSourceResponse(EventSourceResponse):
    """sse-starlette's response, less a cancel scope around each message when sends
    have no time limit (``send_timeout=None``, the default): a scope without a
    deadline cancels nothing, and entering and leaving one costs more CPU than the
    rest of sending a message."""

    async def _send_with_timeout(self, send: Send, message: Message) -> None:
        if self.send_timeout is None:
            await send(message)
        else:
            await super()._send_with_timeout(send, message)


#: What sse-starlette writes between lines and after a message.
_SEP: Final = EventSourceResponse.DEFAULT_SEPARATOR


def _encode(event: StoredEvent, retry_ms: int | None) -> ServerSentEvent | bytes:
    """The message as sse-starlette writes it (``id``, ``event``, ``data``, ``retry``
    lines), formatted at once when no field holds a line break (JSON data never does:
    JSON escapes them), else left to ``ServerSentEvent``."""
    if "\n" in event.data or "\r" in event.data or "\n" in event.event or "\r" in event.event:
        return ServerSentEvent(
            data=event.data,
            event=event.event,
            id=None if event.id is None else str(event.id),
            retry=retry_ms,
        )
    text = f"event: {event.event}{_SEP}data: {event.data}{_SEP}"
    if event.id is not None:
        text = f"id: {event.id}{_SEP}{text}"
    if retry_ms is not None:
        text = f"{text}retry: {retry_ms}{_SEP}"
    return f"{text}{_SEP}".encode()


def slot_event_response(
    stream: AsyncIterable[Event],
    *,
    state_mode: StateMode = "patch",
    coalesce_ms: float = DEFAULT_COALESCE_MS,
    ping_s: float = DEFAULT_PING_S,
    retry_ms: int | None = DEFAULT_RETRY_MS,
    headers: Mapping[str, str] | None = None,
    request: Request | None = None,
) -> EventSourceResponse:
    """Stream the events of ``stream`` (for example an ``astream(...)``) as SSE.

    ``state_mode``: ``"patch"`` (lean: deltas carry the appended text, other messages
    their RFC 6902 ``patch``; ``done``, ``error`` and some ``slot-complete`` also
    ``state``) or ``"full"`` (every message carries ``state``: O(n²) bytes).
    ``coalesce_ms``: at most one ``slot-delta`` message per that many ms (merged per
    slot; in full mode at least ``FULL_MODE_MIN_COALESCE_MS``). The stream is closed
    when the response ends, whatever the reason.

    ``request``: the request being answered. One that carries ``Last-Event-ID`` is an
    ``EventSource`` reconnecting (after the last message, or after a dropped
    connection), which this response cannot resume: it is answered ``204`` at once,
    which ends an ``EventSource``, and ``stream`` is closed unread, instead of asking
    the model again and sending a new stream under ids the client has seen, every time
    the client reconnects.
    """
    if request is not None and request.headers.get("last-event-id"):
        return _no_content(stream)
    wires = encode_events(stream, state_mode=state_mode, coalesce_ms=coalesce_ms)

    async def numbered() -> AsyncGenerator[StoredEvent, None]:
        async with contextlib.aclosing(wires):
            sequence = 0
            async for wire in wires:
                sequence += 1
                yield StoredEvent(sequence, wire.event, wire.data)

    return stored_event_response(numbered(), ping_s=ping_s, retry_ms=retry_ms, headers=headers)


def _no_content(stream: AsyncIterable[Event]) -> EventSourceResponse:
    """A ``204`` with no body (no message, no ping) that closes ``stream`` unread."""

    async def nothing() -> AsyncGenerator[bytes, None]:
        await close_source_shielded(stream)
        return
        yield b""  # a generator that yields nothing

    return _EventSourceResponse(nothing(), status_code=204, ping=DEFAULT_PING_S)


def stored_event_response(
    events: AsyncGenerator[StoredEvent, None],
    *,
    ping_s: float = DEFAULT_PING_S,
    retry_ms: int | None = DEFAULT_RETRY_MS,
    headers: Mapping[str, str] | None = None,
    shutdown_event: anyio.Event | None = None,
    shutdown_grace_s: float = 0,
) -> EventSourceResponse:
    """Send already numbered messages (from an event store or :func:`slot_event_response`).

    When the server stops (SIGTERM under uvicorn), sse-starlette sets
    ``shutdown_event`` and lets the response run for up to ``shutdown_grace_s`` more
    seconds before cancelling it (0: at once)."""

    async def messages() -> AsyncGenerator[ServerSentEvent | bytes, None]:
        first = True
        ended = False
        try:
            async with contextlib.aclosing(events):
                async for event in events:
                    ended = event.terminal
                    yield _encode(event, retry_ms if first else None)
                    first = False
        except Exception:
            _logger.exception("sending a slot stream failed")
            if ended:
                return
            failure = error_message("internal_error", "sending the stream failed")
            yield ServerSentEvent(
                data=failure.data, event=failure.event, retry=retry_ms if first else None
            )

    return _EventSourceResponse(
        messages(),
        ping=ping_s,
        headers=dict(headers or {}),
        shutdown_event=shutdown_event,
        shutdown_grace_period=shutdown_grace_s,
    )
