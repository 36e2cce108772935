"""Bounds on what one schema may cost: checked while compiling, before the work is done.

Every schema is hostile input (the gateway compiles client schemas). The compiler counts
as it goes and stops with a :class:`SchemaError` (code ``schema_too_large``) naming the
bound, so that no schema can make it, the prompt or the grammar grow without limit.
Defaults are in :class:`CompileLimits`; pass another instance to
:func:`slotflight.compile` to change them (``docs/security.md`` lists them).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Final

from .._errors import SchemaError
from .validators import pattern_size

__all__ = ["DEFAULT_LIMITS", "LIMIT_CODE", "Budget", "CompileLimits", "limit_error"]

#: The error code of every bound crossed while compiling.
LIMIT_CODE: Final = "schema_too_large"


@dataclass(frozen=True)
class CompileLimits:
    """What one schema may cost. Crossing a bound raises :class:`SchemaError`.

    - ``max_schema_nodes``: objects, arrays and values in the schema document.
    - ``max_schema_depth``: nesting depth of the schema document.
    - ``max_slots``: slots in the plan, counted while expanding (``$ref`` expansions
      included), so a reference DAG that would expand exponentially stops early.
    - ``max_expansion``: subschemas visited while expanding and bundling (each visit
      through a reference counts again).
    - ``max_compile_seconds``: wall time of one compile.
    - ``max_string_length``: largest ``minLength`` (example text is made that long).
    - ``max_min_items``: largest ``minItems`` / ``minProperties`` / ``minContains``
      (examples hold that many items).
    - ``max_pattern_chars``: length of one ``pattern`` or ``patternProperties`` regex.
    - ``max_pattern_bytes``: what one regex may compile to on the linear-time engine,
      estimated from its text before it is compiled
      (:func:`~slotflight.plan.validators.pattern_size`; ``\\w{64}`` is about 3.3 MB).
    - ``max_total_pattern_bytes``: the same, summed over the distinct regexes one
      compile meets (the schema's patterns, and ``format: regex`` defaults it checks).
    - ``max_expansion_depth``: how deep the expansion nests: the keys and item levels on
      a slot's path (objects nested through ``$ref`` included), and wrapper ``allOf`` /
      ``anyOf`` / ``oneOf`` unwrapped one inside the other (the document's own nesting is
      ``max_schema_depth``; references nest without it). The prompt and the grammar
      recurse once per level.
    - ``max_prompt_chars``: the prompt (its slot list and example, estimated from the
      plan before either is written, and checked again on the text).
    - ``max_grammar_chars``: the GBNF grammar.
    """

    max_schema_nodes: int = 100_000
    max_schema_depth: int = 64
    max_slots: int = 1_000
    max_expansion: int = 200_000
    max_compile_seconds: float = 2.0
    max_string_length: int = 100_000
    max_min_items: int = 1_000
    max_pattern_chars: int = 1_000
    max_pattern_bytes: int = 4_000_000
    max_total_pattern_bytes: int = 16_000_000
    max_expansion_depth: int = 64
    max_prompt_chars: int = 400_000
    max_grammar_chars: int = 1_000_000


DEFAULT_LIMITS: Final = CompileLimits()


def limit_error(bound: str, message: str, location: str = "") -> SchemaError:
    """The :class:`SchemaError` for crossing ``bound`` (a :class:`CompileLimits` field)."""
    return SchemaError(f"{message} ({bound})", code=LIMIT_CODE, location=location)


class Budget:
    """Counts work units against ``max_expansion`` and the compile deadline.

    ``spend`` is O(1); the clock is read once every 256 units, and before every regex
    is compiled (:meth:`pattern`).
    """

    __slots__ = ("_deadline", "_left", "_pattern_bytes", "_patterns", "_tick", "limits")

    def __init__(self, limits: CompileLimits) -> None:
        self.limits = limits
        self._left = limits.max_expansion
        self._deadline = time.monotonic() + limits.max_compile_seconds
        self._tick = 0
        self._patterns: set[str] = set()
        self._pattern_bytes = 0

    def spend(self, units: int = 1, location: str = "") -> None:
        self._left -= units
        if self._left < 0:
            raise limit_error(
                "max_expansion",
                f"expanding the schema visits more than {self.limits.max_expansion} subschemas",
                location,
            )
        self._tick += units
        if self._tick >= 256:
            self._tick = 0
            self.check_time(location)

    def pattern(self, pattern: str, location: str = "") -> None:
        """Charge ``pattern`` before it is compiled (once per distinct pattern): its
        estimated compiled size against ``max_pattern_bytes`` and, summed,
        ``max_total_pattern_bytes``; then the clock. O(len(pattern))."""
        if pattern in self._patterns:
            return
        limits = self.limits
        size = pattern_size(pattern)
        if size > limits.max_pattern_bytes:
            raise limit_error(
                "max_pattern_bytes",
                f"pattern {pattern!r:.80} would compile to about {size} bytes, "
                f"over {limits.max_pattern_bytes}",
                location,
            )
        self._patterns.add(pattern)
        self._pattern_bytes += size
        if self._pattern_bytes > limits.max_total_pattern_bytes:
            raise limit_error(
                "max_total_pattern_bytes",
                f"the schema's patterns would compile to more than "
                f"{limits.max_total_pattern_bytes} bytes",
                location,
            )
        self.spend(1, location)
        self.check_time(location)

    def check_time(self, location: str = "") -> None:
        if time.monotonic() > self._deadline:
            raise limit_error(
                "max_compile_seconds",
                f"compiling took longer than {self.limits.max_compile_seconds} s",
                location,
            )
