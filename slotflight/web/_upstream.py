"""The gateway's model-server client: ``openai.AsyncOpenAI`` with lean stream chunks.

``openai`` turns every streamed chunk into a ``ChatCompletionChunk`` model, which costs
more CPU than everything else the gateway does per chunk (profile of
``benchmarks/sse_load.py``: about 40 % of the gateway's time). The slot stream reads
only ``choices[i].index``, ``choices[i].delta.content`` and ``usage`` of a chunk, so
:class:`LeanChunkClient` builds just those as plain objects.

A streamed chat completion is read by :class:`LeanChunkStream`: ``openai``'s
``AsyncStream`` with its per-chunk loop in one generator over the response's raw bytes
(``openai`` stacks four: the body's bytes, their decoding, the SSE events and the
chunks). Its lines are cut by :class:`SSELines` (a whole network chunk at once) and
read by ``openai``'s own ``SSEDecoder.decode``; ``[DONE]``, ``error`` payloads inside
the stream, invalid JSON, timeouts and dropped connections raise what ``openai``
raises. The request itself, status errors and retries stay ``openai``'s own code path.

The seams are ``openai``'s ``request`` (its ``stream_cls`` argument),
``_process_response_data`` and ``_make_sse_decoder``: should a later ``openai`` stop
using them, chunks are simply ``openai``'s models and events (slower, same behaviour).
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any, cast

import httpx2
import openai
from openai._httpx2 import request_exceptions, timeout_exceptions
from openai._streaming import AsyncStream, ServerSentEvent, SSEBytesDecoder, SSEDecoder
from openai._streaming_cleanup import drain_response_async
from openai.types.chat import ChatCompletionChunk

from .._errors import TransportError
from ..client.upstream_body import body_limit, is_keepalive, stream_error

__all__ = [
    "EVENT_LIMIT",
    "LeanChunkClient",
    "LeanChunkStream",
    "LeanSSEDecoder",
    "SSELines",
    "default_http_client",
]


#: The most bytes read without an event before the stream ends (``openai``'s decoder
#: keeps an event whole before it reads it): the SDK's bound for default ``Limits``.
EVENT_LIMIT = body_limit(None)


def default_http_client() -> Any:
    """The gateway's HTTP client for the model server: ``openai``'s own aiohttp
    transport (``openai.DefaultAioHttpClient``, the ``openai[aiohttp]`` extra that
    slotflight's ``server`` extra installs), which reads a streamed chunk with about half
    the CPU of the default ``httpx2`` transport (``benchmarks/sse_load.py``); without
    aiohttp, ``openai``'s default client."""
    if importlib.util.find_spec("aiohttp") is None:
        return openai.DefaultAsyncHttpxClient()
    return openai.DefaultAioHttpClient()


class SSELines:
    """Cuts bytes into SSE lines (ended by CR, LF or CRLF), chunk after chunk.

    O(bytes): a line that spans chunks is kept as its parts and joined once, when its
    end comes."""

    __slots__ = ("_parts", "_skip_lf")

    def __init__(self) -> None:
        self._parts: list[bytes] = []
        self._skip_lf = False  # the last chunk ended with CR: a LF now ends nothing

    def feed(self, chunk: bytes) -> list[bytes]:
        """The lines that ``chunk`` completes, without their ends."""
        if self._skip_lf:
            self._skip_lf = False
            if chunk.startswith(b"\n"):
                chunk = chunk[1:]
        if b"\n" not in chunk and b"\r" not in chunk:
            if chunk:
                self._parts.append(chunk)
            return []
        if self._parts:
            self._parts.append(chunk)
            chunk = b"".join(self._parts)
            self._parts.clear()
        if b"\r" in chunk:
            self._skip_lf = chunk.endswith(b"\r")
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        lines = chunk.split(b"\n")
        rest = lines.pop()
        if rest:
            self._parts.append(rest)
        return lines

    def finish(self) -> list[bytes]:
        """The last line, when the bytes ended without a line end."""
        rest = b"".join(self._parts)
        self._parts.clear()
        return [rest] if rest else []


class LeanSSEDecoder(SSEDecoder):
    """``openai``'s SSE decoder, its lines cut by :class:`SSELines`."""

    def iter_bytes(self, iterator: Iterator[bytes]) -> Iterator[ServerSentEvent]:
        lines = SSELines()
        try:
            for chunk in iterator:
                yield from self.events(lines.feed(chunk))
            yield from self.events(lines.finish())
        finally:
            self._reset()

    async def aiter_bytes(self, iterator: AsyncIterator[bytes]) -> AsyncIterator[ServerSentEvent]:
        lines = SSELines()
        try:
            async for chunk in iterator:
                for sse in self.events(lines.feed(chunk)):
                    yield sse
            for sse in self.events(lines.finish()):
                yield sse
        finally:
            self._reset()

    def events(self, lines: list[bytes]) -> Iterator[ServerSentEvent]:
        """The events that ``lines`` (from :class:`SSELines`) complete, in order, each
        line decoded only when the one before it has been taken."""
        decode = self.decode
        for line in lines:
            sse = decode(line.decode("utf-8"))
            if sse is not None:
                yield sse


class _Namespace:
    """Attributes from a mapping; what is absent reads as ``None``."""

    def __init__(self, fields: dict[str, Any]) -> None:
        self.__dict__.update(fields)

    def __getattr__(self, name: str) -> None:
        return None


class _Absent:
    """What is not set reads as ``None`` (as a missing field of ``openai``'s models)."""

    __slots__ = ()

    def __getattr__(self, name: str) -> None:
        return None


class _Delta(_Absent):
    __slots__ = ("content", "function_call", "refusal", "tool_calls")

    def __init__(self, fields: Any) -> None:
        get = fields.get if isinstance(fields, dict) else lambda name: None
        content, refusal = get("content"), get("refusal")
        self.content = content if isinstance(content, str) else None
        # what ends a pass that a new request would end the same way (read by the core)
        self.refusal = refusal if isinstance(refusal, str) else None
        self.tool_calls = bool(get("tool_calls")) or None
        self.function_call = bool(get("function_call")) or None


class _Choice(_Absent):
    __slots__ = ("delta", "finish_reason", "index", "logprobs")

    def __init__(
        self, index: Any, delta: _Delta, finish_reason: Any, logprobs: _Namespace | None
    ) -> None:
        self.index = index
        self.delta = delta
        self.finish_reason = finish_reason
        self.logprobs = logprobs  # its ``content``: the tokens, read by the core


class _Chunk(_Absent):
    __slots__ = ("choices", "usage")

    def __init__(self, choices: list[_Choice], usage: _Namespace | None) -> None:
        self.choices = choices
        self.usage = usage


def _chunk(data: object) -> _Chunk:
    """The parts of a ``chat.completion.chunk`` the slot stream reads. O(size)."""
    fields = data if isinstance(data, dict) else {}
    usage = fields.get("usage")
    choices = []
    for choice in fields.get("choices") or ():
        if not isinstance(choice, dict):
            continue
        logprobs = choice.get("logprobs")
        choices.append(
            _Choice(
                choice.get("index", 0),
                _Delta(choice.get("delta")),
                choice.get("finish_reason"),
                _Namespace(logprobs) if isinstance(logprobs, dict) else None,
            )
        )
    return _Chunk(choices, _Namespace(usage) if isinstance(usage, dict) else None)


def _timed_out(exc: BaseException) -> bool:
    """Whether an ``httpx2`` timeout exception is one: ``openai``'s aiohttp transport
    raises ``ConnectTimeout`` for every aiohttp connection error, a refused connection
    and a server that hung up included (they are no timeouts: retried or reported as a
    broken connection, not as a silent server)."""
    cause = exc.__cause__
    if cause is None or not type(cause).__module__.startswith("aiohttp"):
        return True
    return isinstance(cause, TimeoutError)  # aiohttp's own timeouts are TimeoutErrors


class LeanChunkStream(AsyncStream[ChatCompletionChunk]):
    """``openai``'s stream of chat-completion chunks, each chunk a :func:`_chunk`,
    read in one generator (see the module docs). Raises what ``openai``'s does."""

    def __anext__(self) -> Any:  # the generator's own awaitable, no wrapper coroutine
        return self._iterator.__anext__()

    async def __stream__(self) -> AsyncIterator[Any]:
        response = self.response
        encoded = response.headers.get("content-encoding", "").strip().lower()
        body = response.aiter_raw() if encoded in ("", "identity") else response.aiter_bytes()
        lines = SSELines()
        decoder = self._decoder if isinstance(self._decoder, LeanSSEDecoder) else LeanSSEDecoder()
        limit = EVENT_LIMIT
        pending = 0  # bytes since a network read that completed an event
        try:
            try:
                async for raw in body:
                    pending += len(raw)
                    for sse in decoder.events(lines.feed(raw)):
                        pending = 0
                        if is_keepalive(sse.data):
                            continue
                        if sse.data.startswith("[DONE]"):
                            if response.http_version == "HTTP/1.1":
                                await drain_response_async(response)
                            return
                        data = json.loads(sse.data)
                        if sse.event and sse.event.startswith("thread."):  # as openai
                            yield _chunk({"data": data, "event": sse.event})
                            continue
                        failure = stream_error(data, response.request)
                        if failure is not None:
                            raise failure
                        yield _chunk(data)
                    if pending > limit:  # openai's decoder keeps an event whole
                        raise TransportError(
                            f"the model server sent more than {limit} bytes without an event"
                        )
            except timeout_exceptions() as err:
                if not _timed_out(err):
                    raise openai.APIConnectionError(request=response.request) from err
                raise openai.APITimeoutError(request=response.request) from err
            except request_exceptions() as err:
                raise openai.APIConnectionError(request=response.request) from err
        finally:
            await response.aclose()


class LeanChunkClient(openai.AsyncOpenAI):
    """An ``openai.AsyncOpenAI`` whose streamed chat-completion chunks are plain objects
    with ``choices`` (``index``, ``delta.content``, ``finish_reason``, ``logprobs``) and
    ``usage``."""

    async def request(
        self, cast_to: Any, options: Any, *, stream: bool = False, stream_cls: Any = None
    ) -> Any:
        if stream and stream_cls == AsyncStream[ChatCompletionChunk]:
            stream_cls = LeanChunkStream
        return await super().request(cast_to, options, stream=stream, stream_cls=stream_cls)

    async def _send_request(self, request: Any, *, stream: bool, **kwargs: Any) -> Any:
        """Send as ``openai`` does; once a streamed response's head has come (within
        the read timeout), its body is read without one: each read would arm and
        cancel a timer, and the slot stream already bounds every wait for a chunk
        (its idle timeout, one timer per stream). A connection error that ``openai``'s
        aiohttp transport raised as a timeout is raised as the ``ConnectError`` it is."""
        try:
            response = await super()._send_request(request, stream=stream, **kwargs)
        except httpx2.TimeoutException as exc:
            if _timed_out(exc):
                raise
            raise httpx2.ConnectError(str(exc), request=request) from exc.__cause__
        timeouts = request.extensions.get("timeout")
        if stream and isinstance(timeouts, dict) and timeouts.get("read") is not None:
            request.extensions["timeout"] = {**timeouts, "read": None}
        return response

    def _make_sse_decoder(self) -> SSEDecoder | SSEBytesDecoder:
        return LeanSSEDecoder()

    def _process_response_data(self, *, data: object, cast_to: type[Any], response: Any) -> Any:
        if cast_to is ChatCompletionChunk:
            return cast(Any, _chunk(data))
        return super()._process_response_data(data=data, cast_to=cast_to, response=response)
