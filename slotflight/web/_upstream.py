"""The gateway's model-server client: ``openai.AsyncOpenAI`` with lean stream chunks.

``openai`` turns every streamed chunk into a ``ChatCompletionChunk`` model, which costs
more CPU than everything else the gateway does per chunk (profile of
``benchmarks/sse_load.py``: about 40 % of the gateway's time). The slot stream reads
only ``choices[i].index``, ``choices[i].delta.content`` and ``usage`` of a chunk, so
:class:`LeanChunkClient` builds just those as plain objects. Everything else (the
request, status errors, timeouts, dropped connections, ``error`` payloads inside the
stream, invalid JSON) stays ``openai``'s own code path, unchanged.

The SSE lines are split by :class:`LeanSSEDecoder` (``openai``'s decoder with a
line splitter that cuts a whole network chunk at once, instead of a regular
expression match, a copy and a generator step per line); each line is then read by
``openai``'s own ``SSEDecoder.decode``.

The seams are ``openai``'s ``_process_response_data`` and ``_make_sse_decoder``:
should a later ``openai`` stop calling them, chunks are simply ``openai``'s models
and lines (slower, same behaviour).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any, cast

import openai
from openai._streaming import ServerSentEvent, SSEBytesDecoder, SSEDecoder
from openai.types.chat import ChatCompletionChunk

__all__ = ["LeanChunkClient", "LeanSSEDecoder", "SSELines"]


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
                yield from self._events(lines.feed(chunk))
            yield from self._events(lines.finish())
        finally:
            self._reset()

    async def aiter_bytes(self, iterator: AsyncIterator[bytes]) -> AsyncIterator[ServerSentEvent]:
        lines = SSELines()
        decode = self.decode
        try:
            async for chunk in iterator:
                for line in lines.feed(chunk):
                    sse = decode(line.decode("utf-8"))
                    if sse is not None:
                        yield sse
            for sse in self._events(lines.finish()):
                yield sse
        finally:
            self._reset()

    def _events(self, lines: list[bytes]) -> Iterator[ServerSentEvent]:
        for line in lines:
            sse = self.decode(line.decode("utf-8"))
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
    __slots__ = ("content",)

    def __init__(self, content: str | None) -> None:
        self.content = content


class _Choice(_Absent):
    __slots__ = ("delta", "finish_reason", "index")

    def __init__(self, index: Any, delta: _Delta, finish_reason: Any) -> None:
        self.index = index
        self.delta = delta
        self.finish_reason = finish_reason


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
        delta = choice.get("delta")
        content = delta.get("content") if isinstance(delta, dict) else None
        choices.append(
            _Choice(
                choice.get("index", 0),
                _Delta(content if isinstance(content, str) else None),
                choice.get("finish_reason"),
            )
        )
    return _Chunk(choices, _Namespace(usage) if isinstance(usage, dict) else None)


class LeanChunkClient(openai.AsyncOpenAI):
    """An ``openai.AsyncOpenAI`` whose streamed chat-completion chunks are plain objects
    with ``choices`` (``index``, ``delta.content``, ``finish_reason``) and ``usage``."""

    def _make_sse_decoder(self) -> SSEDecoder | SSEBytesDecoder:
        return LeanSSEDecoder()

    def _process_response_data(self, *, data: object, cast_to: type[Any], response: Any) -> Any:
        if cast_to is ChatCompletionChunk:
            return cast(Any, _chunk(data))
        return super()._process_response_data(data=data, cast_to=cast_to, response=response)
