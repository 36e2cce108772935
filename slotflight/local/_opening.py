"""The opening of a grammar: the text every answer it admits begins with.

A slot grammar fixes how an answer starts (``summary:`` before the first value), yet a
model sampling under it still spends one decode per token of that text, and often
several tokens for a word it would write as one (``s``, ``um``, ``mar``, ``y``). The
generating process instead reads the opening's tokens with the prompt, in the same
batch, and streams their text before the first sampled token: the grammar had left
no other choice, so the answer is one the model could have sampled.

:func:`grammar_opening` follows ``root`` through what it fixes: literals in sequence,
rules referred to, groups without alternatives; it stops at the first alternative,
repetition, character class, any character (``.``) or token. It reads a grammar that
:func:`~slotflight.local._grammar.precheck_grammar` bounded and llama.cpp accepted, in
one pass over its text, and returns at most :data:`MAX_OPENING_CHARS` characters.

:func:`opening_tokens` tokenizes the opening and drops its last token, which might
join what the model writes next (``:`` then `` refund``, not ``: `` then ``refund``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from ._grammar import _NAME, _REPETITION, _skip_quoted
from ._grammar import _SPACE as _GBNF_SPACE

__all__ = ["MAX_OPENING_CHARS", "grammar_opening", "opening_kept", "opening_tokens"]

MAX_OPENING_CHARS = 256
"""The longest opening read (a longer one is cut there)."""

_MAX_DEPTH = 32
"""Rules and groups followed inside each other before the walk stops."""

_MAX_STEPS = 100_000
"""Items stepped over before the walk stops (a rule referred to again is walked again)."""

_SPACE = re.compile(_GBNF_SPACE)
_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\", '"': '"', "[": "[", "]": "]"}
_HEX_DIGITS = {"x": 2, "u": 4, "U": 8}

# Items of a rule body, as (kind, value): "lit" (decoded text), "ref" (a rule's name),
# "(" and ")", "|", "rep" (``*``, ``+``, ``?``, ``{m,n}``) and "other" (a class, ``.``,
# a token).
_Item = tuple[str, str]


def grammar_opening(text: str) -> str:
    """The text every string ``text`` (GBNF) admits from ``root`` begins with, as far
    as the grammar fixes it ("" when it fixes nothing, or cannot be read)."""
    try:
        rules = _rules(text)
    except ValueError:
        return ""
    body = rules.get("root")
    if body is None or body.has_choice:
        return ""
    walk = _Walk(rules)
    walk.sequence(body, 0, len(body.items), 0)
    opening = "".join(walk.parts)[:MAX_OPENING_CHARS]
    try:
        opening.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate written as an escape
        return ""
    return opening


def opening_tokens(
    opening: str,
    tokenize: Callable[[bytes], Sequence[int]],
    detokenize: Callable[[Sequence[int]], bytes],
) -> list[int]:
    """The tokens of ``opening`` to read with the prompt: all but the last (which the
    text after it may join), and none unless they write a prefix of ``opening``."""
    if not opening:
        return []
    data = opening.encode("utf-8")
    tokens = [int(t) for t in tokenize(data)][:-1]
    if not tokens or not data.startswith(detokenize(tokens)):
        return []
    return tokens


def opening_kept(opening: str, stops: Sequence[str]) -> bool:
    """Whether ``opening`` may be written before sampling: no stop sequence occurs in
    it or begins at its end (the stop would be missed, or found in the wrong place)."""
    for stop in stops:
        if not stop:
            continue
        if stop in opening:
            return False
        if any(opening.endswith(stop[:size]) for size in range(1, len(stop))):
            return False
    return True


class _Body:
    """A rule body's items, each group's closing index, and which groups (and whether
    the body itself) hold an alternative at their own level."""

    def __init__(self, items: list[_Item]) -> None:
        self.items = items
        self.closing: dict[int, int] = {}
        self.choice: set[int] = set()  # "(" indexes of groups with a "|" of their own
        self.has_choice = False
        opened: list[int] = []
        for i, (kind, _) in enumerate(items):
            if kind == "(":
                opened.append(i)
            elif kind == ")":
                if not opened:
                    raise ValueError("unopened group")
                self.closing[opened.pop()] = i
            elif kind == "|":
                if opened:
                    self.choice.add(opened[-1])
                else:
                    self.has_choice = True
        if opened:
            raise ValueError("unclosed group")


class _Walk:
    """Follows fixed text from a rule body; :attr:`open` turns False where it stops."""

    def __init__(self, rules: dict[str, _Body]) -> None:
        self.rules = rules
        self.parts: list[str] = []
        self.size = 0
        self.steps = 0
        self.open = True

    def sequence(self, body: _Body, start: int, stop: int, depth: int) -> None:
        """Walk ``body.items[start:stop]``, a sequence without alternatives, as far as
        it is fixed."""
        items = body.items
        i = start
        while self.open and i < stop:
            self.steps += 1
            kind, value = items[i]
            end = body.closing[i] + 1 if kind == "(" else i + 1
            if self.steps > _MAX_STEPS or (end < stop and items[end][0] == "rep"):
                self.open = False
            elif kind == "lit":
                self.parts.append(value)
                self.size += len(value)
                self.open = self.size < MAX_OPENING_CHARS
            elif kind == "ref" and depth < _MAX_DEPTH and value in self.rules:
                rule = self.rules[value]
                self.open = not rule.has_choice
                if self.open:
                    self.sequence(rule, 0, len(rule.items), depth + 1)
            elif kind == "(" and i not in body.choice and depth < _MAX_DEPTH:
                self.sequence(body, i + 1, end - 1, depth + 1)
            else:
                self.open = False
            i = end


def _rules(text: str) -> dict[str, _Body]:
    """Each rule's body (a name defined twice is left out: the walk stops at it)."""
    rules: dict[str, _Body] = {}
    twice: set[str] = set()
    items: list[_Item] = []
    current: str | None = None
    i, end = 0, len(text)
    while True:
        i = _SPACE.match(text, i).end()  # type: ignore[union-attr]
        if i >= end:
            break
        char = text[i]
        name = _NAME.match(text, i)
        if name is not None:
            after = _SPACE.match(text, name.end()).end()  # type: ignore[union-attr]
            if text.startswith("::=", after):
                _define(rules, twice, current, items)
                current, items = name.group(), []
                i = after + 3
                continue
            items.append(("ref", name.group()))
            i = name.end()
        elif char == '"':
            literal, i = _literal(text, i + 1)
            items.append(("lit", literal))
        elif char in "()|":
            items.append((char, char))
            i += 1
        elif char in "*+?":
            items.append(("rep", char))
            i += 1
        elif char == "{":
            match = _REPETITION.match(text, i)
            if match is None:
                raise ValueError("unreadable repetition")
            items.append(("rep", match.group()))
            i = match.end()
        elif char == "[":
            i = _skip_quoted(text, i + 1, "]")
            if text[i - 1] != "]":
                raise ValueError("unclosed class")
            items.append(("other", "["))
        elif char == "<":
            close = text.find(">", i)
            if close < 0:
                raise ValueError("unclosed token")
            items.append(("other", "<"))
            i = close + 1
        else:  # "." or anything else: not fixed text
            items.append(("other", char))
            i += 1
    _define(rules, twice, current, items)
    for defined_twice in twice:
        del rules[defined_twice]
    return rules


def _define(rules: dict[str, _Body], twice: set[str], name: str | None, items: list[_Item]) -> None:
    if name is None:
        return
    if name in rules:
        twice.add(name)
    else:
        rules[name] = _Body(items)


def _literal(text: str, i: int) -> tuple[str, int]:
    """The decoded literal starting at ``i`` (after its quote) and the index past it."""
    out: list[str] = []
    end = len(text)
    while i < end:
        char = text[i]
        if char == '"':
            return "".join(out), i + 1
        if char == "\n":
            break
        if char != "\\":
            out.append(char)
            i += 1
            continue
        escape = text[i + 1 : i + 2]
        if escape in _ESCAPES:
            out.append(_ESCAPES[escape])
            i += 2
        elif escape in _HEX_DIGITS:
            digits = text[i + 2 : i + 2 + _HEX_DIGITS[escape]]
            if len(digits) != _HEX_DIGITS[escape] or not all(
                d in "0123456789abcdefABCDEF" for d in digits
            ):
                raise ValueError("bad escape")
            out.append(chr(int(digits, 16)))
            i += 2 + len(digits)
        else:
            raise ValueError("unknown escape")
    raise ValueError("unterminated literal")
