"""A reasoning block that opens a pass: what a reasoning model thinks before it answers.

Reasoning models (DeepSeek-R1 and its distillations, Qwen3, QwQ) write their thinking
before the answer, and a server that does not move it to a field of its own
(``reasoning_content``) streams it as content: ``<think>…</think>`` and then the frames.
Read as frames, a line of that thinking such as ``summary: maybe the export…`` would
be taken for the value, and the answer's own lines after it dropped as duplicates.

Rules, each independent of how the stream was chunked:

- Only at the start of a pass: after at most :data:`MAX_LEADING_BLANKS` characters of
  white space, the exact tag ``<think>``, ``<thinking>`` or ``<reasoning>`` opens a
  block that the closing tag of the same name ends. No frame of any syntax starts so.
- The block (with the white space before it) is not read as frames; the text after its
  closing tag is, from a fresh line (``</think>summary: x`` reads ``summary: x``).
- Anything else at the start, or more white space than the bound, is read as it is:
  the text held back while it could still open a block is given back whole.
- A block that the pass never closes leaves the pass without frames.

Complexity: O(len(text)) per piece. Held back: the white space and tag prefix before
the decision (bounded), then at most the closing tag's length minus one.
"""

from __future__ import annotations

from typing import Final

__all__ = ["MAX_LEADING_BLANKS", "OPENING_TAGS", "ReasoningBlock"]

#: The tags that open a reasoning block, and so the names its closing tag may have.
OPENING_TAGS: Final = ("<think>", "<thinking>", "<reasoning>")

#: White space before the opening tag that still lets it open a block.
MAX_LEADING_BLANKS: Final = 256

_BLANKS: Final = frozenset(" \t\n")

_START, _INSIDE, _AFTER = 0, 1, 2


class ReasoningBlock:
    """Skips a reasoning block at the start of one pass (see the module docs)."""

    __slots__ = ("_closing", "_held", "_state", "skipped")

    def __init__(self) -> None:
        self._state = _START
        self._held = ""  # white space and a tag prefix (start), or a closing tag prefix
        self._closing = ""
        #: Characters not read as frames: the block and the white space before it.
        self.skipped = 0

    @property
    def inside(self) -> bool:
        """Whether the text so far opened a block that has not closed."""
        return self._state == _INSIDE

    @property
    def settled(self) -> bool:
        """Whether the rest of the pass is read as it is: no block opened it, or its
        block closed."""
        return self._state == _AFTER

    @property
    def closed(self) -> bool:
        """Whether a block opened and closed (the text after it is read as frames)."""
        return self._state == _AFTER and bool(self._closing)

    def feed(self, text: str) -> str:
        """The part of ``text`` to read as frames (possibly empty)."""
        if self._state == _AFTER:
            return text
        if self._state == _START:
            return self._start(text)
        return self._inside(text)

    def close(self) -> str:
        """The pass ended: what was held back and is to be read as frames."""
        if self._state == _START:
            self._state = _AFTER
            held, self._held = self._held, ""
            return held
        return ""

    def _start(self, text: str) -> str:
        held = self._held + text
        blanks = len(held) - len(held.lstrip(" \t\n"))
        if blanks > MAX_LEADING_BLANKS:
            return self._give_back(held)
        rest = held[blanks:]
        if not rest:
            self._held = held
            return ""
        for tag in OPENING_TAGS:
            if rest.startswith(tag):
                self._state = _INSIDE
                self._closing = "</" + tag[1:]
                self._held = ""
                self.skipped += blanks + len(tag)
                return self._inside(rest[len(tag) :])
        if any(tag.startswith(rest) for tag in OPENING_TAGS):
            self._held = held  # still a prefix of a tag: wait for the next piece
            return ""
        return self._give_back(held)

    def _give_back(self, held: str) -> str:
        self._state = _AFTER
        self._held = ""
        return held

    def _inside(self, text: str) -> str:
        closing = self._closing
        window = self._held + text
        at = window.find(closing)
        if at < 0:
            keep = min(len(window), len(closing) - 1)
            self.skipped += len(window) - keep
            self._held = window[len(window) - keep :] if keep else ""
            return ""
        end = at + len(closing)
        self.skipped += end
        self._held = ""
        self._state = _AFTER
        return window[end:]
