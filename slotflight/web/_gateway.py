"""The ``slotflight serve`` gateway: slot streams over HTTP for browsers and services.

Routes:

- ``POST /v1/slot-streams``: body ``{"model", "messages", "schema", "options"}``;
  answers with the SSE stream of the new slot stream. Its id is in the
  ``Slot-Stream-Id`` header and ``Location`` names the URL to reconnect to.
- ``GET /v1/slot-streams/{id}/events``: the stream's messages after
  ``Last-Event-ID`` (header, or ``last_event_id`` query parameter), then live; ``204``
  when that is the id of a finished stream's terminal message (nothing follows).
  A request whose ``Accept`` admits no event stream is answered ``406`` on both.
- ``GET /``: the triage demo page; ``GET /static/…`` its script; ``GET /health``.

Each stream is produced in the background into the event store (see ``_hub``), so a
client that lost its connection can reconnect, to this instance or, with a shared
Redis store, to another one. Errors are JSON: ``{"error": {"code", "message", …}}``,
whatever fails (an unexpected exception is a ``500`` ``internal_error``).

Every request is hostile input (see ``docs/security.md``): its body is read within a
size and a time bound; compiling its schema and building the prompt and grammar run on
a bounded pool of worker threads (:mod:`slotflight.client.workers`), so that the event
loop keeps serving other streams and ``/health``, and so do the chunks of a large value,
whose close runs its checks (:mod:`slotflight.client.feed_placement`, on a pool of its
own); nothing is fetched; the model server's error text is not forwarded.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import re
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import uvicorn
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from .._errors import SlotflightError
from .._serving.protocol import DEFAULT_HEADER_TIMEOUT_S, header_timeout_protocol
from ..client.async_stream import AsyncSlotStream
from ..client.workers import Workers, WorkRefused
from ._hub import ShuttingDown, StreamHub
from ._memory_store import MemoryEventStore
from ._redis_store import RedisEventStore
from ._request import (
    BadRequest,
    ParsedRequest,
    RequestLimits,
    compile_failure,
    parse_slot_stream_request,
    read_request_body,
)
from ._sse import (
    DEFAULT_PING_S,
    DEFAULT_RETRY_MS,
    check_ping_s,
    check_retry_ms,
    stored_event_response,
)
from ._store import (
    EventStore,
    EventStoreFull,
    StoredEvent,
    StoreUnavailable,
    StreamTail,
    beyond_message,
)
from ._stream import gateway_stream
from ._upstream import LeanChunkClient, default_http_client

if TYPE_CHECKING:
    import httpx2

__all__ = ["create_app", "serve"]

_STATIC = Path(__file__).with_name("static")
_STREAM_ID_HEADER = "Slot-Stream-Id"
#: What a stream id looks like (``uuid4().hex``); anything else is not a stream.
_STREAM_ID = re.compile(r"[0-9a-f]{32}")
#: A ``Last-Event-ID``: ASCII digits, at most 18 (below 2^63, which every store takes).
_EVENT_ID = re.compile(r"[0-9]{1,18}")
#: Seconds ``/health`` waits for the store to answer.
_HEALTH_STORE_TIMEOUT_S = 1.0
#: Worker threads feeding the chunks of large values (``_stream``).
_STEP_THREADS = 4
#: Codes of HTTP errors raised by routing and static files.
_HTTP_CODES = {404: "not_found", 405: "method_not_allowed"}
#: What a ``root_path`` looks like: empty, or ``/`` and path segments, none empty.
ROOT_PATH_PATTERN = re.compile(r"(?:/[A-Za-z0-9._~!$&'()*+,;=:@%-]+)*")


def check_root_path(root_path: str) -> str:
    """``root_path`` if it is empty or a path such as ``/api`` (no trailing ``/``); else
    ``ValueError``."""
    if ROOT_PATH_PATTERN.fullmatch(root_path) is None:
        raise ValueError(
            f"root_path must be empty or a path such as /api, without a trailing /: {root_path!r}"
        )
    return root_path


#: Media ranges of an ``Accept`` header that admit ``text/event-stream``.
_EVENT_STREAM_RANGES = frozenset({"text/event-stream", "text/*", "*/*"})


def _accepts_event_stream(request: Request) -> bool:
    """Whether the request's ``Accept`` headers admit ``text/event-stream``: no header
    or an empty one does, and so does one that cannot be read (only a readable refusal
    is taken as one). O(header size), which the HTTP server bounds."""
    ranges = 0
    for value in request.headers.getlist("accept"):
        for item in value.split(","):
            media, _, params = item.partition(";")
            media = media.strip().lower()
            if "/" not in media:
                if media:
                    return True  # not a media range
                continue
            ranges += 1
            if media in _EVENT_STREAM_RANGES and _quality(params) != 0:
                return True
    return ranges == 0


def _quality(params: str) -> float | None:
    """The ``q`` of a media range's parameters (1 without one; ``None`` if unreadable)."""
    for param in params.split(";"):
        name, _, given = param.partition("=")
        if name.strip().lower() == "q":
            try:
                return float(given.strip())
            except ValueError:
                return None
    return 1.0


