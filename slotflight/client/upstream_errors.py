"""Mapping of ``openai`` client exceptions onto slotflight's :class:`TransportError` s.

The caller of :func:`slotflight.stream` never sees an ``openai`` exception: each one
is turned into the matching subclass here, with the original kept as ``__cause__``.
"""

from __future__ import annotations

import json
from typing import Final

import openai

from .._errors import (
    TransportError,
    UpstreamDisconnected,
    UpstreamStatusError,
    UpstreamTimeout,
)

__all__ = ["UPSTREAM_ERRORS", "is_drop", "transport_error"]

#: Characters of an error response body kept on :class:`UpstreamStatusError`.
MAX_BODY_CHARS: Final = 2000


def is_drop(exc: BaseException) -> bool:
    """Whether ``exc`` means the connection broke (not a timeout, not an error reply)."""
    return isinstance(exc, openai.APIConnectionError) and not isinstance(
        exc, openai.APITimeoutError
    )


#: What reading a request or stream may raise that ends the stream: the client's errors,
#: invalid JSON in a chunk, and bytes that are not UTF-8.
UPSTREAM_ERRORS: Final = (openai.OpenAIError, json.JSONDecodeError, UnicodeDecodeError)


def transport_error(exc: Exception, *, during: str) -> TransportError:
    """The slotflight error for an ``openai`` exception; raise it ``from exc``.

    ``during`` names what was happening (``"the request"``, ``"the stream"``) for the
    message.
    """
    if isinstance(exc, openai.APITimeoutError):
        return UpstreamTimeout(f"the model server timed out during {during}")
    if isinstance(exc, openai.APIConnectionError):
        return UpstreamDisconnected(f"the connection to the model server broke during {during}")
    if isinstance(exc, openai.APIStatusError):
        return UpstreamStatusError(
            f"the model server answered HTTP {exc.status_code}: {_message(exc)}",
            status_code=exc.status_code,
            body=_body(exc.body),
        )
    if isinstance(exc, openai.APIError):
        return TransportError(f"the model server reported an error during {during}: {exc.message}")
    if isinstance(exc, json.JSONDecodeError):
        return TransportError(f"the model server sent a chunk that is not JSON during {during}")
    if isinstance(exc, UnicodeDecodeError):
        return TransportError(f"the model server sent bytes that are not UTF-8 during {during}")
    return TransportError(f"the openai client failed during {during}: {exc}")


def _message(exc: openai.APIStatusError) -> str:
    return exc.message[:MAX_BODY_CHARS]


def _body(body: object) -> str:
    if body is None:
        return ""
    text = body if isinstance(body, str) else json.dumps(body, default=str, ensure_ascii=False)
    return text[:MAX_BODY_CHARS]
