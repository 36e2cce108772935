"""Text rules shared by the slot checks (:mod:`.checks`) and the benchmark's
degenerate-value detectors (:mod:`slotflight.bench.accuracy`): one implementation.

- :func:`normalize_text`: NFKC, case folded, runs of white space as one space.
- :func:`word_tokens`, :func:`token_f1`, :func:`bag_f1`: word-token F1 of two texts.
- :func:`name_words`: the word tokens of a text outside its bracketed notes
  (``Aiko Tanaka (design)``: two words).
- Near copy: two texts of at least :data:`NEAR_COPY_MIN_WORDS` words whose token-F1 is
  at least :data:`NEAR_COPY_F1` (:func:`is_near_copy`).
- :func:`at_boundary`: a text begins with another and a word ends there.
- Junk shapes of a text value: :func:`is_placeholder` (a bare small number or a
  bracketed placeholder: ``1``, ``[5]``, ``[Triage]``, ``<name>``),
  :func:`is_digit_run` (``1,3,2,1,1,2,…``), :func:`needless_quotes` (``"Ada"``).
- :func:`description_examples`: the quoted examples a description gives
  (``e.g. 'billing team' or 'Léa Martin'``).

Every function is O(length of its texts).
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from typing import Final

__all__ = [
    "NEAR_COPY_F1",
    "NEAR_COPY_MIN_WORDS",
    "at_boundary",
    "bag_f1",
    "description_examples",
    "f1",
    "is_digit_run",
    "is_near_copy",
    "is_placeholder",
    "name_words",
    "needless_quotes",
    "normalize_text",
    "token_f1",
    "word_tokens",
]

#: Two texts of at least :data:`NEAR_COPY_MIN_WORDS` words with at least this token-F1
#: are near copies.
NEAR_COPY_F1: Final = 0.8
#: Texts shorter than this many words are compared for equality only.
NEAR_COPY_MIN_WORDS: Final = 3

_TOKEN: Final = re.compile(r"\w+")
#: A note in brackets: ``(design)``, ``[PM]``.
_NOTE: Final = re.compile(r"\([^()]*\)|\[[^\[\]]*\]")
#: A bare number of at most three digits, bracketed or not: ``1``, ``[5]``, ``(12)``.
_SMALL_NUMBER: Final = re.compile(r"[\[(<{]?\s*[+-]?\d{1,3}\s*[\])>}]?")
#: A short bracketed text with nothing around it: ``[Triage]``, ``<name>``, ``{owner}``.
_BRACKETED: Final = re.compile(r"\[[^\[\]]{0,40}\]|<[^<>]{0,40}>|\{[^{}]{0,40}\}")
#: Three or more numbers separated by commas or semicolons (a trailing separator or
#: ellipsis allowed), or four or more separated by spaces.
_DIGIT_RUN: Final = re.compile(
    r"\d+(?:\s*[,;]\s*\d+){2,}[\s,;.…]*|\d+(?:\s+\d+){3,}[\s.…]*", re.ASCII
)
#: A number written with thousands groups (``1,000,000``): a number, not a run.
_THOUSANDS: Final = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?", re.ASCII)
_QUOTES: Final = {'"': '"', "'": "'", "“": "”", "‘": "’", "«": "»", "„": "“"}
#: Where a description starts giving examples.
_EXAMPLE_MARK: Final = re.compile(r"\b(?:e\.g\.|eg\.|for example|for instance|such as)", re.I)
#: A quoted example: '…', "…", “…”, ‘…’.
_QUOTED: Final = re.compile(
    r"'([^'\n]{1,80})'|\"([^\"\n]{1,80})\"|“([^”\n]{1,80})”|‘([^’\n]{1,80})’"
)


def normalize_text(text: str) -> str:
    """NFKC, case folded, surrounding whitespace removed, inner runs as one space."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def word_tokens(text: str) -> list[str]:
    """The word tokens of ``text`` after NFKC and case folding."""
    return _TOKEN.findall(unicodedata.normalize("NFKC", text).casefold())


def name_words(text: str) -> list[str]:
    """The word tokens of ``text`` outside its bracketed notes: a name with its role
    (``Aiko Tanaka (design)``, ``Hiroshi Yamamoto (山本博)``) counts as the name."""
    return word_tokens(_NOTE.sub(" ", text))


def f1(matched: float, predicted: int, gold: int) -> float:
    """F1 of ``matched`` out of ``predicted`` and ``gold`` counts; two empty sides 1."""
    if predicted == 0 or gold == 0:
        return float(predicted == gold)
    if matched <= 0:
        return 0.0
    precision, recall = matched / predicted, matched / gold
    return 2 * precision * recall / (precision + recall)


def bag_f1(pred: Counter[str], ref: Counter[str]) -> float:
    """Token-F1 of two word multisets (:func:`token_f1`)."""
    return f1(sum((pred & ref).values()), pred.total(), ref.total())


def token_f1(predicted: str, gold: str) -> float:
    """Token-F1 of two texts (word tokens after NFKC and case folding, as multisets).

    Both without tokens: 1.0; one without: 0.0. O(len(predicted) + len(gold)).
    """
    return bag_f1(Counter(word_tokens(predicted)), Counter(word_tokens(gold)))


def is_near_copy(first: Counter[str], second: Counter[str]) -> bool:
    """Whether two texts' word multisets are near copies (see the module docs)."""
    return (
        first.total() >= NEAR_COPY_MIN_WORDS
        and second.total() >= NEAR_COPY_MIN_WORDS
        and bag_f1(first, second) >= NEAR_COPY_F1
    )


def at_boundary(text: str, start: str) -> bool:
    """Whether ``text`` begins with ``start`` and a word ends there."""
    return text.startswith(start) and (len(text) == len(start) or not text[len(start)].isalnum())


def is_placeholder(text: str) -> bool:
    """A bare small number or a bracketed placeholder (``1``, ``[5]``, ``[Triage]``)."""
    stripped = text.strip()
    return bool(_SMALL_NUMBER.fullmatch(stripped) or _BRACKETED.fullmatch(stripped))


def is_digit_run(text: str) -> bool:
    """A run of numbers and separators (``1,3,2,1,1,2,…``), not a grouped number."""
    stripped = text.strip()
    return bool(_DIGIT_RUN.fullmatch(stripped)) and not _THOUSANDS.fullmatch(stripped)


def needless_quotes(text: str) -> bool:
    """Whether the whole value is wrapped in a pair of quotes it did not need: the
    quoted text holds no other quote of that kind (``"Ada"``, not ``"a" and "b"``)."""
    stripped = text.strip()
    if len(stripped) < 3:
        return False
    close = _QUOTES.get(stripped[0])
    if close is None or stripped[-1] != close:
        return False
    inner = stripped[1:-1]
    return stripped[0] not in inner and close not in inner and bool(inner.strip())


def description_examples(description: str) -> list[str]:
    """The quoted examples a description gives after ``e.g.``, ``for example`` or
    ``such as`` (up to the end of its sentence or parenthesis)."""
    found: list[str] = []
    for mark in _EXAMPLE_MARK.finditer(description):
        rest = description[mark.end() :]
        end = len(rest)
        for stop in (")", ". ", ".\n", ";"):
            at = rest.find(stop)
            if at != -1:
                end = min(end, at)
        for quoted in _QUOTED.finditer(rest[:end] if end < len(rest) else rest):
            text = next(g for g in quoted.groups() if g is not None)
            if text.strip():
                found.append(text.strip())
    return found