def _last_event_id(request: Request) -> str | None:
    """The ``Last-Event-ID`` header (else the ``last_event_id`` query parameter), or
    ``None``; ``""`` when it was given more than once with different values."""
    values = {value.strip(" \t") for value in request.headers.getlist("last-event-id")}
    values.discard("")
    if not values:
        values = set(request.query_params.getlist("last_event_id"))
        values.discard("")
    if not values:
        return None
    if len(values) > 1:
        return ""
    return values.pop()


def _error(status: int, code: str, message: str, **extra: Any) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message, **extra}}, status)


async def _http_error(request: Request, exc: Exception) -> Response:
    """Routing and static-file errors (404, 405 …) as JSON."""
    assert isinstance(exc, HTTPException)
    code = _HTTP_CODES.get(exc.status_code, "http_error")
    return JSONResponse(
        {"error": {"code": code, "message": str(exc.detail)}}, exc.status_code, exc.headers
    )


async def _internal_error(request: Request, exc: Exception) -> Response:
    """Any exception out of a route: a JSON 500 (Starlette logs it)."""
    return _error(500, "internal_error", "the gateway failed to handle the request")


def _not_acceptable() -> JSONResponse:
    return _error(
        406,
        "not_acceptable",
        "this route answers with an event stream: send Accept: text/event-stream",
    )


