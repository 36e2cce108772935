"""Whether a held line start may still become a slot or list name: a binary search over
the names, the same answer as the set of every prefix, at the size of the names."""

from __future__ import annotations

import tracemalloc

from hypothesis import given
from hypothesis import strategies as st

from slotflight.assemble.assembler import Assembler
from slotflight.plan.compiler import compile as compile_schema
from slotflight.syntax.lines.lexer import NamePrefixes

_NAMES = st.lists(st.text(alphabet="ab_.[]:", min_size=1, max_size=8), max_size=8)


@given(_NAMES, st.text(alphabet="ab_.[]:", max_size=9))
def test_the_same_answer_as_every_prefix(names: list[str], look: str) -> None:
    every = {n[:i] for n in names for i in range(1, len(n) + 1)}
    assert (look in NamePrefixes(names)) == (look in every)


def _reader_peak(length: int, syntax: str) -> int:
    key = "k" * length
    plan = compile_schema(
        {"type": "object", "properties": {key: {"type": "array", "items": {"type": "string"}}}}
    )
    tracemalloc.start()
    try:
        Assembler(plan, syntax=syntax)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_long_name_costs_the_reader_its_length_not_its_square() -> None:
    # Every prefix of a 20,000-character name is 200 million characters; the names
    # themselves are what the reader holds now.
    for syntax in ("v3", "v4", "v4-quoted"):
        assert _reader_peak(20_000, syntax) < 20 * _reader_peak(1_000, syntax) + 4_000_000
