"""The OpenAI-compatible Starlette application around a :class:`LocalEngine`.

Routes: ``GET /v1/models``, ``POST /v1/chat/completions`` (streamed or not) and
``GET /health``. Every client mistake is answered with an OpenAI-style error body
(``{"error": {"message", "type", "param", "code"}}``) and a 4xx status, never a 500;
a generation that fails (its llama.cpp process crashed or stalled) gets a 5xx body, or
an ``error`` event in a stream. The event loop never runs llama.cpp: ``/health``
answers while a generation runs, crashes or is restarted. A server that stops calls
``app.state.stop_generations()`` (on the event loop): the requests in progress end at
once with 503 ``server_shutting_down`` (an ``error`` event in a stream) and their
generations are cancelled.

A client is given ``body_timeout`` seconds to send its request body (408
``request_timeout`` after), and a streamed response waits at most ``send_timeout``
seconds for its client to take more bytes: then the connection is closed and the
generation, if it still runs, cancelled. The model never waits for a client (see
:class:`~slotflight.local.Generation`).
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Message, Receive, Scope, Send

from .._errors import SlotflightError
from .._serving import payloads
from .._serving.body import BodyTooLarge, read_body
from .._serving.responses import EventStream, error_response, until_disconnect
from ._engine import Generation, GenerationResult, LocalEngine, Piece, Sampling
from ._request import ChatRequest, parse_chat_request

__all__ = ["BODY_TIMEOUT", "MAX_BODY_BYTES", "SEND_TIMEOUT", "create_app"]

MAX_BODY_BYTES = 1024 * 1024
"""Largest request body accepted (413 beyond)."""

BODY_TIMEOUT = 60.0
"""Seconds a request body may take to arrive, from the handler's first read (408 after)."""

SEND_TIMEOUT = 60.0
"""Seconds a streamed response waits for its client to take more bytes before it is cut."""

SHUTTING_DOWN = "server_shutting_down"
"""The error code of the requests a stopping server ends."""
_SHUTTING_DOWN_MESSAGE = "the server is shutting down"

_STATUS_BY_CODE = {
    "server_busy": 503,
    SHUTTING_DOWN: 503,
    "engine_closed": 503,
    "engine_unavailable": 503,
    "generation_failed": 500,
    "worker_crashed": 500,
    "generation_stalled": 500,
}


def create_app(
    engine: LocalEngine,
    *,
    max_body_bytes: int = MAX_BODY_BYTES,
    body_timeout: float = BODY_TIMEOUT,
    send_timeout: float = SEND_TIMEOUT,
) -> Starlette:
    """The ASGI app serving ``engine`` (which the caller keeps and closes).

    ``body_timeout``: seconds the request body may take to arrive (408
    ``request_timeout`` after). ``send_timeout``: seconds a streamed response may wait
    for its client to take more bytes; then the connection is closed and the
    generation cancelled.

    ``app.state.stop_generations()``, called on the event loop, ends the requests in
    progress with 503 ``server_shutting_down`` and refuses new ones the same way.
    """
    serving = _Serving(engine)
    card = payloads.model_card(
        engine.model_id,
        created=_modified(engine.model_path),
        owned_by="local",
        context_length=engine.n_ctx,
    )

    async def models(request: Request) -> Response:
        return JSONResponse(payloads.model_list([card]))

    async def health(request: Request) -> Response:
        return JSONResponse(
            {
                "status": "ok",
                "model": engine.model_id,
                "worker": engine.worker_state,
                "restarts": engine.restarts,
            }
        )

    async def chat_completions(request: Request) -> Response:
        if serving.stopping:
            return _shutting_down()
        try:
            with anyio.fail_after(body_timeout):
                body = await read_body(request, max_body_bytes)
        except BodyTooLarge as exc:
            return error_response(413, str(exc), code="request_too_large")
        except TimeoutError:
            return error_response(
                408,
                f"the request body did not arrive within {body_timeout:g} s",
                code="request_timeout",
                headers={"connection": "close"},
            )
        try:
            chat = parse_chat_request(body)
            prompt = await engine.prepare(chat.messages, chat.constraint, chat.closed_choices)
            if serving.stopping:  # it stopped while the request was checked
                return _shutting_down()
            generation = engine.submit(prompt, _sampling(chat))
        except SlotflightError as exc:
            return _slotflight_error_response(exc)
        serving.generations.add(generation)
        if chat.stream:
            return _GenerationStream(
                _stream_events(generation, chat, engine.model_id, serving),
                generation,
                send_timeout,
                serving,
            )
        try:
            return await _complete(request, generation, chat, engine.model_id, serving)
        finally:
            serving.generations.discard(generation)

    async def http_error(request: Request, exc: Exception) -> Response:
        status = exc.status_code if isinstance(exc, HTTPException) else 500
        detail = exc.detail if isinstance(exc, HTTPException) else "internal error"
        return error_response(status, f"{request.method} {request.url.path}: {detail}")

    app = Starlette(
        routes=[
            Route("/v1/models", models, methods=["GET"]),
            Route("/v1/chat/completions", chat_completions, methods=["POST"]),
            Route("/health", health, methods=["GET"]),
        ],
        # Exception: whatever else goes wrong is a 500 in OpenAI's shape, not plain text.
        exception_handlers={HTTPException: http_error, Exception: http_error},
    )
    app.state.stop_generations = serving.stop
    return app