def create_app(
    upstream_base_url: str,
    *,
    api_key: str | None = None,
    token: str | None = None,
    cors_origins: Sequence[str] | None = None,
    store: EventStore | None = None,
    limits: RequestLimits | None = None,
    resume_grace_s: float = 5.0,
    max_active_streams: int = 1000,
    idle_timeout_s: float | None = 60.0,
    total_timeout_s: float | None = 600.0,
    ping_s: float = DEFAULT_PING_S,
    retry_ms: int = DEFAULT_RETRY_MS,
    drain_s: float = 10.0,
    http_client: httpx2.AsyncClient | None = None,
) -> Starlette:
    """The gateway app, streaming from the OpenAI-compatible server at
    ``upstream_base_url`` (``api_key`` is sent to it).

    ``token``: when set, ``/v1/*`` requests need ``Authorization: Bearer <token>``.
    ``cors_origins``: origins allowed by CORS (none by default: CORS is off).
    ``store``: where streams are kept (default: a :class:`MemoryEventStore`); the app
    closes it on shutdown. ``resume_grace_s``: how long a stream nobody reads keeps
    running before its upstream request is cancelled. ``idle_timeout_s`` and
    ``total_timeout_s`` bound each slot stream's upstream requests: every wait for a
    response's head or its next chunk (with both ``None``, a model server that stops
    sending holds its stream until no client has read it for ``resume_grace_s``). ``drain_s``: when
    the server stops (SIGTERM), how long running streams may still finish before they
    end with ``shutting_down`` (the ASGI server's graceful timeout must be longer).
    ``http_client``: the HTTP client for the model server, as
    ``openai.AsyncOpenAI(http_client=...)`` takes it (default: ``openai``'s aiohttp
    transport when aiohttp is installed, as the ``server`` extra does; else its
    ``httpx2`` client); the app closes it on shutdown. ``ping_s``: seconds between
    keep-alive comments on every stream (0: none; else at least ``MIN_PING_S``);
    ``retry_ms``: the ``retry:`` hint. Values out of range raise ``ValueError``.
    """
    check_ping_s(ping_s)
    check_retry_ms(retry_ms)
    limits = limits or RequestLimits()
    event_store = store if store is not None else MemoryEventStore()
    hub = StreamHub(
        event_store,
        resume_grace_s=resume_grace_s,
        max_active=max_active_streams,
        drain_s=drain_s,
    )

    def sse(events: AsyncGenerator[StoredEvent, None], headers: dict[str, str]) -> Response:
        return stored_event_response(
            events,
            ping_s=ping_s,
            retry_ms=retry_ms,
            headers=headers,
            shutdown_event=hub.shutdown_signal(),
            shutdown_grace_s=drain_s + 2,
        )

    client = LeanChunkClient(
        base_url=upstream_base_url,
        api_key=api_key or "unused",
        max_retries=0,
        http_client=http_client if http_client is not None else default_http_client(),
    )
    expected = f"Bearer {token}".encode() if token else None

    def authorized(request: Request) -> bool:
        if expected is None:
            return True
        given = request.headers.get("authorization", "").encode()
        return hmac.compare_digest(given, expected)

    def unauthorized() -> JSONResponse:
        response = _error(401, "unauthorized", "a valid bearer token is required")
        response.headers["WWW-Authenticate"] = "Bearer"
        return response

    compiles = Workers(
        threads=limits.max_compiles,
        queued=limits.max_queued_compiles,
        timeout_s=limits.compile_timeout_s,
        name="compile",
    )

    # Feeding the chunks of a large value (whose close runs its checks): see
    # slotflight.client.feed_placement.
    # Each stream waits for its step, so the queue holds about one per stream; a step
    # the pool refuses all the same is fed on the event loop.
    steps = Workers(threads=_STEP_THREADS, queued=max_active_streams, timeout_s=None, name="stream")

    def prepare(raw: bytes) -> tuple[ParsedRequest, AsyncSlotStream[Any]]:
        """Parse the body, compile the schema, build the prompt and grammar: CPU work
        whose cost the client chooses, run on a worker thread."""
        parsed = parse_slot_stream_request(raw, limits)
        options = parsed.request.options
        try:
            stream = gateway_stream(
                client,
                steps,
                model=parsed.request.model,
                messages=parsed.messages,
                plan=parsed.plan,
                syntax=options.syntax,
                max_attempts=options.max_attempts,
                grammar=options.grammar,
                checks=options.checks,
                on_check_failure=options.on_check_failure,
                confidence=options.confidence,
                timeout=total_timeout_s,
                idle_timeout=idle_timeout_s,
                params=parsed.params,
            )
        except SlotflightError as exc:
            raise compile_failure(exc) from None
        except RecursionError:
            raise BadRequest(413, "schema_too_large", "the schema is nested too deeply") from None
        return parsed, stream

    async def create_stream(request: Request) -> Response:
        if not authorized(request):
            return unauthorized()
        if not _accepts_event_stream(request):
            # Refused before the body is read: no model request for a client that
            # could not read its answer.
            return _not_acceptable()
        try:
            raw = await read_request_body(request, limits)
            parsed, stream = await compiles.run(lambda: prepare(raw))
        except BadRequest as exc:
            return JSONResponse(exc.body, exc.status)
        except WorkRefused as exc:
            if exc.reason == "busy":
                return _error(503, "server_busy", exc.message)
            return _error(
                413,
                "schema_too_large",
                f"compiling the schema took longer than {limits.compile_timeout_s:g} s",
            )
        options = parsed.request.options
        stream_id = uuid.uuid4().hex
        try:
            await hub.start(
                stream_id,
                stream,
                state_mode=options.state_mode,
                coalesce_ms=options.coalesce_ms,
            )
        except (EventStoreFull, ShuttingDown, StoreUnavailable) as exc:
            return _error(503, exc.code, exc.message)
        location = request.url_for("stream_events", stream_id=stream_id).path
        return sse(hub.follow(stream_id, 0), {_STREAM_ID_HEADER: stream_id, "Location": location})

    async def stream_events(request: Request) -> Response:
        if not authorized(request):
            return unauthorized()
        if not _accepts_event_stream(request):
            return _not_acceptable()
        stream_id = request.path_params["stream_id"]
        digits = _last_event_id(request)
        after = 0
        if digits is not None:
            if _EVENT_ID.fullmatch(digits) is None:
                return _error(
                    400,
                    "invalid_last_event_id",
                    "Last-Event-ID must be one message id: at most 18 ASCII digits",
                )
            after = int(digits)
        if _STREAM_ID.fullmatch(stream_id) is None:
            return _error(404, "stream_not_found", "no such stream is retained")
        # A resume reads the stream's last id and whether it finished, which also says
        # that it is retained (one round trip); only where the store cannot tell is it
        # asked whether it is.
        tail: StreamTail | None = None
        try:
            if after > 0:
                tail = await event_store.tail(stream_id)
            retained = tail is not None or await event_store.exists(stream_id)
        except StoreUnavailable as exc:
            return _error(503, exc.code, exc.message)
        if not retained:
            return _error(404, "stream_not_found", "no such stream is retained")
        if tail is not None and after > tail.last:
            # No client can have seen an id the store does not hold yet: refused here
            # (a status an EventSource does not retry), not answered with a stream that
            # would skip to it or, once finished, send nothing.
            return _error(400, "invalid_last_event_id", beyond_message(after, tail.last))
        if tail is not None and tail.finished and after == tail.last:
            # The client has the terminal message: nothing follows. 204, which ends an
            # EventSource, where an empty stream would have it reconnect forever.
            return Response(status_code=204)
        # Ids only grow: the store's follow need not check ``after`` again.
        events = hub.follow(stream_id, after, checked=tail is not None)
        return sse(events, {_STREAM_ID_HEADER: stream_id})

    async def index(request: Request) -> Response:
        return FileResponse(_STATIC / "index.html", media_type="text/html")

    async def health(request: Request) -> Response:
        if hub.draining:
            return JSONResponse({"status": "draining", "active_streams": hub.active}, 503)
        try:
            async with asyncio.timeout(_HEALTH_STORE_TIMEOUT_S):
                await event_store.ping()
        except (StoreUnavailable, TimeoutError):
            unavailable = StoreUnavailable()
            return JSONResponse(
                {
                    "status": unavailable.code,
                    "active_streams": hub.active,
                    "error": {"code": unavailable.code, "message": unavailable.message},
                },
                503,
            )
        return JSONResponse({"status": "ok", "active_streams": hub.active})

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            compiles.close()
            await hub.aclose()
            steps.close()
            await event_store.aclose()
            await client.close()

    middleware: list[Middleware] = []
    if cors_origins:
        middleware.append(
            Middleware(
                CORSMiddleware,
                allow_origins=list(cors_origins),
                allow_methods=["GET", "POST"],
                allow_headers=["authorization", "content-type", "last-event-id"],
                expose_headers=["location", _STREAM_ID_HEADER.lower()],
            )
        )
    routes = [
        Route("/", index, methods=["GET"]),
        Route("/health", health, methods=["GET"]),
        Route("/v1/slot-streams", create_stream, methods=["POST"]),
        Route(
            "/v1/slot-streams/{stream_id}/events",
            stream_events,
            methods=["GET"],
            name="stream_events",
        ),
        Mount("/static", StaticFiles(directory=_STATIC), name="static"),
    ]
    app = Starlette(
        routes=routes,
        middleware=middleware,
        lifespan=lifespan,
        exception_handlers={HTTPException: _http_error, Exception: _internal_error},
    )
    app.state.hub = hub
    app.state.store = event_store
    return app


