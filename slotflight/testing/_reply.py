"""One scripted answer: what the server sends back for one chat-completion request."""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._serving.payloads import token_logprob
from ..client.usage import TokenUsage

__all__ = ["RandomChunks", "Reply", "estimate_tokens"]

#: Longest ``retry-after`` a reply may ask for, in seconds.
MAX_RETRY_AFTER = 3600.0


def estimate_tokens(text: str) -> int:
    """A simple token estimate: one token per started group of four characters."""
    return (len(text) + 3) // 4


@dataclass(frozen=True)
class RandomChunks:
    """Split the text at random points, reproducibly for a given ``seed``.

    Each chunk holds between ``min_size`` and ``max_size`` characters (the last one may
    be shorter).
    """

    seed: int = 0
    min_size: int = 1
    max_size: int = 8

    def __post_init__(self) -> None:
        if self.min_size < 1 or self.max_size < self.min_size:
            raise ValueError(
                f"RandomChunks needs 1 <= min_size <= max_size, got {self.min_size}, {self.max_size}"
            )

    def split(self, text: str) -> list[str]:
        rng = random.Random(self.seed)
        chunks: list[str] = []
        start = 0
        while start < len(text):
            size = rng.randint(self.min_size, self.max_size)
            chunks.append(text[start : start + size])
            start += size
        return chunks


#: How a reply's text is cut into content deltas: explicit strings, a fixed number of
#: characters per chunk, random splits, or ``None`` for the whole text in one chunk.
Chunking = Sequence[str] | int | RandomChunks | None

#: Selects a reply for a request, given the request's JSON body.
Matcher = Callable[[Mapping[str, Any]], bool]


