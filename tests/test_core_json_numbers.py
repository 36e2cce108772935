"""A ``json`` slot's numbers (tuples, maps, nested arrays): what the grammar admits reads
as a finite double (``1e999`` and a 400-digit integer are not admitted), every double's
shortest text and every 64-bit integer are admitted, and the rule stays small."""

from __future__ import annotations

import json
import math
import random
import re
import struct
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slotflight.bench.models import SCHEMAS
from slotflight.plan.compiler import compile as compile_schema
from slotflight.syntax import SYNTAXES, grammar, render_frames
from tests.grammar_support import GrammarEngine
from tests.schema_support import assemble

_SCHEMA = {
    "type": "object",
    "properties": {"x": {"type": "array", "items": {}}},
    "required": ["x"],
    "additionalProperties": False,
}
_PLAN = compile_schema(_SCHEMA)


def _frames(syntax: str, written: str) -> str:
    """The frames of ``x`` holding the one number written as ``written``."""
    text = render_frames(_PLAN, {"x": [7]}, syntax)
    out, found = re.subn(r"\[7\]", lambda _: f"[{written}]", text, count=1)
    assert found == 1, text
    return out


def _finite(written: str) -> bool:
    return math.isfinite(float(written))


_BEYOND = ["1e999", "1e309", "2e308", "-1.8e308", "1.7976931348623159e308", "1" + "0" * 400]


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_a_json_value_s_number_is_admitted_only_within_a_double(
    engine: GrammarEngine, syntax: str
) -> None:
    g = grammar(_PLAN, syntax)
    for written in _BEYOND:
        assert not _finite(written)
        assert not engine.accepts(g, _frames(syntax, written)), written[:30]
    within = ["0", "-0", "1.5", "-0.25e-5", "1e+16", "5e-324", "1.7976931348623157e+308"]
    for written in [*within, str(2**64 - 1), str(-(2**63))]:
        text = _frames(syntax, written)
        assert engine.accepts(g, text), written
        fed = assemble(_PLAN, text, syntax)
        assert fed.asm.outcome.ok, (written, fed.asm.outcome.errors)
        assert fed.state == {"x": [json.loads(written)]}


def test_every_exponent_the_grammar_admits_keeps_the_number_within_a_double(
    engine: GrammarEngine,
) -> None:
    """Every exponent 0 to 999 as written bare, signed and zero-padded, after the mantissas
    at a double's edges; what is admitted is finite, and up to the largest double all is."""
    g = grammar(_PLAN, "v4")
    admitted = 0
    for mantissa in ["1.7976931348623157", "1.7976931348623159", "99999999999999999"]:
        for power in range(1000):
            for exponent in {str(power), "+" + str(power), str(power).zfill(3)}:
                written = f"{mantissa}e{exponent}"
                if engine.accepts(g, _frames("v4", written)):
                    assert _finite(written), written
                    admitted += 1
                else:
                    assert len(exponent.lstrip("+")) > 3 or not _finite(written), written
    assert admitted > 2000


_NUMBER_TEXT = st.from_regex(
    r"\A-?[0-9]{1,22}(\.[0-9]{1,26})?([eE][-+]?[0-9]{1,4})?\Z", fullmatch=True
)


_GRAMMAR = grammar(_PLAN, "v4")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(written=_NUMBER_TEXT)
def test_every_number_the_grammar_admits_reads_back_as_a_finite_double(
    engine: GrammarEngine, written: str
) -> None:
    text = _frames("v4", written)
    if engine.accepts(_GRAMMAR, text):
        assert _finite(written), written
        fed = assemble(_PLAN, text, "v4")
        assert fed.asm.outcome.ok, (written, fed.asm.outcome.errors)
        assert fed.state == {"x": [json.loads(written)]}


def test_every_double_s_shortest_text_is_admitted(engine: GrammarEngine) -> None:
    rng = random.Random(5)
    doubles = [struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0] for _ in range(80)]
    for value in [x for x in doubles if math.isfinite(x)] + [1e16, -1e300, 2.5e-308, 0.0001]:
        assert engine.accepts(_GRAMMAR, _frames("v4", json.dumps(value))), value


def test_the_number_rule_has_one_size_however_deep_the_value() -> None:
    """Numbers are shared rules: written once, whatever the plan holds."""
    sizes = []
    for width in (1, 10, 40):
        schema: dict[str, Any] = {
            "type": "object",
            "properties": {f"j{k}": {"type": "array", "items": {}} for k in range(width)},
        }
        g = grammar(compile_schema(schema), "v4")
        assert g.count("float-scaled ::=") == 1
        sizes.append(len(g))
    assert sizes[2] - sizes[1] <= 4 * (sizes[1] - sizes[0])


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_llama_cpp_loads_the_grammar_of_every_benchmark_schema(
    engine: GrammarEngine, name: str
) -> None:
    plan = compile_schema(SCHEMAS[name])
    for syntax in SYNTAXES:
        assert engine.loads(grammar(plan, syntax)), (name, syntax)
