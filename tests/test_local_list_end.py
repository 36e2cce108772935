"""The repeated-item penalty of the local server: once a block list repeats an item,
a dash does not start the next line (see ``slotflight/local/_list_end.py``)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from llama_cpp.llama_grammar import LlamaGrammar

from tests.local_support import require_local_model

require_local_model()

from slotflight import SlotflightError  # noqa: E402
from slotflight.local._list_end import RepeatedItemTokens  # noqa: E402
from slotflight.local._value_start import ValueStartPenalty  # noqa: E402
from slotflight.local._worker import logits_processors  # noqa: E402

PIECES = [
    b"attendees",  # 0
    b":\n",  # 1
    b"-",  # 2
    b" Ann",  # 3
    b" Bob",  # 4
    b"\n",  # 5
    b"decisions",  # 6
    b"-3",  # 7
    b" task: Ship",  # 8
    b"owner: Ann\n",  # 9
    b"  ",  # 10
    b"title: Sync",  # 11
    b"\n-",  # 12
]
PROMPT = [6, 6, 6]


def _lowered(tokens: RepeatedItemTokens, written: list[int]) -> list[bool]:
    """Whether the dash was lowered before each token of ``written``, and after the last."""
    penalty = tokens.for_generation(len(PROMPT))
    out = []
    for end in range(len(written) + 1):
        scores = penalty(
            np.array(PROMPT + written[:end], dtype=np.intc), np.zeros(len(PIECES), np.single)
        )
        assert scores[0] == 0  # only tokens beginning a line with a dash
        out.append(bool(scores[2] < 0))
        assert scores[2] == scores[7]
        assert scores[12] == (-tokens.penalty if penalty.over else 0)
    return out


def test_tokens_beginning_with_a_dash_are_the_ones_lowered() -> None:
    assert RepeatedItemTokens(PIECES, 20.0).dashes.tolist() == [2, 7]
    assert RepeatedItemTokens(PIECES, 20.0).inner_dashes.tolist() == [12]
    assert RepeatedItemTokens([b"a", b" -"], 20.0).penalty_in_effect == 0


def test_a_repeated_item_ends_the_list_at_the_next_line_start() -> None:
    tokens = RepeatedItemTokens(PIECES, 20.0)
    # attendees:\n- Ann\n- Bob\n- Bob\n then the next line
    written = [0, 1, 2, 3, 5, 2, 4, 5, 2, 4, 5]
    assert _lowered(tokens, written) == [False] * 11 + [True]
    # within a line, the dash is not lowered; at every later line start it is
    assert _lowered(tokens, [*written, 11, 5]) == [False] * 11 + [True, False, True]


def test_a_list_of_distinct_items_is_left_alone() -> None:
    tokens = RepeatedItemTokens(PIECES, 20.0)
    assert not any(_lowered(tokens, [0, 1, 2, 3, 5, 2, 4, 5]))


def test_an_opening_line_starts_a_new_list() -> None:
    tokens = RepeatedItemTokens(PIECES, 20.0)
    # attendees:\n- Ann\n- Ann\n decisions:\n- Ann\n: the new list repeats nothing
    written = [0, 1, 2, 3, 5, 2, 3, 5, 6, 1, 2, 3, 5]
    assert _lowered(tokens, written)[-1] is False
    assert _lowered(tokens, written)[8] is True  # after the repeat, before "decisions"


def test_items_of_a_list_of_objects_compare_their_dashed_lines() -> None:
    tokens = RepeatedItemTokens(PIECES, 20.0)
    # - task: Ship\nowner: Ann\n- task: Ship\nowner: Ann\n
    written = [2, 8, 5, 9, 2, 8, 5, 9]
    lowered = _lowered(tokens, written)
    assert lowered[:7] == [False] * 7
    assert lowered[7:] == [True, True]  # after the repeated head line, at each line start


def test_blanks_and_case_do_not_make_an_item_new() -> None:
    pieces = [b"- Ann\n", b"-  ann \n", b"- Anna\n", b"-"]
    tokens = RepeatedItemTokens(pieces, 5.0)
    penalty = tokens.for_generation(0)
    scores = penalty(np.array([0, 2], dtype=np.intc), np.zeros(4, np.single))
    assert scores[3] == 0
    scores = penalty(np.array([0, 2, 1], dtype=np.intc), np.zeros(4, np.single))
    assert scores[3] == -5


def test_only_a_generation_under_a_grammar_gets_it() -> None:
    grammar = LlamaGrammar.from_string('root ::= "a"', verbose=False)
    value_start = ValueStartPenalty(PIECES, 0.0)
    tokens = RepeatedItemTokens(PIECES, 20.0)
    assert logits_processors(value_start, None, tokens, 3) is None
    made = list(logits_processors(value_start, grammar, tokens, 3) or [])
    assert len(made) == 1 and made[0] is not tokens
    assert logits_processors(value_start, grammar, RepeatedItemTokens(PIECES, 0.0), 3) is None


@pytest.mark.parametrize("bad", [-1.0, math.inf, math.nan])
def test_a_negative_or_infinite_penalty_is_refused(bad: float) -> None:
    with pytest.raises(SlotflightError) as raised:
        RepeatedItemTokens(PIECES, bad)
    assert raised.value.code == "invalid_option"
    assert "repeated_item_penalty" in str(raised.value)