class _Serving:
    """The generations an app is serving, so that a stopping server can end them."""

    def __init__(self, engine: LocalEngine) -> None:
        self.engine = engine
        self.generations: set[Generation] = set()
        self.stopping = False

    def stop(self) -> None:
        """End the requests in progress (503 ``server_shutting_down``) and refuse new
        ones; their generations are cancelled, the queued ones dropped at once."""
        self.stopping = True
        for generation in list(self.generations):
            generation.cancel(_SHUTTING_DOWN_MESSAGE)
        self.engine.discard_cancelled()

    def ended_by_stop(self, result: GenerationResult) -> bool:
        """Whether the server's stop, not its client, ended this generation."""
        return self.stopping and result.finish_reason == "cancelled"


def _shutting_down() -> JSONResponse:
    return error_response(
        503, _SHUTTING_DOWN_MESSAGE, code=SHUTTING_DOWN, headers={"connection": "close"}
    )


def _modified(path: Path) -> int:
    """The file's modification time (``created`` of the model card), 0 if it is gone."""
    try:
        return int(path.stat().st_mtime)
    except OSError:
        return 0


class _GenerationStream(EventStream):
    """The event stream of one generation, cut when its client stops taking bytes.

    Each send may wait ``send_timeout`` seconds for the connection to take more
    (uvicorn waits while its write buffer, and the kernel's, are full); then the
    generation is cancelled with the reason and the response ends unfinished, which
    closes the connection. Whatever ends the response, the generation is cancelled
    (a no-op once it finished), even if its event iterator never started.
    """

    def __init__(
        self,
        events: AsyncGenerator[bytes, None],
        generation: Generation,
        send_timeout: float,
        serving: _Serving,
    ) -> None:
        super().__init__(events)
        self._generation = generation
        self._send_timeout = send_timeout
        self._serving = serving

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        generation, timeout = self._generation, self._send_timeout

        async def send_within(message: Message) -> None:
            try:
                with anyio.fail_after(timeout):
                    await send(message)
            except TimeoutError:
                generation.cancel(
                    f"the client took nothing of its stream for {timeout:g} s; "
                    "the connection was closed"
                )
                raise

        try:
            await super().__call__(scope, receive, send_within)
        except TimeoutError:  # the client was cut (EventStream may have let it through)
            pass
        finally:
            generation.cancel()
            self._serving.generations.discard(generation)


def _slotflight_error_response(exc: SlotflightError) -> JSONResponse:
    status = _STATUS_BY_CODE.get(exc.code, 400)
    return error_response(status, exc.message, code=exc.code, param=exc.location or None)


def _sampling(chat: ChatRequest) -> Sampling:
    return Sampling(
        max_tokens=chat.max_tokens,
        temperature=chat.temperature,
        top_p=chat.top_p,
        frequency_penalty=chat.frequency_penalty,
        presence_penalty=chat.presence_penalty,
        seed=chat.seed,
        stop=chat.stop,
        cache_prompt=chat.cache_prompt,
        logprobs=chat.logprobs,
    )


