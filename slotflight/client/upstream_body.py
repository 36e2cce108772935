"""Reading a streamed request's response: its chunks, whatever shape the server sent.

Shapes that OpenAI-compatible servers and proxies send, read here before ``openai``'s
stream sees them:

- A blank ``data:`` line (``data:`` or ``data: `` and an empty line), which some
  servers and proxies send as a keep-alive: ``openai``'s SSE decoder passes it on as
  an event with empty data, which its stream then fails to read as JSON, ending the
  stream. Such events are skipped, as comment lines (``: OPENROUTER PROCESSING``) are.
- A JSON answer to a request with ``stream: true``: a server or proxy that ignores
  ``stream`` and answers with one ``chat.completion``, or one that answers an error with
  status 200 (``{"error": …}``). Read as SSE it holds no event at all, and the stream
  would ask again for every value the answer held. It becomes one chunk instead: each
  choice's ``message`` as its ``delta``, with the ``finish_reason``, ``logprobs`` and
  ``usage``; an ``error`` object raises the :class:`openai.APIError` that the same
  object raises inside a stream (:mod:`.upstream_errors`). A response whose
  ``Content-Type`` is JSON (``application/json``, ``…+json``) is read whole (at most
  :func:`body_limit` bytes, the idle timeout bounding each network read): a body that
  is SSE after all is read as SSE, any other raises :class:`~slotflight.TransportError`.
  A response sent as ``text/event-stream`` whose body starts with ``{`` and holds no
  event is read the same way, once it ended.
- More than :func:`body_limit` bytes without an event (an endless line, or an event
  that never ends) end the stream with :class:`~slotflight.TransportError`:
  ``openai``'s decoder keeps an event whole before it reads it, so an endless one would
  take all the memory.

A JSON ``Content-Type`` is read here whatever the stream class. The rest is done for
``openai``'s own stream (its SSE decoder is wrapped before the first read); a stream
class with a decoder of its own reads its events its own way.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any, Final

import openai
from openai._httpx2 import request_exceptions, timeout_exceptions
from openai._streaming import ServerSentEvent, SSEDecoder
from openai.types.chat import ChatCompletionChunk

from .._errors import TransportError
from ..assemble.assembler import Limits

__all__ = [
    "WAITING",
    "achunks",
    "body_limit",
    "chunks",
    "is_json_answer",
    "is_keepalive",
    "read_body",
    "stream_error",
]

#: Bytes a JSON answer may hold per character of ``Limits.max_total_chars``: JSON text
#: escapes a character in up to 12 bytes (a surrogate pair), and logprobs add more.
_BYTES_PER_CHAR: Final = 16
_MIN_BODY_BYTES: Final = 1 << 20

#: Sent for a network read of a JSON answer that did not end it: a chunk without
#: choices (the stream reads nothing from it), so that the idle timeout bounds each read
#: rather than the whole body.
WAITING: Final[object] = object()

_NOT_AN_ANSWER: Final = (
    "the model server answered JSON that is neither a chat completion nor an error"
)


def body_limit(limits: Limits | None) -> int:
    """The most bytes a JSON answer, or one event of SSE, is read to: room for a pass
    of ``limits.max_total_chars`` characters however they are escaped."""
    chars = (limits or Limits()).max_total_chars
    return max(_BYTES_PER_CHAR * chars, _MIN_BODY_BYTES)


def is_json_answer(upstream: Any) -> bool:
    """Whether the response of ``upstream`` (an ``openai`` stream) says it is JSON."""
    response = getattr(upstream, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return False
    value = headers.get("content-type", "")
    media = value.split(";", 1)[0].strip().lower() if isinstance(value, str) else ""
    return media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    )


def chunks(upstream: Any, limit: int) -> Iterator[Any]:
    """The chunks of ``upstream``, a sync ``openai`` stream just opened (module docs);
    :data:`WAITING` after each network read of a JSON answer."""
    if is_json_answer(upstream):
        return _json_chunks(upstream, limit)
    _wrap_decoder(upstream, limit)
    return iter(upstream)


def achunks(upstream: Any, limit: int) -> Any:
    """The chunks of ``upstream``, an async ``openai`` stream just opened (module
    docs): the stream itself (an async iterator), or one over its JSON answer."""
    if is_json_answer(upstream):
        return _ajson_chunks(upstream, limit)
    _wrap_decoder(upstream, limit)
    return upstream


# -- SSE ---------------------------------------------------------------------------------


def _wrap_decoder(upstream: Any, limit: int) -> None:
    """Give ``upstream`` (an ``openai`` stream not read yet) a :class:`_Events` decoder.
    Only ``openai``'s own decoder is wrapped: the stream builds its event iterator from
    it at its first read."""
    if type(getattr(upstream, "_decoder", None)) is SSEDecoder:
        upstream._decoder = _Events(
            upstream._decoder, getattr(upstream.response, "request", None), limit
        )


class _Watch:
    """Watches the bytes of a response on their way to the SSE decoder: ends the
    stream (:class:`~slotflight.TransportError`) when more than ``limit`` bytes came
    since the last event (``pending``, reset by :class:`_Events`; ``openai``'s decoder
    keeps an event whole, however long), and keeps the bytes the response starts with
    while they may be a JSON answer (``body``: the first that is not whitespace is
    ``{``, no event came, at most ``limit`` in all)."""

    __slots__ = ("body", "limit", "pending", "started")

    def __init__(self, limit: int) -> None:
        self.body: bytearray | None = bytearray()
        self.limit = limit
        self.pending = 0  # bytes since the last event
        self.started = False  # a byte that is not whitespace came

    def add(self, part: bytes) -> None:
        self.pending += len(part)
        if self.pending > self.limit:
            raise TransportError(
                f"the model server sent more than {self.limit} bytes without an event"
            )
        body = self.body
        if body is None:
            return
        if not self.started:
            start = part.lstrip()
            if start:
                self.started = True
                if not start.startswith(b"{"):
                    self.body = None
                    return
        if len(body) + len(part) > self.limit:
            self.body = None
            return
        body += part

    def watch(self, parts: Iterator[bytes]) -> Iterator[bytes]:
        for part in parts:
            self.add(part)
            yield part

    async def awatch(self, parts: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        async for part in parts:
            self.add(part)
            yield part


class _Events:
    """An SSE decoder passing on the events of ``decoder``, except those whose data is
    empty or only whitespace (keep-alives, which are not JSON), its bytes seen by a
    :class:`_Watch`; a body that held no event and is JSON becomes the event of the
    chunk it makes (:func:`_json_event`)."""

    __slots__ = ("_decoder", "_limit", "_request")

    def __init__(self, decoder: SSEDecoder, request: Any, limit: int) -> None:
        self._decoder = decoder
        self._request = request
        self._limit = limit

    def iter_bytes(self, iterator: Iterator[bytes]) -> Iterator[ServerSentEvent]:
        watch = _Watch(self._limit)
        for sse in self._decoder.iter_bytes(watch.watch(iterator)):
            watch.body = None
            watch.pending = 0
            if not is_keepalive(sse.data):
                yield sse
        yield from _json_event(watch.body, self._request)

    async def aiter_bytes(self, iterator: AsyncIterator[bytes]) -> AsyncIterator[ServerSentEvent]:
        watch = _Watch(self._limit)
        async for sse in self._decoder.aiter_bytes(watch.awatch(iterator)):
            watch.body = None
            watch.pending = 0
            if not is_keepalive(sse.data):
                yield sse
        for sse in _json_event(watch.body, self._request):
            yield sse


def _json_event(body: bytearray | None, request: Any) -> list[ServerSentEvent]:
    """The event that a body without events makes when it is a JSON answer: the chunk
    of :func:`read_body`, as JSON; nothing when it is not one (the stream then ended
    without a chunk, as an empty body does)."""
    if not body:
        return []
    try:
        made = list(_answer(bytes(body), request))
    except TransportError:
        return []
    try:
        return [ServerSentEvent(data=json.dumps(chunk)) for chunk in made]
    except RecursionError as err:
        raise TransportError("the model server sent JSON nested too deeply") from err


# -- a JSON answer -----------------------------------------------------------------------


@contextlib.contextmanager
def _read_errors(response: Any) -> Iterator[None]:
    """The transport's errors while a body is read, raised as ``openai`` raises them."""
    try:
        yield
    except timeout_exceptions() as err:
        raise openai.APITimeoutError(request=response.request) from err
    except request_exceptions() as err:
        raise openai.APIConnectionError(request=response.request) from err


def _json_chunks(upstream: Any, limit: int) -> Iterator[Any]:
    response = upstream.response
    body = bytearray()
    with _read_errors(response):
        for part in response.iter_bytes():
            _add(body, part, limit)
            yield WAITING
    yield from read_body(bytes(body), response.request)


async def _ajson_chunks(upstream: Any, limit: int) -> AsyncIterator[Any]:
    response = upstream.response
    body = bytearray()
    with _read_errors(response):
        async for part in response.aiter_bytes():
            _add(body, part, limit)
            yield WAITING
    for chunk in read_body(bytes(body), response.request):
        yield chunk


def _add(body: bytearray, part: bytes, limit: int) -> None:
    if len(body) + len(part) > limit:
        raise TransportError(f"the model server's JSON answer is larger than {limit} bytes")
    body += part


def read_body(body: bytes, request: Any) -> Iterator[ChatCompletionChunk]:
    """The chunks of a whole JSON answer ``body`` (module docs). Raises the
    :class:`openai.APIError` of an ``error`` object, :class:`~slotflight.TransportError`
    for a body that is neither a chat completion, an error nor SSE. O(size)."""
    for data in _answer(body, request):
        yield ChatCompletionChunk.construct(**data)


def _answer(body: bytes, request: Any) -> Iterator[dict[str, Any]]:
    """The chunks of :func:`read_body`, as JSON objects."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):  # JSONDecodeError, UnicodeDecodeError among them
        data = None
        if body.lstrip().startswith((b"data:", b":", b"event:")):
            yield from _sse_chunks(body, request)
            return
    if isinstance(data, Mapping):
        failure = stream_error(data, request)
        if failure is not None:
            raise failure
        if isinstance(data.get("choices"), list):
            yield _chunk(data)
            return
    raise TransportError(_NOT_AN_ANSWER)


def _sse_chunks(body: bytes, request: Any) -> Iterator[Any]:
    """The chunks of a whole body that is SSE (sent as JSON): as ``openai``'s stream
    reads them, blank events skipped."""
    for sse in SSEDecoder().iter_bytes(iter([body])):
        data = sse.data
        if is_keepalive(data):
            continue
        if data.startswith("[DONE]"):
            break
        try:
            parsed = json.loads(data)
        except RecursionError as err:
            raise TransportError("the model server sent JSON nested too deeply") from err
        if isinstance(parsed, Mapping):
            failure = stream_error(parsed, request)
            if failure is not None:
                raise failure
            yield _chunk(parsed)


def is_keepalive(data: str) -> bool:
    """Whether an event's data is empty or only white space: a keep-alive, not a chunk."""
    return not data or data.isspace()


def stream_error(data: object, request: Any) -> openai.APIError | None:
    """The error ``openai`` raises for an ``error`` payload inside a stream (``data`` a
    parsed event, of any shape); ``None`` when it holds none."""
    error = data.get("error") if isinstance(data, Mapping) else None
    if not error:
        return None
    message = error.get("message") if isinstance(error, Mapping) else None
    if not message or not isinstance(message, str):
        message = "An error occurred during streaming"
    return openai.APIError(message=message, request=request, body=error)


def _choices(data: Mapping[str, Any]) -> list[dict[str, Any]]:
    """What the stream reads of the choices of a ``chat.completion`` (or of one
    chunk), as a chunk's: each choice's ``message`` (or ``delta``) as its ``delta``,
    its ``finish_reason`` and ``logprobs``."""
    choices = data.get("choices")
    read = []
    for choice in choices if isinstance(choices, list) else ():
        if not isinstance(choice, Mapping):
            continue
        delta = choice.get("delta")
        if not isinstance(delta, Mapping):
            delta = choice.get("message")
        read.append(
            {
                "index": choice.get("index", 0),
                "delta": dict(delta) if isinstance(delta, Mapping) else {},
                "finish_reason": choice.get("finish_reason"),
                "logprobs": choice.get("logprobs"),
            }
        )
    return read


def _chunk(data: Mapping[str, Any]) -> dict[str, Any]:
    """A ``chat.completion`` (or one chunk) as a ``chat.completion.chunk``'s JSON."""
    return {"choices": _choices(data), "usage": data.get("usage")}
