"""A number's grammar and its reading agree: what the grammar admits reads as a double
(``$1.5e3`` is 1500; ``1e999``, beyond a double, is not admitted), and a number whose
bounds are too large to spell out still takes an exponent (``1e+20`` below 1e300).
"""

from __future__ import annotations

import math
import random
import re
import struct
from typing import Any

import pytest

from slotflight._written import plain_number
from slotflight.plan.compiler import compile as compile_schema
from slotflight.syntax import SYNTAXES, grammar, render_frames
from tests.grammar_support import GrammarEngine
from tests.schema_support import assemble


def _plan(**bounds: Any) -> Any:
    return compile_schema(
        {
            "type": "object",
            "properties": {"x": {"type": "number", **bounds}},
            "required": ["x"],
            "additionalProperties": False,
        }
    )


def _frames(plan: Any, syntax: str, written: str) -> str:
    """The frames of ``x`` written as ``written``."""
    text = render_frames(plan, {"x": 12.5}, syntax)
    out, found = re.subn(r"(?<![0-9.<])12\.5(?![0-9])", lambda _: written, text, count=1)
    assert found == 1, text
    return out


@pytest.mark.parametrize(
    ("written", "plain"),
    [("$1.5e3", "1.5e3"), ("-€2E-5", "-2E-5"), ("£1e+300", "1e+300"), ("¥7", "7")],
)
def test_an_exponent_after_a_currency_sign_reads_as_the_number(written: str, plain: str) -> None:
    assert plain_number(written) == plain


@pytest.mark.parametrize("text", ["$1,899e3", "1,899.5e3", "$1e", "$e3", "$1.e3"])
def test_an_exponent_after_digit_groups_is_no_written_number(text: str) -> None:
    assert plain_number(text) == text


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_a_currency_sign_and_an_exponent_read_as_the_number_the_grammar_admits(
    engine: GrammarEngine, syntax: str
) -> None:
    plan = _plan()
    g = grammar(plan, syntax)
    for written, value in [("$1.5e3", 1500.0), ("-€2.5E-2", -0.025), ("£1e+2", 100.0)]:
        text = _frames(plan, syntax, written)
        assert engine.accepts(g, text), written
        fed = assemble(plan, text, syntax)
        assert fed.asm.outcome.ok, (written, fed.asm.outcome.errors)
        assert fed.state == {"x": value}


_BEYOND = ["1e999", "1e309", "2e308", "1.8e308", "1.7976931348623159e308", "99e307"]
_WITHIN = [
    "1.7976931348623157e+308",
    "1.7976931348623157e308",
    "1e+308",
    "9.99e307",
    "99999999999999999e291",
    "5e-324",
    "1.5e+07",
    "1.5e007",
]


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_the_grammar_admits_an_exponent_only_within_a_double(
    engine: GrammarEngine, syntax: str
) -> None:
    plan = _plan()
    g = grammar(plan, syntax)
    for written in _BEYOND:
        assert not engine.accepts(g, _frames(plan, syntax, written)), written
        assert not engine.accepts(g, _frames(plan, syntax, "$" + written)), written
        assert not math.isfinite(float(written))
    for written in _WITHIN:
        text = _frames(plan, syntax, written)
        assert engine.accepts(g, text), written
        assert assemble(plan, text, syntax).asm.outcome.ok, written


def test_every_double_s_shortest_text_is_admitted(engine: GrammarEngine) -> None:
    plan = _plan()
    g = grammar(plan, "v4")
    rng = random.Random(3)
    doubles = [struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0] for _ in range(80)]
    for value in [x for x in doubles if math.isfinite(x)] + [1e16, -1e300, 2.5e-308]:
        assert engine.accepts(g, render_frames(plan, {"x": value}, "v4")), value


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_a_number_bounded_beyond_what_is_spelled_out_takes_an_exponent(
    engine: GrammarEngine, syntax: str
) -> None:
    plan = _plan(minimum=0, maximum=1e300)
    g = grammar(plan, syntax)
    for value in [1e20, 123456789012345678.0, 1e300, 12.5]:
        text = render_frames(plan, {"x": value}, syntax)
        assert engine.accepts(g, text), value
        fed = assemble(plan, text, syntax)
        assert fed.asm.outcome.ok and fed.state == {"x": value}
    for written in ["-1e20", "-5", "1e999"]:
        assert not engine.accepts(g, _frames(plan, syntax, written)), written


def test_a_number_bounded_to_spelled_out_digits_keeps_its_grammar() -> None:
    """Bounds whose integer parts are spelled out still bound the integer part, with no
    exponent, currency sign or digit groups (the benchmark's ratings)."""
    for syntax in SYNTAXES:
        g = grammar(_plan(minimum=0, maximum=5), syntax)
        assert "float-scaled" not in g and "currency" not in g
        assert '[0-5]) ("." [0-9]{1,24})?' in g
