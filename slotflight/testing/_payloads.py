"""OpenAI chat-completion response shapes, as JSON-ready dicts and SSE lines."""

from __future__ import annotations

import json
from typing import Any

__all__ = [
    "DONE_EVENT",
    "chunk",
    "completion",
    "error_body",
    "model_list",
    "sse_event",
    "usage_chunk",
]

DONE_EVENT = b"data: [DONE]\n\n"

_ERROR_TYPES = {
    400: ("invalid_request_error", None),
    401: ("authentication_error", "invalid_api_key"),
    403: ("permission_error", None),
    404: ("invalid_request_error", "not_found"),
    408: ("timeout_error", None),
    409: ("conflict_error", None),
    413: ("invalid_request_error", "request_too_large"),
    422: ("invalid_request_error", None),
    429: ("rate_limit_error", "rate_limit_exceeded"),
}


def sse_event(payload: dict[str, Any]) -> bytes:
    """One server-sent event carrying ``payload`` as compact JSON."""
    return b"data: " + json.dumps(payload, separators=(",", ":")).encode("utf-8") + b"\n\n"


def chunk(
    *,
    completion_id: str,
    created: int,
    model: str,
    delta: dict[str, Any],
    finish_reason: str | None = None,
    with_usage_field: bool = False,
) -> dict[str, Any]:
    """A ``chat.completion.chunk`` with one choice."""
    payload: dict[str, Any] = {
        "id": completion_id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "system_fingerprint": None,
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}],
    }
    if with_usage_field:
        payload["usage"] = None
    return payload


def usage_chunk(
    *, completion_id: str, created: int, model: str, usage: dict[str, int]
) -> dict[str, Any]:
    """The last chunk of a stream requested with ``include_usage``: no choices."""
    return {
        "id": completion_id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "system_fingerprint": None,
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
    usage: dict[str, int],
) -> dict[str, Any]:
    """A non-streaming ``chat.completion``."""
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "system_fingerprint": None,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content, "refusal": None},
                "logprobs": None,
                "finish_reason": finish_reason,
            }
        ],
        "usage": usage,
    }


def error_body(status: int, message: str) -> dict[str, Any]:
    """An OpenAI-style error body: ``{"error": {"message", "type", "param", "code"}}``."""
    error_type, code = _ERROR_TYPES.get(
        status, ("server_error", None) if status >= 500 else ("invalid_request_error", None)
    )
    return {"error": {"message": message, "type": error_type, "param": None, "code": code}}


def model_list(model_ids: list[str]) -> dict[str, Any]:
    """The ``GET /v1/models`` answer."""
    return {
        "object": "list",
        "data": [
            {"id": model_id, "object": "model", "created": 0, "owned_by": "slotflight"}
            for model_id in model_ids
        ],
    }
