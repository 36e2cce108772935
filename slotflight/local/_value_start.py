"""The first token of a value after a colon: a lone space or an opening bracket made
unlikely where a grammar lets the value start with a word.

Tokenizers of the GPT-2 family write a word together with the space before it
(`` refund``, `` March``, `` true``) but put a lone space token before a digit (`` ``,
``1``). Under a grammar that writes ``name: value`` (the line syntaxes, or JSON's
``"name": value``), a small model right after the colon spreads its probability over
many word tokens while the lone space is the one token every digit shares; at a low
temperature that one token wins, and having written it the model goes on with a digit:
``tags: 1``, ``description: 2``, ``summary: 1. The customer…``. On SmolLM2-135M the lone space held 6 % after ``tags:`` against at most
2 % for any one word, though the words held 68 % together.

An opening bracket is the other way a small model starts nonsense there: it writes a
text value as a JSON array or a placeholder (``summary: [1]``, ``owner: [Triage]``,
``heading: [Company name] - [Company name]``), though the line syntaxes write a list as
one line per item and show no brackets.

:class:`ValueStartPenalty` lowers the logits of the lone space and of the tokens that
begin with an opening bracket (after any spaces: ``[``, `` [``, ``["``) by fixed amounts
right after a token that ends with a colon. Where the model was undecided, a word
starts the value; where it is sure of a digit or a bracket, it still comes; where the
grammar allows nothing else (a JSON array), the grammar's mask leaves those tokens the
only choice. Only generations under a grammar use it
(:class:`~slotflight.local.LocalEngine`'s ``lone_space_penalty`` and
``bracket_penalty``): free text after a colon is left alone. Under a grammar a colon
inside a value counts too (``Note: 3`` then needs a model sure of its digit); a time
such as ``10:30`` is not touched, its digit follows the colon directly.

Its work per sampled token is O(1) plus the vocabulary's lone-space and bracket tokens
(a few dozen).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from .._errors import SlotflightError

__all__ = [
    "DEFAULT_BRACKET_PENALTY",
    "DEFAULT_LONE_SPACE_PENALTY",
    "ValueStartPenalty",
    "check_penalty",
]

DEFAULT_LONE_SPACE_PENALTY = 2.0
"""Logits taken from a lone space after a colon: a factor of e² (about 7.4) in
probability before the temperature divides the logits (about 800 at temperature 0.3).
A word the model rates about as likely as the lone space then wins; a digit it is sure
of (a price, an integer) still comes after the lone space."""

DEFAULT_BRACKET_PENALTY = 2.0
"""Logits taken from a token beginning with ``[`` after a colon, as for the lone space."""


def check_penalty(penalty: float, name: str) -> float:
    """``penalty`` as a float, or ``invalid_option`` (naming the option ``name``) when it
    is negative or not finite."""
    value = float(penalty)
    if not math.isfinite(value) or value < 0:
        raise SlotflightError(
            f"{name} must be a finite number >= 0, got {penalty!r}",
            code="invalid_option",
        )
    return value


class ValueStartPenalty:
    """Lowers lone-space and opening-bracket logits right after a token ending with a
    colon.

    ``pieces`` are the vocabulary's token texts, by id. A llama-cpp-python logits
    processor: called with the tokens so far and the next token's logits (changed in
    place and returned).
    """

    def __init__(self, pieces: Sequence[bytes], lone_space: float, bracket: float = 0.0) -> None:
        self.lone_space = check_penalty(lone_space, "lone_space_penalty")
        self.bracket = check_penalty(bracket, "bracket_penalty")
        self.spaces: npt.NDArray[np.intp] = np.array(
            [i for i, piece in enumerate(pieces) if piece == b" "], dtype=np.intp
        )
        self.brackets: npt.NDArray[np.intp] = np.array(
            [i for i, piece in enumerate(pieces) if piece.lstrip(b" ").startswith(b"[")],
            dtype=np.intp,
        )
        self._after = np.array([piece.endswith(b":") for piece in pieces], dtype=bool)

    @property
    def lone_space_in_effect(self) -> float:
        """The lone-space penalty applied: 0 without a lone-space token."""
        return self.lone_space if self.spaces.size else 0.0

    @property
    def bracket_in_effect(self) -> float:
        """The bracket penalty applied: 0 without a token beginning with a bracket."""
        return self.bracket if self.brackets.size else 0.0

    @property
    def active(self) -> bool:
        """Whether it changes anything: a penalty above 0 with tokens to lower."""
        return self.lone_space_in_effect > 0 or self.bracket_in_effect > 0

    def applies(self, tokens: npt.NDArray[np.intc]) -> bool:
        """Whether the next token's logits are changed after ``tokens``."""
        if not self.active or len(tokens) == 0:
            return False
        last = int(tokens[-1])
        return 0 <= last < self._after.size and bool(self._after[last])

    def __call__(
        self, input_ids: npt.NDArray[np.intc], scores: npt.NDArray[np.single]
    ) -> npt.NDArray[np.single]:
        if self.applies(input_ids):
            scores[self.spaces] -= self.lone_space
            scores[self.brackets] -= self.bracket
        return scores
