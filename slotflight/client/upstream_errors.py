"""Mapping of ``openai`` client exceptions onto slotflight's :class:`TransportError` s.

The caller of :func:`slotflight.stream` never sees an ``openai`` exception: each one
is turned into the matching subclass here, with the original kept as ``__cause__``.

An ``error`` object inside the stream (``data: {"error": {"message": …, "code": 502}}``,
as OpenRouter, vLLM and llama.cpp's server send it when generation fails after the
response started; ``openai`` raises it as a bare :class:`openai.APIError`) keeps the
server's code: an HTTP status (``code`` ``502`` or ``"502"``) makes it an
:class:`UpstreamStatusError` with that ``status_code``. It is transient
(:func:`is_interruption`) when that status is 408 or 5xx, or its ``code`` or ``type``
is ``"server_error"`` (OpenAI, OpenRouter, llama.cpp): the stream then treats it as a
dropped connection, keeping what the pass accepted and asking for the rest. Any other
error object (a 4xx such as 400 or 429, an unknown code) ends the stream at once: a
request sent straight away would meet it again.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Final

import openai

from .._errors import (
    TransportError,
    UpstreamDisconnected,
    UpstreamStatusError,
    UpstreamTimeout,
)

__all__ = [
    "UPSTREAM_ERRORS",
    "is_drop",
    "is_interruption",
    "stream_error_status",
    "transport_error",
]

#: Characters of an error response body kept on :class:`UpstreamStatusError`.
MAX_BODY_CHARS: Final = 2000

#: ``code`` / ``type`` of an error object inside the stream that a new request may not
#: meet again (OpenAI's and OpenRouter's mid-stream failures, llama.cpp's server's).
_TRANSIENT_KINDS: Final = frozenset({"server_error"})


def is_drop(exc: BaseException) -> bool:
    """Whether ``exc`` means the connection broke (not a timeout, not an error reply)."""
    return isinstance(exc, openai.APIConnectionError) and not isinstance(
        exc, openai.APITimeoutError
    )


def _stream_error(exc: BaseException) -> Mapping[str, object] | None:
    """The ``error`` object of an error event inside the stream (``openai`` raises it as
    a bare :class:`openai.APIError` whose ``body`` is that object); ``None`` for any other
    exception or an error that is not an object."""
    if type(exc) is not openai.APIError or not isinstance(exc.body, Mapping):
        return None
    return exc.body


def stream_error_status(exc: BaseException) -> int | None:
    """The HTTP status an error event inside the stream names in its ``code`` (an int
    or its digits, 400 to 599), else ``None``."""
    error = _stream_error(exc)
    code = None if error is None else error.get("code")
    if isinstance(code, str) and code.isascii() and code.isdigit() and len(code) == 3:
        code = int(code)
    if isinstance(code, int) and not isinstance(code, bool) and 400 <= code <= 599:
        return code
    return None


def is_interruption(exc: BaseException) -> bool:
    """Whether ``exc``, raised while reading a stream, cut the answer short in a way a
    new request may not meet again: the connection broke, or the server sent an error
    event that says so (see the module docs). The stream keeps what the pass accepted
    and asks for the rest, as after a drop."""
    if is_drop(exc):
        return True
    error = _stream_error(exc)
    if error is None:
        return False
    status = stream_error_status(exc)
    if status is not None:
        return status == 408 or status >= 500
    return any(error.get(key) in _TRANSIENT_KINDS for key in ("code", "type"))


#: What reading a request or stream may raise that ends the stream: the client's errors,
#: invalid JSON in a chunk (or JSON nested deeper than Python's parser goes), bytes that
#: are not UTF-8, and an answer that cannot be read (already a :class:`TransportError`).
UPSTREAM_ERRORS: Final = (
    openai.OpenAIError,
    json.JSONDecodeError,
    UnicodeDecodeError,
    RecursionError,
    TransportError,
)


def transport_error(exc: Exception, *, during: str) -> TransportError:
    """The slotflight error for an ``openai`` exception; raise it ``from exc`` (a
    :class:`TransportError` is returned as it is).

    ``during`` names what was happening (``"the request"``, ``"the stream"``) for the
    message.
    """
    if isinstance(exc, TransportError):
        return exc
    if isinstance(exc, openai.APITimeoutError):
        return UpstreamTimeout(f"the model server timed out during {during}")
    if isinstance(exc, openai.APIConnectionError):
        return UpstreamDisconnected(f"the connection to the model server broke during {during}")
    if isinstance(exc, openai.APIStatusError):
        return UpstreamStatusError(
            f"the model server answered HTTP {exc.status_code}: {_message(exc.message)}",
            status_code=exc.status_code,
            body=_body(exc.body),
        )
    if isinstance(exc, openai.APIError):
        return _reported(exc, during)
    if isinstance(exc, json.JSONDecodeError):
        return TransportError(f"the model server sent a chunk that is not JSON during {during}")
    if isinstance(exc, UnicodeDecodeError):
        return TransportError(f"the model server sent bytes that are not UTF-8 during {during}")
    if isinstance(exc, RecursionError):
        return TransportError(f"the model server sent JSON nested too deeply during {during}")
    return TransportError(f"the openai client failed during {during}: {exc}")


def _reported(exc: openai.APIError, during: str) -> TransportError:
    """An error event inside the stream: its message (a bare string ``error``, as Hugging
    Face TGI sends it, is the message), and its code (:func:`stream_error_status`)."""
    body = exc.body
    message = exc.message
    if isinstance(body, str) and body.strip():
        message = body
    text = f"the model server reported an error during {during}: {_message(message)}"
    status = stream_error_status(exc)
    if status is not None:
        return UpstreamStatusError(f"{text} (code {status})", status_code=status, body=_body(body))
    return TransportError(text)


def _message(message: str) -> str:
    return message[:MAX_BODY_CHARS]


def _body(body: object) -> str:
    if body is None:
        return ""
    if isinstance(body, str):
        return body[:MAX_BODY_CHARS]
    try:
        text = json.dumps(body, default=str, ensure_ascii=False)
    except (RecursionError, ValueError):  # nested too deeply, or a circular value
        return ""
    return text[:MAX_BODY_CHARS]