def serve(
    upstream_base_url: str,
    *,
    api_key: str | None = None,
    token: str | None = None,
    host: str = "127.0.0.1",
    port: int = 8000,
    redis_url: str | None = None,
    cors_origins: Sequence[str] | None = None,
    log_level: str = "info",
    header_timeout_s: float = DEFAULT_HEADER_TIMEOUT_S,
    root_path: str = "",
    **options: Any,
) -> None:
    """Run the gateway with uvicorn until interrupted (what ``slotflight serve`` does).

    ``redis_url`` selects the Redis Streams store (several instances can then serve
    each other's streams); without it streams are kept in memory.
    ``header_timeout_s``: seconds a connection may take to send a request's headers
    (408 and closed after that; see ``slotflight._serving.protocol``).
    ``root_path``: the path prefix under which a reverse proxy publishes the gateway
    (``/api`` for ``https://host/api/v1/slot-streams``, the proxy removing it before it
    forwards), so that ``Location`` names the URL a client can reconnect to; routes
    are still served without it. ``options`` go to :func:`create_app`.
    """
    check_root_path(root_path)
    store: EventStore | None = RedisEventStore.from_url(redis_url) if redis_url else None
    app = create_app(
        upstream_base_url,
        api_key=api_key,
        token=token,
        cors_origins=cors_origins,
        store=store,
        **options,
    )
    drain_s = float(options.get("drain_s", 10.0))
    uvicorn.run(
        app,
        host=host,
        port=port,
        log_level=log_level,
        http=header_timeout_protocol(header_timeout_s),
        timeout_graceful_shutdown=int(drain_s) + 5,
        root_path=root_path,
    )
