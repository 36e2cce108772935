"""OpenAI chat-completion wire shapes, as JSON-ready dicts and SSE lines.

Every OpenAI-compatible server in slotflight answers with these, so a client sees the
same chunk, completion, model and error shapes from each. Usage objects come from
:meth:`slotflight.TokenUsage.to_json`.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = [
    "DONE_EVENT",
    "chunk",
    "completion",
    "error_body",
    "model_card",
    "model_list",
    "sse_event",
    "token_logprob",
    "usage_chunk",
]

DONE_EVENT = b"data: [DONE]\n\n"
"""The last server-sent event of an OpenAI stream."""

_ERROR_TYPES = {
    400: ("invalid_request_error", None),
    401: ("authentication_error", "invalid_api_key"),
    403: ("permission_error", None),
    404: ("invalid_request_error", "not_found"),
    405: ("invalid_request_error", None),
    408: ("timeout_error", None),
    409: ("conflict_error", None),
    413: ("invalid_request_error", "request_too_large"),
    422: ("invalid_request_error", None),
    429: ("rate_limit_error", "rate_limit_exceeded"),
}


def sse_event(payload: dict[str, Any]) -> bytes:
    """One server-sent event carrying ``payload`` as compact JSON."""
    return b"data: " + json.dumps(payload, separators=(",", ":")).encode("utf-8") + b"\n\n"


def _head(kind: str, completion_id: str, created: int, model: str) -> dict[str, Any]:
    """The fields every completion and chunk starts with."""
    return {
        "id": completion_id,
        "object": kind,
        "created": created,
        "model": model,
        "system_fingerprint": None,
    }


def chunk(
    *,
    completion_id: str,
    created: int,
    model: str,
    delta: dict[str, Any],
    finish_reason: str | None = None,
    with_usage_field: bool = False,
    logprobs: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A ``chat.completion.chunk`` with one choice.

    ``with_usage_field``: the request asked for ``stream_options.include_usage``, so
    every chunk carries ``"usage": null`` until the usage chunk, as OpenAI sends it.
    ``logprobs``: the chunk's tokens (:func:`token_logprob` entries), sent as
    ``choices[0].logprobs.content``.
    """
    payload = _head("chat.completion.chunk", completion_id, created, model)
    payload["choices"] = [
        {
            "index": 0,
            "delta": delta,
            "logprobs": None if logprobs is None else {"content": logprobs, "refusal": None},
            "finish_reason": finish_reason,
        }
    ]
    if with_usage_field:
        payload["usage"] = None
    return payload


def token_logprob(token: str, logprob: float, data: bytes | None = None) -> dict[str, Any]:
    """One entry of ``logprobs.content``: the token's text, log probability and UTF-8
    bytes (``data``, when its text alone cannot say them: a token ending inside a
    character)."""
    raw = token.encode("utf-8", "surrogatepass") if data is None else data
    return {"token": token, "logprob": logprob, "bytes": list(raw), "top_logprobs": []}


def usage_chunk(
    *, completion_id: str, created: int, model: str, usage: dict[str, Any]
) -> dict[str, Any]:
    """The last chunk of a stream requested with ``include_usage``: no choices."""
    return {
        **_head("chat.completion.chunk", completion_id, created, model),
        "choices": [],
        "usage": usage,
    }


def completion(
    *,
    completion_id: str,
    created: int,
    model: str,
    content: str,
    finish_reason: str,
    usage: dict[str, Any],
    logprobs: list[dict[str, Any]] | None = None,
    reasoning: str = "",
) -> dict[str, Any]:
    """A non-streaming ``chat.completion`` (``logprobs``: its tokens, as in :func:`chunk`;
    ``reasoning``: the thinking, as ``message.reasoning_content`` when not empty)."""
    message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": None}
    if reasoning:
        message["reasoning_content"] = reasoning
    return {
        **_head("chat.completion", completion_id, created, model),
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None if logprobs is None else {"content": logprobs, "refusal": None},
                "finish_reason": finish_reason,
            }
        ],
        "usage": usage,
    }


def error_body(
    status: int,
    message: str,
    *,
    code: str | None = None,
    param: str | None = None,
) -> dict[str, Any]:
    """An OpenAI-style error body: ``{"error": {"message", "type", "param", "code"}}``.

    ``type`` follows the status (``invalid_request_error`` for 4xx, ``server_error`` for
    5xx, ``rate_limit_error`` for 429...); ``code`` defaults to the status's usual code
    (``not_found``, ``request_too_large``...) or ``null``. ``param`` names the request
    field at fault (a JSON Pointer in slotflight's servers).
    """
    error_type, default_code = _ERROR_TYPES.get(
        status, ("server_error", None) if status >= 500 else ("invalid_request_error", None)
    )
    return {
        "error": {
            "message": message,
            "type": error_type,
            "param": param,
            "code": default_code if code is None else code,
        }
    }


def model_card(
    model_id: str, *, created: int = 0, owned_by: str = "slotflight", **extra: Any
) -> dict[str, Any]:
    """One entry of ``GET /v1/models``; ``extra`` adds fields (``context_length``...)."""
    return {"id": model_id, "object": "model", "created": created, "owned_by": owned_by, **extra}


def model_list(cards: list[dict[str, Any]]) -> dict[str, Any]:
    """The ``GET /v1/models`` answer around :func:`model_card` entries."""
    return {"object": "list", "data": cards}
