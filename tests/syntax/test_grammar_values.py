"""What a grammar says about numbers: exact integer bounds and a number's integer part.

:func:`integer_range` is checked on its own (as a regular expression); what llama.cpp's
grammar engine admits is checked on written frames of every syntax.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Annotated, Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, Field

from slotflight.plan.compiler import compile as compile_schema
from slotflight.syntax import SYNTAXES, grammar, render_frames
from slotflight.syntax.gbnf import integer_range
from tests.grammar_support import GrammarEngine


def _as_regex(gbnf: str) -> re.Pattern[str]:
    """A GBNF expression of literals, classes, ``{m,n}``, groups and ``|`` as a regex."""
    text = re.sub(r'"([^"]*)"', lambda m: re.escape(m.group(1)), gbnf)
    return re.compile(text.replace(" ", ""))


_bound = st.one_of(st.none(), st.integers(-3000, 3000), st.integers(-(10**7), 10**7))


@given(low=_bound, high=_bound, probes=st.lists(st.integers(-(10**8), 10**8), max_size=50))
def test_integer_range_matches_exactly_the_integers_between_its_bounds(
    low: int | None, high: int | None, probes: list[int]
) -> None:
    if low is not None and high is not None and low > high:
        low, high = high, low
    pattern = _as_regex(integer_range(low, high))
    near = [b + d for b in (low, high, 0) if b is not None for d in (-11, -10, -1, 0, 1, 9, 10)]
    for n in [*probes, *near, *range(-120, 121)]:
        inside = (low is None or n >= low) and (high is None or n <= high)
        assert bool(pattern.fullmatch(str(n))) == inside, (low, high, n)
    for malformed in ("-0", "00", "007", "-05", "", "+1"):
        assert not pattern.fullmatch(malformed), (low, high, malformed)


def test_an_empty_integer_range_is_refused() -> None:
    with pytest.raises(ValueError):
        integer_range(5, 4)


class Sizes(BaseModel):
    words: Annotated[int, Field(ge=50, le=3000)]
    minutes: Annotated[int, Field(gt=0, lt=61)]
    delta: Annotated[int, Field(ge=-40, le=-3)]
    floor: Annotated[int, Field(ge=10)]
    rating: Annotated[float, Field(ge=0, le=5)]


_SIZES = {"words": 50, "minutes": 1, "delta": -3, "floor": 10, "rating": 4.5}


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_integer_bounds_are_exact_in_the_grammar(engine: GrammarEngine, syntax: str) -> None:
    plan = compile_schema(Sizes)
    g = grammar(plan, syntax)

    def admitted(**values: Any) -> bool:
        text = render_frames(plan, {**_SIZES, **values}, syntax)
        return engine.accepts(g, text)

    assert admitted()
    for field, good, bad in [
        ("words", [50, 99, 100, 2999, 3000], [3, 49, 3001, 9999]),
        ("minutes", [1, 60], [0, 61]),
        ("delta", [-40, -10, -3], [-41, -2, 3]),
        ("floor", [10, 11, 123456], [9, 0, -10]),
        ("rating", [0, 5, 4.5, 0.25], [6, 10, 55]),
    ]:
        for value in good:
            assert admitted(**{field: value}), (field, value)
        for value in bad:
            assert not admitted(**{field: value}), (field, value)


class Moments(BaseModel):
    at: dt.time
    when: dt.datetime


_MOMENT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "at": {"type": "string", "format": "time"},
        "when": {"type": "string", "format": "date-time"},
    },
    "required": ["at", "when"],
    "additionalProperties": False,
}
#: Written without a zone, as a Pydantic model writes naive values; then with one.
_NAIVE = [("09:30:00", "2025-01-31T09:30:00"), ("09:30", "2025-01-31 09:30")]
_ZONED = [("09:30:00Z", "2025-01-31T09:30:00Z"), ("23:59:59.5+01:00", "2025-01-31t09:30:00-05:30")]


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_times_in_the_grammar_follow_how_the_output_reads_them(
    engine: GrammarEngine, syntax: str
) -> None:
    """A plan from a Pydantic model admits naive times and date-times (the model reads
    them); a plan from a JSON Schema admits RFC 3339 only (seconds and a zone), which
    its ``time`` and ``date-time`` formats require."""
    for source, naive_admitted in ((Moments, True), (_MOMENT_SCHEMA, False)):
        plan = compile_schema(source)
        g = grammar(plan, syntax)
        for at, when in _ZONED:
            assert engine.accepts(g, render_frames(plan, {"at": at, "when": when}, syntax))
        for at, when in _NAIVE:
            text = render_frames(plan, {"at": at, "when": "2025-01-31T09:30:00Z"}, syntax)
            assert engine.accepts(g, text) == naive_admitted, (source, at)
            text = render_frames(plan, {"at": "09:30:00Z", "when": when}, syntax)
            assert engine.accepts(g, text) == naive_admitted, (source, when)
