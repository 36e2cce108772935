"""Confidence: the model's token log probabilities attributed to the values they wrote.

A server that returns token logprobs (OpenAI-compatible ``logprobs``; the embedded
server too) tells, for every token it streamed, how probable the model found it. The
:class:`TokenLedger` of a pass places each token in the decoded text the assembler
reads, and answers, for a value's span of that text, the log probabilities of the
tokens that wrote it; :func:`confidence` turns them into one figure in ``[0, 1]``.

Rules:

- Tokens are placed by matching their text against the pass's text, after the same
  decoding the assembler applies (UTF-8 from the token's ``bytes`` when it has valid
  ones, else its ``token`` text; a byte order mark at the start dropped; ``\\r\\n`` as
  one line break; lone surrogates as U+FFFD). Placing depends on the concatenation of
  the tokens and of the text only, never on how either was chunked.
- A token whose bytes end inside a character writes no character by itself: its
  log probability is added to that of the token that completes the character (the
  probability of the character is the product of both).
- A value's tokens are those that overlap its span; an empty value's span is the
  character that ended it.
- Never invented: a value gets no confidence (``None``) when any character of its span
  is not covered by a placed token, or when one of its tokens has no valid log
  probability. Tokens whose text does not match the text the pass read (a server that
  sends something else than its content, or no logprobs for part of it) stop the
  placing for the rest of the pass: later values get ``None``. Nothing here raises.
- Bounded: a token longer than :data:`MAX_TOKEN_CHARS`, or more than
  :data:`MAX_UNMATCHED_CHARS` of text or tokens waiting for the other side, stops the
  placing too.

Complexity: O(characters + tokens) per pass; each token is compared once, and a value
query visits only the tokens that overlap its span (spans are queried in order).
"""

from __future__ import annotations

import codecs
import math
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from .decode import LineBreaks, replace_surrogates

__all__ = [
    "MAX_TOKEN_CHARS",
    "MAX_UNMATCHED_CHARS",
    "TokenLedger",
    "TokenLogprob",
    "confidence",
    "tokens_from_openai",
]

#: A token longer than this (in characters) is not a token: placing stops.
MAX_TOKEN_CHARS: Final = 1024
#: Text waiting for its tokens, or tokens waiting for their text, beyond which placing stops.
MAX_UNMATCHED_CHARS: Final = 1 << 20


@dataclass(frozen=True, slots=True)
class TokenLogprob:
    """One streamed token: its ``text``, its UTF-8 ``bytes`` when the server sent them,
    and its natural-log probability (``None`` when the server sent none usable)."""

    text: str
    logprob: float | None
    bytes: bytes | None = None


def _logprob(value: Any) -> float | None:
    """A usable log probability: a real number that is not NaN, at most 0."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    if math.isnan(number) or number == math.inf:
        return None
    return min(number, 0.0)


def _bytes(value: Any) -> bytes | None:
    if isinstance(value, bytes):
        return value
    if isinstance(value, list) and all(
        isinstance(b, int) and not isinstance(b, bool) and 0 <= b <= 255 for b in value
    ):
        return bytes(value)
    return None


def tokens_from_openai(content: Any) -> list[TokenLogprob] | None:
    """The tokens of one chunk's ``choices[0].logprobs.content`` (objects of the
    ``openai`` package or plain dicts); ``None`` when it is absent or not a list.
    Malformed entries keep their place with ``logprob=None`` when they have text,
    and are left out otherwise (which then stops the placing: never raises)."""
    if not isinstance(content, list | tuple):
        return None
    tokens: list[TokenLogprob] = []
    for item in content:
        get = item.get if isinstance(item, dict) else lambda name, i=item: getattr(i, name, None)
        text = get("token")
        data = _bytes(get("bytes"))
        if not isinstance(text, str):
            if data is None:
                continue
            text = ""
        tokens.append(TokenLogprob(text, _logprob(get("logprob")), data))
    return tokens


def confidence(logprobs: Sequence[float]) -> float | None:
    """The confidence of a value from its tokens' log probabilities: the probability
    the model gave the whole value, the product of its tokens' (``exp(sum)``), in
    ``[0, 1]``; ``None`` for no tokens.

    Chosen by measurement against gold (``docs/bench.md``, "Confidence";
    ``python -m slotflight.bench.calibration`` compares it with the least probable
    token, the geometric mean and the first token): it was the one figure that, at some
    threshold, flagged half the wrong values and at most a third of the right ones on
    both models measured (SmolLM2-135M below 0.05, Qwen2.5-Coder-1.5B below 0.1). The
    threshold depends on the model.
    """
    if not logprobs:
        return None
    return math.exp(sum(logprobs))


class _Normaliser:
    """The token side of the assembler's input decoding (see :mod:`.decode`)."""

    __slots__ = ("_breaks", "_bytes", "_bytes_fed")

    def __init__(self) -> None:
        self._bytes = codecs.getincrementaldecoder("utf-8")("surrogateescape")
        self._bytes_fed = False
        self._breaks = LineBreaks()

    def text(self, token: TokenLogprob) -> str:
        if token.bytes is not None:
            self._bytes_fed = True
            text = self._bytes.decode(token.bytes)
        else:
            text = token.text
            if self._bytes_fed and self._bytes.getstate()[0]:
                text = self._bytes.decode(b"", True) + text
                self._bytes.reset()
        return self._breaks.normalise(replace_surrogates(text))


