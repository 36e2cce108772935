"""The value rules of the slot checks, judged on a text, the input and the schema alone:
shared by the slot checks (:mod:`.checks`) and the benchmark's degenerate-value
detectors (:mod:`slotflight.bench.accuracy`), one implementation for both.

- :class:`InputText`: the input messages' text; whether a text is in it
  (:meth:`~InputText.contains`) or shares a word stem with it
  (:meth:`~InputText.shares_words`).
- :class:`SchemaWords`: the schema's own words (titles, the model's class name,
  descriptions, ``examples`` values, names a description gives as examples) and which
  of them a text copies (:meth:`~SchemaWords.copied_by`).
- :func:`is_unstated_placeholder`: a bare small number or a bracketed placeholder that
  is not a number the input states.
- :class:`TextIndex`: texts by their normalized form and by word, for equality and
  near-copy look-ups in O(text).
- :func:`schema_nodes`: every object of a schema, bounded.

The shape rules (:func:`~.text_rules.is_placeholder`, :func:`~.text_rules.is_digit_run`,
:func:`~.text_rules.needless_quotes`) and the near-copy rule are in :mod:`.text_rules`.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from collections.abc import Iterator, Mapping
from typing import Any, Final

from .text_rules import (
    NEAR_COPY_F1,
    NEAR_COPY_MIN_WORDS,
    description_examples,
    f1,
    is_placeholder,
    normalize_text,
    word_tokens,
)

__all__ = [
    "CROSS_FIELD_NEAR_COPY_F1",
    "FORM_NOTE",
    "MAX_DEPTH",
    "MAX_INPUT_NEEDLE",
    "MAX_ITEMS",
    "MAX_NEAR_COPY_TEXTS",
    "InputText",
    "SchemaWords",
    "TextIndex",
    "is_unstated_placeholder",
    "schema_nodes",
]

#: Near copies across fields (or of the schema's words) need this token-F1: a decision
#: and the task that carries it out rightly share most words ("Use air freight for the
#: June lot", "Book air freight for the June lot": 0.83).
CROSS_FIELD_NEAR_COPY_F1: Final = 0.9
#: Distinct texts kept for the near-copy search, per index (bounds its work).
MAX_NEAR_COPY_TEXTS: Final = 256
#: The longest text looked for in the input (:meth:`InputText.contains`).
MAX_INPUT_NEEDLE: Final = 256
#: Nesting levels and list items read when walking a schema.
MAX_DEPTH: Final = 16
MAX_ITEMS: Final = 256
#: Keywords whose values are instance data, not schemas.
_VALUE_KEYWORDS: Final = frozenset({"examples", "default", "enum", "const"})
#: Word stems of the input compared: from three letters, at most twelve.
_MIN_STEM: Final = 3
_MAX_STEM: Final = 12
_NOT_ALNUM: Final = re.compile(r"[\W_]+")
#: A name with an index, as the follow-up names the fields it asks for (``owner[1]``).
#: Anchored at a word start: unanchored, every position of a long run of word characters
#: without ``[`` would scan to the run's end again (quadratic, seconds for a long value).
_INDEXED_NAME: Final = re.compile(r"(?<!\w)(\w+)\[\d+\]")
#: The notes a form writes after a placeholder's meaning (``<Deadline; optional; may be
#: null>``, ``prompts/*/prompt.j2``) and a follow-up after a field's name (``only if it
#: has a value``): ``optional`` as the forms write it, in brackets or after a semicolon
#: (a value may rightly say "optional"), the other two anywhere.
FORM_NOTE: Final = re.compile(
    r"[(;]\s*(?P<note>optional)\b|\b(?P<phrase>may be null|only if it has a value)\b",
    re.IGNORECASE,
)


class InputText:
    """The text of the input messages, normalized once; each look-up is O(input · text)
    at most (:meth:`contains`) or O(text) (:meth:`shares_words`, after its stems are
    gathered on first use)."""

    __slots__ = ("_stems", "_text")

    def __init__(self, text: str) -> None:
        self._text = normalize_text(text)
        self._stems: set[str] | None = None

    def contains(self, text: str) -> bool:
        """Whether ``text`` (normalized) is in the input, at word bounds. Texts longer
        than :data:`MAX_INPUT_NEEDLE` characters are not looked for."""
        needle = normalize_text(text)
        if not needle or len(needle) > MAX_INPUT_NEEDLE:
            return False
        haystack = self._text
        start = 0
        while (at := haystack.find(needle, start)) != -1:
            end = at + len(needle)
            before = haystack[at - 1] if at else " "
            after = haystack[end] if end < len(haystack) else " "
            if not (before.isalnum() and needle[0].isalnum()) and not (
                after.isalnum() and needle[-1].isalnum()
            ):
                return True
            start = at + 1
        return False

    def states_number(self, digits: str) -> bool:
        """Whether the input holds the number ``digits`` as a whole: not inside a word
        (``1tb``) and not a part of a longer number, a range or a date joined by ``.``,
        ``,``, ``/``, ``:`` or a dash (the ``1`` of ``1.5 kg``, ``€1,188.00``, ``4.9/5``,
        ``14:10``, ``1-2 days``). O(input)."""
        if not digits.isascii() or not digits.isdigit():
            return False
        pattern = rf"(?<!\w)(?<!\d[.,/:\-–]){digits}(?!\w)(?![.,/:\-–]\d)"
        return re.search(pattern, self._text) is not None

    def shares_words(self, text: str) -> bool:
        """Whether a word of ``text`` (of three letters or more) begins a word of the
        input (``refund`` in "refunded")."""
        stems = self._stems
        if stems is None:
            stems = self._stems = {
                word[:end]
                for word in set(word_tokens(self._text))
                for end in range(_MIN_STEM, min(len(word), _MAX_STEM) + 1)
            }
        return any(w[:_MAX_STEM] in stems for w in word_tokens(text) if len(w) >= _MIN_STEM)


def is_unstated_placeholder(text: str, source: InputText, *, item: bool = False) -> bool:
    """A bare small number or a bracketed placeholder (``1``, ``[5]``, ``[Triage]``;
    :func:`~.text_rules.is_placeholder`), unless it is a number the input states as a
    whole (:meth:`InputText.states_number`): then a text field holds an answer.

    ``item``: ``text`` is an item of a list of texts (tags, names, steps). A bare number
    is a placeholder there even when the input holds it: a list of labels that reads
    ``3`` copies a quantity of the input (``3 March``, ``4 years``) or counts its own
    items (``1``, ``2``, ``3`` …)."""
    if not is_placeholder(text):
        return False
    number = text.strip()
    return item or not (number.isdigit() and source.states_number(number))


class SchemaWords:
    """The words a schema shows as its own (see :meth:`copied_by`), indexed once in
    O(schema), bounded by :data:`MAX_DEPTH` levels and :data:`MAX_ITEMS` per list.

    ``model_name``: the Pydantic model's class name, when the schema came from one.
    """

    __slots__ = ("_index", "_names")

    def __init__(self, schema: Any, model_name: str | None = None) -> None:
        self._index = TextIndex()
        names: set[str] = set()
        for text, what, example in _schema_words(schema, model_name, names):
            self._index.add(text, (what, example))
        self._names = frozenset(names)

    def copied_by(self, text: str, source: InputText) -> str | None:
        """What part of the schema ``text`` copies (``the model's class name`` …), or
        ``None``: equal to one of its words (also once spaces and punctuation are taken
        out: ``Support Triage``) or a near copy with a token-F1 of at least
        :data:`CROSS_FIELD_NEAR_COPY_F1`; never when the input holds ``text``. An
        example a description gives counts only when no word of it is in the input
        (``billing team`` for a ticket about billing is an answer, ``Léa Martin`` for a
        ticket she is not in is a copy).

        A text holding a field's name with an index (``description[0] was not
        taken``, ``owner[1]``), the way the follow-up names the fields it asks for,
        copies the form too, and so does one holding a note the form writes after a
        placeholder (:data:`FORM_NOTE`: ``Friday (optional) (may be``)."""
        for match in FORM_NOTE.finditer(text):
            if not source.contains(match.group("note") or match.group("phrase")):
                return "a note from the form"
        for match in _INDEXED_NAME.finditer(text):
            if match.group(1).casefold() in self._names and not source.contains(match.group(0)):
                return "a field's name from the form"
        for (what, example), score in self._index.matches(text, compact=True):
            if score < CROSS_FIELD_NEAR_COPY_F1:
                continue
            if example and source.shares_words(text):
                continue
            if source.contains(text):
                return None
            return str(what)
        return None


def _schema_words(
    schema: Any, model_name: str | None, names: set[str]
) -> Iterator[tuple[str, str, bool]]:
    """The schema's own words, what each is, and whether it is an example: titles, the
    class name, descriptions, ``examples`` values and the examples descriptions give
    (a lowercase one such as ``'billing team'`` is vocabulary the answer may use).
    Adds the properties' names, case folded, to ``names``."""
    if model_name:
        yield model_name, "the model's class name", False
    for node in schema_nodes(schema):
        properties = node.get("properties")
        if isinstance(properties, Mapping):
            names.update(str(name).casefold() for name in itertools.islice(properties, MAX_ITEMS))
        for key, what in (("title", "a title in the form"), ("description", "a description")):
            text = node.get(key)
            if isinstance(text, str) and text.strip():
                yield text, what, False
                if key == "description":
                    for example in description_examples(text):
                        if example != example.lower():  # a name; not a word of the trade
                            yield example, "an example from the form", True
        examples = node.get("examples")
        if isinstance(examples, list):
            for example in examples[:MAX_ITEMS]:
                if isinstance(example, str) and example.strip():
                    yield example, "an example from the form", True


class TextIndex:
    """Texts by their normalized form, and by word for the near-copy search.

    ``add`` is O(text); ``matches`` is O(text) plus at most
    :data:`MAX_NEAR_COPY_TEXTS` candidates per word of the text.
    """

    __slots__ = ("_compact", "_equal", "_near", "_postings")

    def __init__(self) -> None:
        self._equal: dict[str, list[Any]] = {}
        self._compact: dict[str, list[Any]] = {}
        self._near: list[tuple[Counter[str], Any]] = []
        self._postings: dict[str, list[int]] = {}

    def add(self, text: str, payload: Any) -> None:
        """Index ``text`` with ``payload``, what :meth:`matches` gives back for it."""
        normal = normalize_text(text)
        self._equal.setdefault(normal, []).append(payload)
        compact = _NOT_ALNUM.sub("", normal)
        if compact:
            self._compact.setdefault(compact, []).append(payload)
        words = Counter(word_tokens(normal))
        if words.total() >= NEAR_COPY_MIN_WORDS and len(self._near) < MAX_NEAR_COPY_TEXTS:
            index = len(self._near)
            self._near.append((words, payload))
            for word in words:
                self._postings.setdefault(word, []).append(index)

    def matches(self, text: str, *, compact: bool = False) -> Iterator[tuple[Any, float]]:
        """Payloads of the texts ``text`` repeats, with their token-F1: equal first
        (score 1; ``compact``: also equal once spaces and punctuation are taken out),
        then near copies."""
        normal = normalize_text(text)
        for payload in self._equal.get(normal, ()):
            yield payload, 1.0
        if compact:
            for payload in self._compact.get(_NOT_ALNUM.sub("", normal), ()):
                yield payload, 1.0
        words = Counter(word_tokens(normal))
        total = words.total()
        if total < NEAR_COPY_MIN_WORDS:
            return
        shared: dict[int, int] = {}
        for word, count in words.items():
            for index in self._postings.get(word, ()):
                shared[index] = shared.get(index, 0) + min(count, self._near[index][0][word])
        for index in sorted(shared):
            other, payload = self._near[index]
            score = f1(shared[index], total, other.total())
            if score >= NEAR_COPY_F1:
                yield payload, score


def schema_nodes(schema: Any) -> Iterator[Mapping[str, Any]]:
    """Every object in a schema, depth first (``$defs`` included; not the values of
    ``examples``, ``default``, ``enum`` and ``const``). Bounded by :data:`MAX_DEPTH`
    levels and :data:`MAX_ITEMS` per list."""
    stack: list[tuple[Any, int]] = [(schema, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            continue
        if isinstance(node, Mapping):
            yield node
            children = [v for k, v in node.items() if k not in _VALUE_KEYWORDS]
        elif isinstance(node, list):
            children = node[:MAX_ITEMS]
        else:
            continue
        stack.extend((child, depth + 1) for child in reversed(children))
