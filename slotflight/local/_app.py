"""The OpenAI-compatible Starlette application around a :class:`LocalEngine`.

Routes: ``GET /v1/models``, ``POST /v1/chat/completions`` (streamed or not) and
``GET /health``. Every client mistake is answered with an OpenAI-style error body
(``{"error": {"message", "type", "param", "code"}}``) and a 4xx status, never a 500.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncGenerator
from typing import Any

import anyio
import anyio.to_thread
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .._errors import SlotflightError
from ._engine import Generation, GenerationResult, LocalEngine, Sampling
from ._request import ChatRequest, parse_chat_request
from ._sse import EventStream

__all__ = ["MAX_BODY_BYTES", "create_app"]

MAX_BODY_BYTES = 1024 * 1024
"""Largest request body accepted (413 beyond)."""

_STATUS_BY_CODE = {"server_busy": 503, "engine_closed": 503, "generation_failed": 500}
_TYPE_BY_STATUS = {
    404: "invalid_request_error",
    405: "invalid_request_error",
    413: "invalid_request_error",
    500: "server_error",
    503: "server_error",
}
_DONE = b"data: [DONE]\n\n"


class _BodyTooLarge(Exception):
    pass


def create_app(engine: LocalEngine, *, max_body_bytes: int = MAX_BODY_BYTES) -> Starlette:
    """The ASGI app serving ``engine`` (which the caller keeps and closes)."""

    async def models(request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [_model_card(engine)]})

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok", "model": engine.model_id})

    async def chat_completions(request: Request) -> Response:
        try:
            body = await _read_body(request, max_body_bytes)
        except _BodyTooLarge:
            return error_response(
                413,
                f"the request body is larger than {max_body_bytes} bytes",
                code="request_too_large",
            )
        try:
            chat = parse_chat_request(body)
            if chat.grammar is not None:
                engine.check_grammar(chat.grammar, param=chat.grammar_param)
            prompt = await anyio.to_thread.run_sync(engine.prepare, chat.messages)
            generation = engine.submit(prompt, _sampling(chat))
        except SlotflightError as exc:
            return _slotflight_error_response(exc)
        if chat.stream:
            return EventStream(_stream_events(generation, chat, engine.model_id))
        return await _complete(request, generation, engine.model_id)

    async def http_error(request: Request, exc: Exception) -> Response:
        status = exc.status_code if isinstance(exc, HTTPException) else 500
        detail = exc.detail if isinstance(exc, HTTPException) else "internal error"
        return error_response(status, f"{request.method} {request.url.path}: {detail}")

    return Starlette(
        routes=[
            Route("/v1/models", models, methods=["GET"]),
            Route("/v1/chat/completions", chat_completions, methods=["POST"]),
            Route("/health", health, methods=["GET"]),
        ],
        exception_handlers={HTTPException: http_error},
    )


def error_response(
    status: int, message: str, *, code: str | None = None, param: str | None = None
) -> JSONResponse:
    """An OpenAI-style error body with ``status``."""
    error = {
        "message": message,
        "type": _TYPE_BY_STATUS.get(status, "invalid_request_error"),
        "param": param,
        "code": code,
    }
    return JSONResponse({"error": error}, status_code=status)


def _slotflight_error_response(exc: SlotflightError) -> JSONResponse:
    status = _STATUS_BY_CODE.get(exc.code, 400)
    return error_response(status, exc.message, code=exc.code, param=exc.location or None)


async def _read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise _BodyTooLarge
    parts: list[bytes] = []
    size = 0
    async for part in request.stream():
        size += len(part)
        if size > limit:
            raise _BodyTooLarge
        parts.append(part)
    return b"".join(parts)


def _sampling(chat: ChatRequest) -> Sampling:
    return Sampling(
        max_tokens=chat.max_tokens,
        temperature=chat.temperature,
        top_p=chat.top_p,
        seed=chat.seed,
        stop=chat.stop,
        grammar=chat.grammar,
    )


def _model_card(engine: LocalEngine) -> dict[str, Any]:
    return {
        "id": engine.model_id,
        "object": "model",
        "created": int(engine.model_path.stat().st_mtime),
        "owned_by": "local",
        "context_length": engine.n_ctx,
    }


def _finish_reason(result: GenerationResult) -> str:
    # A cancelled generation has no reader left; "stop" keeps the value OpenAI-shaped.
    return "length" if result.finish_reason == "length" else "stop"


async def _complete(request: Request, generation: Generation, model: str) -> Response:
    """Collect the whole answer, cancelling the generation if the client leaves."""

    async def watch_disconnect() -> None:
        while (await request.receive())["type"] != "http.disconnect":
            pass
        generation.cancel()

    pieces: list[str] = []
    failure: SlotflightError | None = None
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(watch_disconnect)
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
    return JSONResponse(
        {
            "id": generation.id,
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "system_fingerprint": None,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "".join(pieces)},
                    "logprobs": None,
                    "finish_reason": _finish_reason(result),
                }
            ],
            "usage": result.usage.to_json(),
        }
    )


def _event(payload: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(payload, separators=(",", ":")).encode("utf-8") + b"\n\n"


async def _stream_events(
    generation: Generation, chat: ChatRequest, model: str
) -> AsyncGenerator[bytes, None]:
    """The OpenAI ``chat.completion.chunk`` events of one generation, then ``[DONE]``."""
    created = int(time.time())

    def chunk(delta: dict[str, str], finish_reason: str | None = None) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "id": generation.id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "system_fingerprint": None,
            "choices": [
                {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
            ],
        }
        if chat.include_usage:
            payload["usage"] = None
        return payload

    try:
        yield _event(chunk({"role": "assistant", "content": ""}))
        try:
            async for piece in generation:
                yield _event(chunk({"content": piece}))
        except SlotflightError as exc:
            yield _event(
                {
                    "error": {
                        "message": exc.message,
                        "type": "server_error",
                        "param": None,
                        "code": exc.code,
                    }
                }
            )
            return
        result = generation.result
        assert result is not None  # set when the iteration ends
        yield _event(chunk({}, _finish_reason(result)))
        if chat.include_usage:
            usage_chunk = chunk({})
            usage_chunk["choices"] = []
            usage_chunk["usage"] = result.usage.to_json()
            yield _event(usage_chunk)
        yield _DONE
    finally:
        generation.cancel()