class TokenLedger:
    """The tokens of one pass, placed in its decoded text (see the module docs).

    Feed it the decoded text as the assembler reads it (:meth:`text`) and the tokens
    as they arrive (:meth:`tokens`), in any interleaving; ask :meth:`logprobs` for
    spans in increasing order.
    """

    __slots__ = (
        "_carry",
        "_content",
        "_content_chars",
        "_content_end",
        "_normaliser",
        "_offset",
        "_pending",
        "_pending_chars",
        "_placed",
        "_placed_end",
        "origin",
        "stopped",
    )

    def __init__(self) -> None:
        self._normaliser = _Normaliser()
        self._content: deque[str] = deque()  # text not matched by tokens yet
        self._offset = 0  # characters of the first part already matched
        self._content_chars = 0
        self._content_end = 0  # offset just past all text read
        self._pending: deque[tuple[str, float | None]] = deque()  # tokens waiting for text
        self._pending_chars = 0
        self._carry: float | None = 0.0  # logprob of tokens that wrote no character yet
        #: Placed tokens: (start, end, logprob), in order.
        self._placed: deque[tuple[int, int, float | None]] = deque()
        self._placed_end = 0  # offset just past the last placed token
        #: Placing stopped (a mismatch or a bound): later values have no confidence.
        self.stopped = False
        #: Where the spans asked for start in the text: the characters before the text
        #: read as frames (a reasoning block the pass opened with), placed but not asked.
        self.origin = 0

    def text(self, text: str) -> None:
        """More decoded text, as the assembler's lexer reads it."""
        if not text:
            return
        self._content_end += len(text)
        if self.stopped:
            return
        self._content.append(text)
        self._content_chars += len(text)
        if self._content_chars > MAX_UNMATCHED_CHARS:
            self._stop()
            return
        self._match()

    def tokens(self, tokens: Iterable[TokenLogprob]) -> None:
        """More tokens, in stream order."""
        if self.stopped:
            return
        for token in tokens:
            text = self._normaliser.text(token)
            if len(text) > MAX_TOKEN_CHARS:
                self._stop()
                return
            if not text:  # bytes ending inside a character: counted with the next token
                self._carry = _add(self._carry, token.logprob)
                continue
            self._pending.append((text, _add(self._carry, token.logprob)))
            self._carry = 0.0
            self._pending_chars += len(text)
        if self._pending_chars > MAX_UNMATCHED_CHARS:
            self._stop()
            return
        self._match()

    def logprobs(self, start: int, end: int) -> tuple[float, ...] | None:
        """The log probabilities of the tokens that wrote ``[start, end)`` (an empty span:
        the character at ``start``); ``None`` unless every character of it is covered
        by tokens with valid log probabilities."""
        if end <= start:
            end = start + 1
        start += self.origin
        end += self.origin
        if start < 0 or end > self._placed_end:
            return None
        placed = self._placed
        while placed and placed[0][1] <= start:
            placed.popleft()
        if not placed or placed[0][0] > start:
            return None
        found: list[float] = []
        for token_start, _, logprob in placed:
            if token_start >= end:
                break
            if logprob is None:
                return None
            found.append(logprob)
        return tuple(found)

    def _stop(self) -> None:
        self.stopped = True
        self._content.clear()
        self._offset = 0
        self._pending.clear()
        self._content_chars = self._pending_chars = 0

    def _match(self) -> None:
        """Place every pending token whose text has arrived."""
        content, pending = self._content, self._pending
        while pending and self._content_chars >= len(pending[0][0]):
            text, logprob = pending.popleft()
            size = len(text)
            self._pending_chars -= size
            taken, self._offset = _take(content, self._offset, size)
            if taken != text:
                self._stop()
                return
            self._content_chars -= size
            start = self._placed_end
            self._placed.append((start, start + size, logprob))
            self._placed_end = start + size


def _add(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a + b


def _take(parts: deque[str], offset: int, size: int) -> tuple[str, int]:
    """The ``size`` characters of ``parts`` from ``offset`` in its first part (which it
    has), and the offset in the first part left; parts used up are removed. O(size)."""
    first = parts[0]
    if len(first) - offset > size:
        return first[offset : offset + size], offset + size
    taken: list[str] = []
    while size:
        first = parts[0]
        piece = first[offset : offset + size]
        taken.append(piece)
        size -= len(piece)
        offset += len(piece)
        if offset == len(first):
            parts.popleft()
            offset = 0
    return "".join(taken), offset
