"""Diagnostics: what a pass tolerated, reported as events and bounded per code.

Rules:

- A diagnostic is an event (:class:`~.events.Diagnostic`) with a code, a message, the
  character offset where it was noticed and the attempt.
- At most ``per_code`` diagnostics of one code are emitted in one pass; the rest are
  only counted. When the pass ends, each code that went over its bound gets one
  ``diagnostics_suppressed`` diagnostic with the count, in code order.
- Across passes the first :data:`MAX_KEPT` diagnostics are kept in a list the caller
  owns (:attr:`Assembler.diagnostics <slotflight.Assembler.diagnostics>`).

Complexity: O(1) per report; O(codes · log codes) when the pass ends. Memory: one
counter per code seen, at most :data:`MAX_KEPT` kept events.
"""

from __future__ import annotations

from collections import Counter
from typing import Final

from .events import Diagnostic, Event

__all__ = ["MAX_KEPT", "DiagnosticLog"]

#: Diagnostics kept across the passes of one assembler.
MAX_KEPT: Final = 1000


class DiagnosticLog:
    """The diagnostics of one pass: emitted up to a bound per code, then counted."""

    __slots__ = ("_attempt", "_counts", "_kept", "_per_code")

    def __init__(self, per_code: int, attempt: int, kept: list[Diagnostic]) -> None:
        self._per_code = per_code
        self._attempt = attempt
        self._kept = kept
        self._counts: Counter[str] = Counter()

    def report(
        self, events: list[Event], code: str, message: str, offset: int, slot: str = ""
    ) -> None:
        """Report a tolerated problem; past ``per_code`` of one code, only count it."""
        self._counts[code] += 1
        if self._counts[code] > self._per_code:
            return
        self._emit(events, Diagnostic(code, message, offset, self._attempt, slot))

    def summarise(self, events: list[Event], offset: int) -> None:
        """The pass ended: one ``diagnostics_suppressed`` per code over its bound."""
        bound = self._per_code
        for code, count in sorted(self._counts.items()):
            if count > bound:
                message = (
                    f"{count - bound} more {code!r} diagnostics in this pass were not reported"
                    " one by one"
                )
                self._emit(
                    events, Diagnostic("diagnostics_suppressed", message, offset, self._attempt)
                )

    def _emit(self, events: list[Event], event: Diagnostic) -> None:
        events.append(event)
        if len(self._kept) < MAX_KEPT:
            self._kept.append(event)
