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

Responses carry ``Cache-Control: no-store, no-transform`` (unless the caller sets its
own): no cache keeps them, and no intermediary compresses or otherwise rewrites them,
which would hold messages back until a buffer fills.
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import AsyncGenerator, AsyncIterable, Mapping
from datetime import UTC, datetime
from typing import Any, Final

import anyio
from sse_starlette import EventSourceResponse, ServerSentEvent
from sse_starlette.event import ensure_bytes
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.types import Message, Send

from ..assemble.events import Event
from ._encode import (
    DEFAULT_COALESCE_MS,
    StateMode,
    check_encoding,
    close_source_shielded,
    encode_events,
    error_message,
)
from ._store import StoredEvent

__all__ = [
    "DEFAULT_PING_S",
    "DEFAULT_RETRY_MS",
    "MIN_PING_S",
    "check_ping_s",
    "check_retry_ms",
    "slot_event_response",
    "stored_event_response",
]

#: Seconds between keep-alive comments.
DEFAULT_PING_S = 15.0
#: The shortest interval between keep-alive comments, in seconds (0 turns them off).
MIN_PING_S: Final = 1.0
#: The reconnection delay suggested to clients (``retry:``), in milliseconds.
DEFAULT_RETRY_MS = 1000
#: What the responses tell caches and proxies unless the caller sets its own.
CACHE_CONTROL: Final = "no-store, no-transform"

_logger = logging.getLogger("slotflight.web")


def check_ping_s(ping_s: float) -> float:
    """``ping_s`` if it is 0 (no keep-alive comments) or a finite number of seconds of
    at least :data:`MIN_PING_S`; else ``ValueError``: a NaN interval would send no
    comment at all, and a tiny one a comment per turn of the event loop."""
    if isinstance(ping_s, bool) or not isinstance(ping_s, int | float):
        raise ValueError(f"ping_s must be a number of seconds, got {ping_s!r}")
    if ping_s != 0 and not (math.isfinite(ping_s) and ping_s >= MIN_PING_S):
        raise ValueError(
            f"ping_s must be 0 (no pings) or a finite number >= {MIN_PING_S:g}, got {ping_s!r}"
        )
    return ping_s


def check_retry_ms(retry_ms: int | None) -> int | None:
    """``retry_ms`` if it is ``None`` (no ``retry:`` hint) or an integer >= 0 (what an
    ``EventSource`` reads: ASCII digits); else ``ValueError``."""
    if retry_ms is not None and (
        isinstance(retry_ms, bool) or not isinstance(retry_ms, int) or retry_ms < 0
    ):
        raise ValueError(f"retry_ms must be None or an integer >= 0, got {retry_ms!r}")
    return retry_ms


class _EventSourceResponse(EventSourceResponse):
    """sse-starlette's response, less a cancel scope around each message when sends
    have no time limit (``send_timeout=None``, the default): a scope without a
    deadline cancels nothing, and entering and leaving one costs more CPU than the
    rest of sending a message. Its ``Cache-Control`` is :data:`CACHE_CONTROL` unless
    ``headers`` name one."""

    def __init__(
        self, content: Any, *, headers: Mapping[str, str] | None = None, **options: Any
    ) -> None:
        given = dict(headers or {})
        if not any(name.lower() == "cache-control" for name in given):
            given["Cache-Control"] = CACHE_CONTROL
        super().__init__(content, headers=given, **options)

    async def _send_with_timeout(self, send: Send, message: Message) -> None:
        if self.send_timeout is None:
            await send(message)
        else:
            await super()._send_with_timeout(send, message)

    async def _ping(self, send: Send) -> None:
        """sse-starlette's keep-alive comments, except that each must be taken within one
        interval. A client that reads nothing (its connection's buffers full) cannot
        take it: its response then ends, instead of holding the connection, and a
        stored stream's reader, forever while no ping and no message can go out. One
        timer per interval, as the pings themselves."""
        while self.active:
            await anyio.sleep(self._ping_interval)
            ping = (
                self.ping_message_factory()
                if self.ping_message_factory
                else ServerSentEvent(comment=f"ping - {datetime.now(UTC)}", sep=self.sep)
            )
            body = ensure_bytes(ping, self.sep)
            async with self._send_lock:
                if not self.active:
                    return
                with anyio.move_on_after(self._ping_interval) as scope:
                    await send({"type": "http.response.body", "body": body, "more_body": True})
            if scope.cancelled_caught:
                _logger.warning(
                    "closing an event stream whose client took nothing for %g s",
                    self._ping_interval,
                )
                return  # the response ends: its body is closed, the connection dropped


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
    the client reconnects. A ``HEAD`` request is answered with the headers alone, and
    ``stream`` closed unread.

    ``ping_s``: seconds between keep-alive comments, 0 (none) or at least
    :data:`MIN_PING_S`; ``retry_ms``: the ``retry:`` hint, ``None`` (none) or >= 0;
    ``state_mode`` ``"patch"`` or ``"full"``; ``coalesce_ms`` a finite number >= 0.
    Other values raise ``ValueError`` here, before anything is sent or read.
    """
    check_encoding(state_mode, coalesce_ms)
    check_ping_s(ping_s)
    check_retry_ms(retry_ms)
    if request is not None and request.headers.get("last-event-id"):
        return _no_content(stream)
    if request is not None and request.method == "HEAD":
        # sse-starlette answers HEAD with the headers of a GET and never reads the
        # body, so the stream would be left open: closed once the headers are sent.
        response = stored_event_response(_nothing(), ping_s=ping_s, headers=headers)
        response.background = BackgroundTask(close_source_shielded, stream)
        return response
    wires = encode_events(stream, state_mode=state_mode, coalesce_ms=coalesce_ms)

    async def numbered() -> AsyncGenerator[StoredEvent, None]:
        async with contextlib.aclosing(wires):
            sequence = 0
            async for wire in wires:
                sequence += 1
                yield StoredEvent(sequence, wire.event, wire.data)

    return stored_event_response(numbered(), ping_s=ping_s, retry_ms=retry_ms, headers=headers)


async def _nothing() -> AsyncGenerator[StoredEvent, None]:
    return
    yield  # a generator that yields nothing


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
    seconds before cancelling it (0: at once). ``ping_s`` and ``retry_ms`` as for
    :func:`slot_event_response`."""
    check_ping_s(ping_s)
    check_retry_ms(retry_ms)

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