@dataclass(frozen=True)
class Reply:
    """One scripted answer, consumed by one ``POST /v1/chat/completions`` request.

    ``text`` is the assistant content. ``chunks`` decides how it is streamed: a list of
    strings (sent as they are; ``text`` may then be left empty, and must otherwise equal
    their concatenation), an ``int`` N (N characters per chunk), :class:`RandomChunks`, or
    ``None`` (one chunk).

    ``usage`` is reported as given, or estimated with :func:`estimate_tokens`. ``delay``
    is waited before the first byte of the response (errors included), ``chunk_delay``
    between content chunks.

    Faults: ``status`` answers that HTTP error (with an OpenAI-style error body,
    ``error_message`` as its message, and a ``retry-after`` header when ``retry_after``
    is set) before anything is streamed. ``drop_after_bytes`` sends at most that many
    bytes of UTF-8 content (cut at a character boundary) and then closes the connection
    without ending the response; ``stall_after_bytes`` sends as much and then sends
    nothing more until the client disconnects or the server stops. For a non-streaming
    request both count bytes of the JSON response body instead.

    ``match``, when set, restricts the reply to requests whose JSON body it accepts.
    A reply that could not be sent as written (``retry_after`` without ``status``, a
    delay that is not a finite number >= 0...) raises ``ValueError`` or ``TypeError``.

    ``logprobs``: the text as tokens, each ``(token, logprob)``; their concatenation
    must equal ``text`` (which may then be left empty). A request that asks for
    ``logprobs`` gets them as ``choices[0].logprobs.content``, each token in the chunk
    where its text ends (all of them in a non-streaming answer); ``chunks`` then
    defaults to one chunk per token. A token given
    as a mapping is sent as it is (for malformed entries); its ``token`` text, if any,
    counts for where it goes.

    ``reasoning``: a reasoning model's thinking, as servers that parse it out of the
    content send it: streamed before the content as ``delta.reasoning_content`` chunks
    (cut as ``chunks`` cuts the text when that is a size or :class:`RandomChunks`, else in
    one chunk, ``chunk_delay`` between them), ``message.reasoning_content`` in a
    non-streaming answer. It is not counted by ``drop_after_bytes``/``stall_after_bytes``.
    """

    text: str = ""
    chunks: Chunking = None
    usage: TokenUsage | None = None
    delay: float = 0.0
    chunk_delay: float = 0.0
    finish_reason: str = "stop"
    status: int | None = None
    error_message: str | None = None
    retry_after: float | None = None
    drop_after_bytes: int | None = None
    stall_after_bytes: int | None = None
    match: Matcher | None = field(default=None, compare=False)
    logprobs: Sequence[tuple[str, float] | Mapping[str, Any]] | None = None
    reasoning: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.reasoning, str):
            raise TypeError("Reply.reasoning must be a string")
        if self.logprobs is not None:
            tokens = tuple(self.logprobs)
            joined = "".join(_token_text(t) for t in tokens)
            if self.text and self.text != joined:
                raise ValueError("Reply.text differs from the concatenation of Reply.logprobs")
            object.__setattr__(self, "logprobs", tokens)
            object.__setattr__(self, "text", joined)
            if self.chunks is None:
                object.__setattr__(self, "chunks", [_token_text(t) for t in tokens])
        chunks = self.chunks
        if isinstance(chunks, bool):
            raise TypeError("Reply.chunks must be a sequence of strings, an int or RandomChunks")
        if isinstance(chunks, int):
            if chunks < 1:
                raise ValueError(f"Reply.chunks as a chunk size must be >= 1, got {chunks}")
        elif isinstance(chunks, str):
            raise TypeError("Reply.chunks must be a sequence of strings, not a single string")
        elif chunks is not None and not isinstance(chunks, RandomChunks):
            pieces = tuple(chunks)
            if not all(isinstance(piece, str) for piece in pieces):
                raise TypeError("Reply.chunks must contain only strings")
            joined = "".join(pieces)
            if self.text and self.text != joined:
                raise ValueError("Reply.text differs from the concatenation of Reply.chunks")
            object.__setattr__(self, "chunks", pieces)
            object.__setattr__(self, "text", joined)
        for name in ("delay", "chunk_delay"):
            seconds = _number(name, getattr(self, name))
            if not math.isfinite(seconds) or seconds < 0:
                raise ValueError(f"Reply.{name} must be a finite number of seconds >= 0")
        if self.status is not None and not 400 <= _integer("status", self.status) <= 599:
            raise ValueError(
                f"Reply.status must be an HTTP error status (400-599), got {self.status}"
            )
        if self.retry_after is not None and not (
            0 <= _number("retry_after", self.retry_after) <= MAX_RETRY_AFTER
        ):
            raise ValueError(f"Reply.retry_after must be within 0..{MAX_RETRY_AFTER:g} seconds")
        if self.status is None and (self.error_message is not None or self.retry_after is not None):
            raise ValueError("Reply.error_message and Reply.retry_after need Reply.status")
        if self.drop_after_bytes is not None and self.stall_after_bytes is not None:
            raise ValueError(
                "Reply.drop_after_bytes and Reply.stall_after_bytes exclude each other"
            )
        for name in ("drop_after_bytes", "stall_after_bytes"):
            value = getattr(self, name)
            if value is not None and _integer(name, value) < 0:
                raise ValueError(f"Reply.{name} must be >= 0, got {value}")
        if self.usage is not None and not isinstance(self.usage, TokenUsage):
            raise TypeError(f"Reply.usage must be a Usage (TokenUsage), got {self.usage!r}")
        if not isinstance(self.finish_reason, str) or not self.finish_reason:
            raise ValueError("Reply.finish_reason must be a non-empty string")

    def content_chunks(self) -> list[str]:
        """The content deltas this reply streams, in order (no empty strings)."""
        chunks = self.chunks
        if chunks is None or isinstance(chunks, int | RandomChunks):
            pieces = self._cut(self.text)
        else:
            pieces = list(chunks)
        return [piece for piece in pieces if piece]

    def reasoning_chunks(self) -> list[str]:
        """The ``reasoning_content`` deltas this reply streams before its content."""
        return self._cut(self.reasoning) if self.reasoning else []

    def _cut(self, text: str) -> list[str]:
        """``text`` cut as ``chunks`` says when that is a size or :class:`RandomChunks`;
        else whole."""
        chunks = self.chunks
        if isinstance(chunks, int):
            return [text[i : i + chunks] for i in range(0, len(text), chunks)]
        if isinstance(chunks, RandomChunks):
            return chunks.split(text)
        return [text]

    def chunk_logprobs(self, pieces: Sequence[str]) -> list[list[dict[str, Any]]]:
        """The ``logprobs.content`` of each of ``pieces`` (the content actually sent):
        the tokens whose text ends within it. Tokens past the sent text are left out."""
        out: list[list[dict[str, Any]]] = [[] for _ in pieces]
        ends: list[int] = []
        total = 0
        for piece in pieces:
            total += len(piece)
            ends.append(total)
        position = 0
        chunk = 0
        for token in self.logprobs or ():
            position += len(_token_text(token))
            while chunk < len(ends) and ends[chunk] < position:
                chunk += 1
            if chunk == len(ends):
                break
            out[chunk].append(
                dict(token) if isinstance(token, Mapping) else token_logprob(token[0], token[1])
            )
        return out

    def usage_for(self, request_body: Mapping[str, Any]) -> TokenUsage:
        """``usage`` if given, else estimated from the request messages and ``text``."""
        if self.usage is not None:
            return self.usage
        return TokenUsage(
            prompt_tokens=estimate_prompt_tokens(request_body),
            completion_tokens=estimate_tokens(self.text),
        )

    @property
    def cut_after_bytes(self) -> int | None:
        """The content byte budget of a drop or stall fault, ``None`` without one."""
        if self.drop_after_bytes is not None:
            return self.drop_after_bytes
        return self.stall_after_bytes


def _number(name: str, value: object) -> float:
    """``value`` as a float; :class:`TypeError` unless it is an int or a float."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"Reply.{name} must be a number, got {value!r}")
    return float(value)


def _integer(name: str, value: object) -> int:
    """``value`` itself; :class:`TypeError` unless it is an int."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"Reply.{name} must be an int, got {value!r}")
    return value


def _token_text(token: tuple[str, float] | Mapping[str, Any]) -> str:
    if isinstance(token, Mapping):
        text = token.get("token")
        return text if isinstance(text, str) else ""
    return token[0]


def estimate_prompt_tokens(request_body: Mapping[str, Any]) -> int:
    """:func:`estimate_tokens` summed over the text of every request message."""
    messages = request_body.get("messages")
    if not isinstance(messages, list):
        return 0
    total = 0
    for message in messages:
        if not isinstance(message, Mapping):
            continue
        content = message.get("content")
        if isinstance(content, str):
            total += estimate_tokens(content)
        elif isinstance(content, list):
            for part in content:
                if isinstance(part, Mapping) and isinstance(part.get("text"), str):
                    total += estimate_tokens(part["text"])
    return total


def cut_utf8(text: str, budget: int) -> str:
    """The longest prefix of ``text`` whose UTF-8 encoding fits in ``budget`` bytes."""
    encoded = text.encode("utf-8")
    if len(encoded) <= budget:
        return text
    return encoded[:budget].decode("utf-8", errors="ignore")
