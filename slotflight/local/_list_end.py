"""A list that repeats an item is over: the next line does not start another item.

Under a grammar that writes a list as a block (syntax ``v4``: the list's name alone on
its line, then one ``- item`` line per item), a small model does not leave a list of
its own accord: having written the items the input holds, it writes the last one
again and again until the grammar's item count (``maxItems``, else 8) is spent. On
SmolLM2-135M a meeting's four attendees came back as twelve lines, the last nine the
same name, and its two decisions as eight; every one of those lines costs tokens, and
the slot checks drop them anyway (``list_repeat``).

:class:`RepeatedItemPenalty` reads the generated text as it comes. A line that starts
with a dash and a blank and repeats an earlier such line of the same list (after case
folding and with runs of blanks as one; the list starts at a line that is a name and
a colon alone, ``attendees:``) ends the list: at the start of each later line, until
the next such opening line, the tokens that begin with a dash lose ``penalty``
logits (and at any point, the tokens that end a line and begin the next with a dash). The model then writes the next field; where the grammar allows nothing but
another item (``minItems`` not reached), the grammar's mask leaves the dash the only
choice. Lines of other syntaxes (v3's ``name: value``, JSON) never start with a dash
and a blank and are left alone.

Its work is O(1) per generated token plus O(line) per line ended (one set lookup), and
its memory the generated item lines.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from ._value_start import check_penalty

__all__ = ["DEFAULT_REPEATED_ITEM_PENALTY", "RepeatedItemPenalty", "RepeatedItemTokens"]

DEFAULT_REPEATED_ITEM_PENALTY = 20.0
"""Logits taken from a dash starting a line after a repeated item: e^-20 before the
temperature divides the logits (e^-67 at temperature 0.3), so where the grammar
allows another line the dash does not come."""

#: A line that opens a list: a name and a colon, nothing after but blanks.
_OPENER = re.compile(rb"[ \t]*[^\s:\-][^\s:]*:[ \t]*")
#: A list item's line: a dash, then a blank.
_ITEM = re.compile(rb"[ \t]*-[ \t]")


class RepeatedItemTokens:
    """What :class:`RepeatedItemPenalty` needs of the vocabulary, read once per engine:
    each token's text (``pieces``, by id) and the tokens that begin a line with a dash."""

    def __init__(self, pieces: Sequence[bytes], penalty: float) -> None:
        self.penalty = check_penalty(penalty, "repeated_item_penalty")
        self.pieces = list(pieces)
        self.dashes: npt.NDArray[np.intp] = np.array(
            [i for i, piece in enumerate(self.pieces) if piece.startswith(b"-")],
            dtype=np.intp,
        )
        #: Tokens that end a line and start the next one with a dash (``"\n-"``).
        self.inner_dashes: npt.NDArray[np.intp] = np.array(
            [i for i, piece in enumerate(self.pieces) if b"\n-" in piece], dtype=np.intp
        )

    @property
    def penalty_in_effect(self) -> float:
        """The penalty applied: 0 without a token beginning with a dash."""
        return self.penalty if self.dashes.size else 0.0

    def for_generation(self, prompt_tokens: int) -> RepeatedItemPenalty:
        """A processor for one generation whose prompt has ``prompt_tokens`` tokens."""
        return RepeatedItemPenalty(self, prompt_tokens)


class RepeatedItemPenalty:
    """Lowers the dash tokens at a line's start once a list repeated an item (see the
    module docs). One per generation: a llama-cpp-python logits processor, called with
    the tokens so far (the prompt's first) and the next token's logits."""

    def __init__(self, tokens: RepeatedItemTokens, prompt_tokens: int) -> None:
        self._tokens = tokens
        self._read = prompt_tokens  # tokens read so far
        self._line = bytearray()
        self._items: set[bytes] = set()
        self._over = False  # the open list repeated an item
        self._line_start = False

    @property
    def over(self) -> bool:
        """Whether the open list repeated an item (its dash tokens are lowered)."""
        return self._over

    def __call__(
        self, input_ids: npt.NDArray[np.intc], scores: npt.NDArray[np.single]
    ) -> npt.NDArray[np.single]:
        pieces = self._tokens.pieces
        for token in input_ids[self._read :]:
            t = int(token)
            self._feed(pieces[t] if 0 <= t < len(pieces) else b"")
        self._read = max(self._read, len(input_ids))
        if self._over:
            if self._line_start:
                scores[self._tokens.dashes] -= self._tokens.penalty
            scores[self._tokens.inner_dashes] -= self._tokens.penalty
        return scores

    def _feed(self, piece: bytes) -> None:
        if not piece:
            return
        *ended, rest = piece.split(b"\n")
        for part in ended:
            self._line += part
            self._end_line(bytes(self._line))
            self._line.clear()
        self._line += rest
        self._line_start = not rest and bool(ended)

    def _end_line(self, line: bytes) -> None:
        if _OPENER.fullmatch(line):
            self._items.clear()
            self._over = False
        elif _ITEM.match(line):
            key = b" ".join(line.lower().split()[1:])
            if key in self._items:
                self._over = True
            else:
                self._items.add(key)
