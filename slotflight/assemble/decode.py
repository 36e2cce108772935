"""Input decoding: chunks of model output (text or bytes) in, the text a lexer reads out.

Rules, each independent of how the stream was chunked:

- Bytes are decoded incrementally as UTF-8: a character split across chunks is joined.
  Invalid bytes become U+FFFD, with one ``invalid_utf8`` diagnostic per chunk that had
  some. Lone surrogates in text chunks become U+FFFD the same way. A text chunk after
  bytes first ends the byte decoding (an unfinished character is invalid then).
- A byte order mark at the very start of the pass is dropped.
- ``\\r\\n`` is one line break (``\\n``), also when ``\\r`` and ``\\n`` arrive in different
  chunks: a ``\\r`` that ends a chunk is held back until the next one shows what follows.
  A lone ``\\r`` stays text.
- The pass reads at most ``max_total_chars`` characters of decoded text
  (:meth:`InputDecoder.admit`): a chunk that crosses the bound is read up to it, so
  what is read does not depend on where the chunks end; crossing the bound is the
  caller's to report.

Offsets (:attr:`InputDecoder.offset`) count characters of the decoded, CRLF-normalised
text the lexer has read, so they do not depend on chunking either.

Complexity: O(len(chunk)) per chunk. Held back between chunks: at most one ``\\r`` and
an unfinished UTF-8 sequence (at most 3 bytes).
"""

from __future__ import annotations

import codecs
import re
from typing import Any, Final

from .diagnostics import DiagnosticLog
from .events import Event

__all__ = ["InputDecoder", "LineBreaks", "replace_surrogates", "replace_surrogates_in"]

#: Lone surrogates: invalid bytes (``surrogateescape``) or unpaired ones in text input.
_SURROGATES = re.compile("[\ud800-\udfff]+")
_BOM: Final = "\ufeff"
_BAD_BYTES: Final = "invalid UTF-8 bytes replaced with U+FFFD"
_BAD_TEXT: Final = "unpaired surrogates replaced with U+FFFD"


def replace_surrogates(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD (one for one)."""
    return _SURROGATES.sub(lambda m: "\ufffd" * len(m.group(0)), text)


def replace_surrogates_in(value: Any) -> Any:
    """A parsed JSON value with every string and key rid of lone surrogates (each one
    U+FFFD, as :func:`replace_surrogates`): an escape such as ``"\\ud800"`` in JSON
    text decodes to one. Lists and objects are changed in place (keys that become equal:
    the later one counts, as for a key written twice). Iterative, O(size)."""
    if isinstance(value, str):
        return replace_surrogates(value)
    stack: list[Any] = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if any(_SURROGATES.search(key) is not None for key in node):
                pairs = list(node.items())
                node.clear()
                for key, item in pairs:
                    node[replace_surrogates(key)] = item
            entries: Any = list(node.items())
        elif isinstance(node, list):
            entries = enumerate(node)
        else:
            continue
        for at, item in entries:
            if isinstance(item, str):
                if _SURROGATES.search(item) is not None:
                    node[at] = replace_surrogates(item)
            elif isinstance(item, dict | list):
                stack.append(item)
    return value


class InputDecoder:
    """Decodes and normalises the input of one pass."""

    __slots__ = (
        "_breaks",
        "_bytes",
        "_bytes_fed",
        "_diagnostics",
        "_max_total",
        "offset",
        "total",
    )

    def __init__(self, diagnostics: DiagnosticLog, max_total_chars: int) -> None:
        self._bytes = codecs.getincrementaldecoder("utf-8")("surrogateescape")
        self._bytes_fed = False
        self._breaks = LineBreaks()
        self._diagnostics = diagnostics
        self._max_total = max_total_chars
        #: Characters of normalised text counted against the total bound.
        self.total = 0
        #: Characters of normalised text the lexer has read (the caller advances it).
        self.offset = 0

    def feed(self, chunk: str | bytes, events: list[Event]) -> str:
        """The normalised text of the next chunk (possibly empty)."""
        if isinstance(chunk, str):
            text = self._flush_bytes(events) + chunk if self._bytes_fed else chunk
            if _SURROGATES.search(text) is not None:
                self._diagnostics.report(events, "invalid_utf8", _BAD_TEXT, self.offset)
                text = replace_surrogates(text)
        else:
            self._bytes_fed = True
            text = self._decode(bytes(chunk), events, final=False)
        return self._normalise(text, final=False)

    def close(self, events: list[Event]) -> str:
        """The stream ended: whatever was held back, normalised."""
        return self._normalise(self._decode(b"", events, final=True), final=True)

    def admit(self, text: str) -> str:
        """Count ``text`` against the total bound: the part of it within the bound (all
        of it, or a shorter prefix once the pass crosses the bound)."""
        room = self._max_total - self.total
        self.total += len(text)
        return text if len(text) <= room else text[: max(room, 0)]

    @property
    def over(self) -> bool:
        """Whether the pass crossed the total bound."""
        return self.total > self._max_total

    def _decode(self, data: bytes, events: list[Event], *, final: bool) -> str:
        text = self._bytes.decode(data, final)
        if _SURROGATES.search(text) is not None:
            self._diagnostics.report(events, "invalid_utf8", _BAD_BYTES, self.offset)
            text = replace_surrogates(text)
        return text

    def _flush_bytes(self, events: list[Event]) -> str:
        """End the byte decoding before a text chunk: an unfinished character is invalid."""
        if self._bytes.getstate()[0]:
            text = self._decode(b"", events, final=True)
            self._bytes.reset()
            return text
        return ""

    def _normalise(self, text: str, *, final: bool) -> str:
        return self._breaks.normalise(text, final=final)


class LineBreaks:
    """A byte order mark at the very start dropped; ``\\r\\n`` as ``\\n`` across pieces
    (a ``\\r`` ending a piece is held back until the next shows what follows)."""

    __slots__ = ("_cr_held", "_started")

    def __init__(self) -> None:
        self._cr_held = False
        self._started = False

    def normalise(self, text: str, *, final: bool = False) -> str:
        if not self._started and text:
            self._started = True
            if text.startswith(_BOM):
                text = text[1:]
        if self._cr_held:
            text = "\r" + text
            self._cr_held = False
        if "\r" in text:
            if text.endswith("\r") and not final:
                text = text[:-1]
                self._cr_held = True
            text = text.replace("\r\n", "\n")
        return text