def _finish_reason(result: GenerationResult) -> str:
    # A cancelled generation has no reader left; "stop" keeps the value OpenAI-shaped.
    return "length" if result.finish_reason == "length" else "stop"


async def _complete(
    request: Request, generation: Generation, chat: ChatRequest, model: str, serving: _Serving
) -> Response:
    """Collect the whole answer, cancelling the generation if the client leaves."""

    async def cancel_on_disconnect() -> None:
        await until_disconnect(request.receive)
        generation.cancel()

    pieces: list[Piece] = []
    failure: SlotflightError | None = None
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(cancel_on_disconnect)
            try:
                async for piece in generation:
                    pieces.append(piece)
            except SlotflightError as exc:
                failure = exc
            finally:
                group.cancel_scope.cancel()
    finally:
        generation.cancel()
    if failure is not None:
        return _slotflight_error_response(failure)
    result = generation.result
    assert result is not None  # set when the iteration ends
    if serving.ended_by_stop(result):
        return _shutting_down()
    return JSONResponse(
        _with_closed_choices(
            payloads.completion(
                completion_id=generation.id,
                created=int(time.time()),
                model=model,
                content="".join(pieces),
                finish_reason=_finish_reason(result),
                usage=result.usage.to_json(),
                logprobs=[t for p in pieces for t in _logprobs(p, chat) or ()]
                if chat.logprobs
                else None,
            ),
            result,
        )
    )


def _with_closed_choices(payload: dict[str, Any], result: GenerationResult) -> dict[str, Any]:
    """``payload`` with what each closed field chose, as ``closed_choices``, when the
    request named closed fields."""
    if result.closed_choices:
        payload["closed_choices"] = list(result.closed_choices)
    return payload


def _logprobs(piece: Piece, chat: ChatRequest) -> list[dict[str, Any]] | None:
    """The ``logprobs.content`` of a piece, when the request asked for logprobs: an
    empty list when the tokens that wrote it are not known (never guessed)."""
    if not chat.logprobs:
        return None
    return [payloads.token_logprob(t[0], t[2], bytes(t[1])) for t in piece.logprobs or ()]


async def _stream_events(
    generation: Generation, chat: ChatRequest, model: str, serving: _Serving
) -> AsyncGenerator[bytes, None]:
    """The OpenAI ``chat.completion.chunk`` events of one generation, then ``[DONE]``."""
    created = int(time.time())

    def chunk(
        delta: dict[str, str],
        finish_reason: str | None = None,
        logprobs: list[dict[str, Any]] | None = None,
    ) -> bytes:
        payload = payloads.chunk(
            completion_id=generation.id,
            created=created,
            model=model,
            delta=delta,
            finish_reason=finish_reason,
            with_usage_field=chat.include_usage,
            logprobs=logprobs,
        )
        if finish_reason is not None and generation.result is not None:
            _with_closed_choices(payload, generation.result)
        return payloads.sse_event(payload)

    try:
        yield chunk({"role": "assistant", "content": ""})
        try:
            async for piece in generation:
                yield chunk({"content": str(piece)}, logprobs=_logprobs(piece, chat))
        except SlotflightError as exc:
            status = _STATUS_BY_CODE.get(exc.code, 500)
            yield payloads.sse_event(payloads.error_body(status, exc.message, code=exc.code))
            return
        result = generation.result
        assert result is not None  # set when the iteration ends
        if serving.ended_by_stop(result):
            body = payloads.error_body(503, _SHUTTING_DOWN_MESSAGE, code=SHUTTING_DOWN)
            yield payloads.sse_event(body)
            return
        yield chunk({}, _finish_reason(result))
        if chat.include_usage:
            yield payloads.sse_event(
                payloads.usage_chunk(
                    completion_id=generation.id,
                    created=created,
                    model=model,
                    usage=result.usage.to_json(),
                )
            )
        yield payloads.DONE_EVENT
    finally:
        generation.cancel()
