"""Reading a prompted JSON answer (``json_prompt`` mode) as an application does.

Asked for "one JSON object and nothing else: no prose, no code fence", a model may still
wrap its object in a Markdown code fence (Qwen2.5-Coder writes ```` ```json ```` on its
first line in some answers). An application that prompts for JSON strips such a fence
before parsing, so the benchmark does too: the object is the text between the fence's
first line and the next line that starts with three backticks (or the end). Any other
start (prose, a quoted string, a list) is no object, and the benchmark stops reading
there (:func:`not_json_object`).
"""

from __future__ import annotations

import re
from typing import Final

from .metrics import Chunk

__all__ = ["MAX_START", "not_json_object", "unfenced"]

FENCE: Final = "```"
#: A start this long (blanks and a fence line included) with no ``{`` in it is no
#: object: the reading decides within this many characters, whatever arrives.
MAX_START: Final = 1024
#: What a fence's first line may carry after its backticks: a language tag, no prose.
_INFO: Final = re.compile(r"[ \t]*[A-Za-z0-9_+.-]{0,20}[ \t]*")


def not_json_object(text: str) -> bool:
    """Whether ``text`` (the start of an answer) already shows it holds no JSON object:
    its first non-blank character is something other than ``{``, or it opens a code
    fence whose first line is more than a language tag or whose content starts with
    something other than ``{``, or :data:`MAX_START` characters hold no ``{``."""
    if len(text) > MAX_START and "{" not in text:
        return True
    start = text.lstrip()
    if not start or start.startswith("{"):
        return False
    if not start.startswith(FENCE):
        return not FENCE.startswith(start)  # "`" or "``" may still become a fence
    info, newline, rest = start[len(FENCE) :].partition("\n")
    if _INFO.fullmatch(info) is None:
        return True
    body = rest.lstrip()
    return bool(newline and body) and not body.startswith("{")


def _body(text: str) -> tuple[int, int, bool]:
    """The span of ``text`` that holds the answer, and whether it was fenced."""
    start = len(text) - len(text.lstrip())
    if not text.startswith(FENCE, start):
        return 0, len(text), False
    newline = text.find("\n", start)
    if newline < 0:
        return len(text), len(text), True
    begin = newline + 1
    close = text.find("\n" + FENCE, newline)
    return begin, (len(text) if close < 0 else close + 1), True


def unfenced(chunks: tuple[Chunk, ...]) -> tuple[tuple[Chunk, ...], bool]:
    """The chunks of the answer inside a code fence, each with its arrival time, and
    whether there was a fence; an answer without one comes back as it is. O(text)."""
    text = "".join(piece for _, piece in chunks)
    begin, end, fenced = _body(text)
    if not fenced:
        return chunks, False
    out: list[Chunk] = []
    offset = 0
    for t, piece in chunks:
        low, high = max(begin, offset), min(end, offset + len(piece))
        if low < high:
            out.append((t, piece[low - offset : high - offset]))
        offset += len(piece)
    return tuple(out), True
