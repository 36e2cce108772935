"""The assembler: frame text in, events and a valid JSON state out. Sans-I/O.

::

    asm = Assembler(plan)
    for chunk in stream:
        for event in asm.feed(chunk):
            ...
    events = asm.close()          # ends the pass: truncation, missing slots, final check
    if asm.outcome.ok:
        value = asm.result        # the validated model instance (or dict)
    else:
        request, events = asm.begin_retry()   # a follow-up pass for the failed slots

Guarantees (tested property by property in ``tests/``):

- Chunk invariance: any split of the same input (bytes split inside UTF-8 characters
  or CRLF pairs included) gives the same non-delta events, the same concatenated
  deltas per slot and the same final state.
- O(total characters): the lexer never re-scans; string values are kept as parts
  (:class:`TextBuffer`) and joined only when read; no per-event state copy.
- The state is valid JSON after every event and holds only schema keys. Strings grow
  as prefixes of their final (trimmed) value; every other kind appears only once its
  frame closed and validated; a completed value never changes, except that a retry
  replaces a failed scalar array as a whole.
- Nothing raises out of :meth:`feed` or :meth:`close`: bad input becomes a diagnostic,
  a failed slot, or (for crossed bounds) a ``pass-failed`` event after which the pass
  ignores input. The state and every event are strict JSON (no ``NaN``/``Infinity``,
  no lone surrogates). An internal fault that no rule foresaw ends the pass with
  ``pass-failed`` ``internal_error`` instead of an exception.
- Diagnostics are bounded: at most ``Limits.max_diagnostics_per_code`` per code per
  pass, then one ``diagnostics_suppressed`` diagnostic with the count when the pass ends.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .._errors import ErrorDetail, OutputValidationError
from ..plan.model import SlotPlan
from ..syntax import get_syntax
from ..syntax.base import Close, Diag, End, Noise, NoiseRun, Open, Syntax, Text, Token
from .admission import Admission
from .closing import PassCloser
from .decode import InputDecoder
from .diagnostics import DiagnosticLog
from .events import (
    Diagnostic,
    Event,
    PassFailed,
    Retry,
)
from .frame import FrameReader
from .results import SlotResults
from .retry import RetryRequest, plan_retry, prepare_retry
from .state import ObjectState

__all__ = ["Assembler", "Limits", "Outcome"]


@dataclass(frozen=True)
class Limits:
    """Bounds on what one pass accepts. Crossing one fails cleanly.

    - ``max_frame_chars``: one frame's body; the slot fails (``frame_too_large``) and
      the rest of its body is dropped.
    - ``max_total_chars``: the whole pass; a terminal ``error`` event
      (``limit_exceeded``), later input ignored, accepted slots kept.
    - ``max_noise_chars``: text outside frames in a row; terminal ``error``
      (``no_frames``: the model stopped producing frames).
    - ``max_array_items``: items per array (also capped by the schema's ``maxItems``);
      further items are dropped with a diagnostic.
    - ``max_json_depth``: nesting of one ``json`` slot value; deeper fails the slot
      (``json_too_deep``).
    - ``max_diagnostics_per_code``: diagnostics of one code in one pass; the rest are
      counted and reported once (``diagnostics_suppressed``) when the pass ends.
    """

    max_frame_chars: int = 1 << 20
    max_total_chars: int = 16 << 20
    max_noise_chars: int = 8192
    max_array_items: int = 1000
    max_json_depth: int = 64
    max_diagnostics_per_code: int = 20


@dataclass(frozen=True)
class Outcome:
    """Where a pass ended: accepted values (by pointer) and every failure."""

    attempt: int
    completed: dict[str, Any]
    errors: tuple[ErrorDetail, ...]
    ok: bool
    retryable: bool = True


class Assembler:
    """Incremental frame assembler for one :class:`SlotPlan`. See the module docs."""

    def __init__(
        self,
        plan: SlotPlan,
        *,
        syntax: str | Syntax | None = None,
        limits: Limits | None = None,
    ) -> None:
        self.plan = plan
        self.syntax = get_syntax(syntax)
        self.limits = limits or Limits()
        self._state = ObjectState(None if plan.root_slot is not None else {})
        self.attempt = 1
        self._request: RetryRequest | None = None
        # across attempts
        self._results = SlotResults()
        self._closer = PassCloser(plan, self._state, self._results)
        self._result: Any = None
        self._outcome: Outcome | None = None
        self.diagnostics: list[Diagnostic] = []
        self._reset_pass()

    def _reset_pass(self) -> None:
        self._lexer = self.syntax.lexer(self.plan)
        self._diagnostics = DiagnosticLog(
            self.limits.max_diagnostics_per_code, self.attempt, self.diagnostics
        )
        self._input = InputDecoder(self._diagnostics, self.limits.max_total_chars)
        self._noise = 0
        self._fatal: ErrorDetail | None = None
        self._results.new_pass()
        self._admission = Admission(
            self.plan,
            self._state,
            self._results,
            self._diagnostics,
            request=self._request,
            max_array_items=self.limits.max_array_items,
        )
        self._frames = FrameReader(
            self.plan,
            self._state,
            self._results,
            attempt=self.attempt,
            max_frame_chars=self.limits.max_frame_chars,
            max_json_depth=self.limits.max_json_depth,
        )
        self._closed = False
        self._cut = False
        self._ended = False  # the output marked its own end (END token)

    # -- public reading ----------------------------------------------------------------

    @property
    def state(self) -> Any:
        """A snapshot of the output so far (strict JSON, schema keys only): an object, or
        for a plan whose root is a single slot, that slot's value (``null`` until set)."""
        return self._state.snapshot()

    def completed(self) -> dict[str, Any]:
        """Validated slot values so far, by concrete JSON Pointer."""
        return self._results.completed()

    @property
    def outcome(self) -> Outcome:
        """The outcome of the last closed pass (call :meth:`close` first)."""
        if self._outcome is None:
            raise RuntimeError("the pass is still open: call close() first")
        return self._outcome

    @property
    def result(self) -> Any:
        """The validated final object (model instance for models, else a dict)."""
        if self._outcome is None or not self._outcome.ok:
            raise self.failure()
        return self._result

    @property
    def in_frame(self) -> bool:
        return self._frames.inside

    @property
    def ended(self) -> bool:
        """Whether this pass's output marked its own end (the syntax's end marker)."""
        return self._ended

    def required_complete(self) -> bool:
        """Whether every required slot already validated (for early exit)."""
        frame = self._frames.current
        open_key = frame.key if frame is not None else None
        return all((slot.id, index) == open_key for slot, index in self._closer.missing(cut=False))

    # -- feeding -------------------------------------------------------------------------

    def feed(self, chunk: str | bytes) -> list[Event]:
        """Take the next piece of model output; return what it caused. Never raises."""
        events: list[Event] = []
        if self._closed:
            return events
        try:
            self._lex(self._input.feed(chunk, events), events)
        except Exception as exc:  # a fault no rule foresaw: the pass ends, nothing escapes
            self._internal_error(exc, events)
        return events

    def close(self, *, complete: bool = True) -> list[Event]:
        """The stream ended: fail a truncated frame, report missing slots, validate.

        ``complete=False`` says the stream was cut short (the connection dropped, or
        the server stopped at its token limit). Then a frame that only the end of the
        stream closed fails as truncated, and a required array that received no frame
        at all is reported missing instead of being taken as empty; unless the output
        marked its own end (v2's end line) before the cut. Never raises.
        """
        events: list[Event] = []
        if self._closed:
            return events
        try:
            self._close(complete, events)
        except Exception as exc:  # a fault no rule foresaw: reported, never raised
            self._internal_error(exc, events)
            self._closed = True
            if self._outcome is None:
                errors = (
                    *self._results.failed.values(),
                    self._fatal or ErrorDetail("internal_error", ""),
                )
                self._outcome = Outcome(self.attempt, self.completed(), errors, False, False)
        return events

    def _close(self, complete: bool, events: list[Event]) -> None:
        self._lex(self._input.close(events), events)
        if self._fatal is None:
            tokens = self._lexer.close()
            if not complete and not self._ended:
                # a value that only the end of a cut-short stream ended may be cut too
                tokens = [t for t in tokens if not isinstance(t, Close)]
            self._run(tokens, events)
        self._cut = not complete and not self._ended
        self._frames.truncate("the stream ended before this frame was closed", events)
        self._diagnostics.summarise(events, self._input.offset)
        self._closed = True
        self._finish(events)

    def _internal_error(self, exc: Exception, events: list[Event]) -> None:
        """End the pass on an unforeseen fault (``pass-failed`` ``internal_error``)."""
        self._frames.abandon()
        if self._fatal is None:
            self._fatal = ErrorDetail("internal_error", f"internal error: {type(exc).__name__}")
            events.append(PassFailed(self._fatal, self.attempt))

    def _lex(self, text: str, events: list[Event]) -> None:
        if not text or self._fatal is not None:
            return
        if not self._input.admit(text):
            self._die(
                events,
                "limit_exceeded",
                f"output exceeded {self.limits.max_total_chars} characters",
            )
            return
        self._run(self._lexer.feed(text), events)
        self._input.offset += len(text)

    # -- tokens -------------------------------------------------------------------------

    def _run(self, tokens: list[Token], events: list[Event]) -> None:
        if len(tokens) == 1 and type(tokens[0]) is Text:  # the common case: body text only
            self._frames.text(tokens[0].text, events)
            return
        pending: list[str] = []
        for tok in tokens:
            if type(tok) is Text:
                pending.append(tok.text)
                continue
            if pending:
                self._frames.text("".join(pending), events)
                pending = []
            if self._fatal is not None:
                return
            if isinstance(tok, Open):
                self._open(tok, events)
            elif isinstance(tok, Close):
                self._frames.close(events, quoted=tok.quoted)
            elif isinstance(tok, Noise):
                self._noise += tok.count
                if self._noise > self.limits.max_noise_chars:
                    self._die(
                        events,
                        "no_frames",
                        f"more than {self.limits.max_noise_chars} characters outside"
                        " frames: the model stopped producing frames",
                    )
                    return
            elif isinstance(tok, NoiseRun):
                self._diag(
                    events, "noise", f"{tok.count} characters outside frames ignored", tok.offset
                )
            elif isinstance(tok, Diag):
                self._diag(events, tok.code, tok.message, tok.offset)
            elif isinstance(tok, End):
                self._ended = True
        if pending:
            self._frames.text("".join(pending), events)

    def _open(self, token: Open, events: list[Event]) -> None:
        self._noise = 0
        admitted = self._admission.admit(token, events)
        if admitted is None:
            self._frames.skip()
        else:
            self._frames.open(*admitted, events)

    def _diag(self, events: list[Event], code: str, message: str, offset: int) -> None:
        self._diagnostics.report(events, code, message, offset)

    def _die(self, events: list[Event], code: str, message: str) -> None:
        self._fatal = ErrorDetail(code, message)
        self._frames.truncate(f"stopped: {message}", events)
        events.append(PassFailed(self._fatal, self.attempt))

    def _finish(self, events: list[Event]) -> None:
        end = self._closer.finish(self.attempt, cut=self._cut, events=events)
        if not end.errors:
            self._result = end.value
        ok = not end.errors
        self._outcome = Outcome(self.attempt, self.completed(), end.errors, ok, end.retryable)

    # -- regeneration ----------------------------------------------------------------------

    def retry_request(self) -> RetryRequest | None:
        """The follow-up request for this outcome, or ``None`` when nothing can be retried."""
        outcome = self.outcome
        if outcome.ok or not outcome.retryable:
            return None
        return plan_retry(self.plan, self._results.failed, self._state, self.attempt + 1)

    def begin_retry(self, request: RetryRequest | None = None) -> tuple[RetryRequest, list[Event]]:
        """Start the next pass, accepting only frames for ``request``'s targets."""
        request = request or self.retry_request()
        if request is None:
            raise self.failure()
        ops = prepare_retry(self.plan, self._state, self._results, request)
        self.attempt = request.attempt
        self._request = request
        self._outcome = None
        self._reset_pass()
        event = Retry(
            self.attempt,
            tuple(t.slot.display(t.index) for t in request.targets),
            tuple(t.error for t in request.targets),
            ops,
        )
        return request, [event]

    def failure(self) -> OutputValidationError:
        """The typed error for a pass that did not end valid."""
        errors = self._outcome.errors if self._outcome is not None else ()
        names = ", ".join(e.slot or e.location or e.code for e in errors[:5])
        return OutputValidationError(
            f"output still invalid after {self.attempt} attempt(s): {names}",
            partial=self._state.snapshot(),
            errors=errors,
            attempts=self.attempt,
        )
