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

import anyio
from sse_starlette import EventSourceResponse, ServerSentEvent

from ..assemble.events import Event
from ._encode import DEFAULT_COALESCE_MS, StateMode, encode_events, error_message
from ._store import StoredEvent

__all__ = ["DEFAULT_PING_S", "DEFAULT_RETRY_MS", "slot_event_response", "stored_event_response"]

#: Seconds between keep-alive comments.
DEFAULT_PING_S = 15.0
#: The reconnection delay suggested to clients (``retry:``), in milliseconds.
DEFAULT_RETRY_MS = 1000

_logger = logging.getLogger("slotflight.web")


def slot_event_response(
    stream: AsyncIterable[Event],
    *,
    state_mode: StateMode = "patch",
    coalesce_ms: float = DEFAULT_COALESCE_MS,
    ping_s: float = DEFAULT_PING_S,
    retry_ms: int | None = DEFAULT_RETRY_MS,
    headers: Mapping[str, str] | None = None,
) -> EventSourceResponse:
    """Stream the events of ``stream`` (for example an ``astream(...)``) as SSE.

    ``state_mode``: ``"patch"`` (lean: deltas carry the appended text, other messages
    their RFC 6902 ``patch``; ``done``, ``error`` and some ``slot-complete`` also
    ``state``) or ``"full"`` (every message carries ``state``: O(n²) bytes).
    ``coalesce_ms``: at most one ``slot-delta`` message per that many ms (merged per
    slot). The stream is closed when the response ends, whatever the reason.
    """
    wires = encode_events(stream, state_mode=state_mode, coalesce_ms=coalesce_ms)

    async def numbered() -> AsyncGenerator[StoredEvent, None]:
        async with contextlib.aclosing(wires):
            sequence = 0
            async for wire in wires:
                sequence += 1
                yield StoredEvent(sequence, wire.event, wire.data)

    return stored_event_response(numbered(), ping_s=ping_s, retry_ms=retry_ms, headers=headers)


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

    async def messages() -> AsyncGenerator[ServerSentEvent, None]:
        first = True
        ended = False
        try:
            async with contextlib.aclosing(events):
                async for event in events:
                    ended = event.terminal
                    yield ServerSentEvent(
                        data=event.data,
                        event=event.event,
                        id=None if event.id is None else str(event.id),
                        retry=retry_ms if first else None,
                    )
                    first = False
        except Exception:
            _logger.exception("sending a slot stream failed")
            if ended:
                return
            failure = error_message("internal_error", "sending the stream failed")
            yield ServerSentEvent(
                data=failure.data, event=failure.event, retry=retry_ms if first else None
            )

    return EventSourceResponse(
        messages(),
        ping=ping_s,
        headers=dict(headers or {}),
        shutdown_event=shutdown_event,
        shutdown_grace_period=shutdown_grace_s,
    )
