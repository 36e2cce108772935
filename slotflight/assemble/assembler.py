"""The assembler: frame text in, events and a valid JSON state out. Sans-I/O.

The :class:`Assembler` runs passes and hands each job to its module: decoding the
input (:mod:`.decode`), the lexer of the frame syntax (:mod:`slotflight.syntax`),
admitting frames (:mod:`.admission`), reading the open frame into the state
(:mod:`.frame`), bounded diagnostics (:mod:`.diagnostics`), the end of a pass
(:mod:`.closing`) and retry planning (:mod:`.retry`). Itself it only dispatches the
lexer's tokens and enforces the pass-wide bounds (total size, text outside frames).

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
    # no attempt left: leave out the optional parts that still fail, if that is all
    events = asm.leave_out_failed()   # then asm.outcome.ok, or nothing changed

Guarantees (tested property by property in ``tests/``):

- Chunk invariance: any split of the same input (bytes split inside UTF-8 characters
  or CRLF pairs included) gives the same non-delta events, the same concatenated
  deltas per slot and the same final state.
- O(total characters): the lexer never re-scans; string values are kept as parts
  (:class:`~.events.TextBuffer`) and joined only when read; no per-event state copy;
  O(1) dispatch per token.
- The state is valid JSON after every event and holds only schema keys. Strings grow
  as prefixes of their final (trimmed) value; every other kind appears only once its
  frame closed and validated; a completed value never changes, except that a retry
  replaces a failed scalar array as a whole, and :meth:`leave_out_failed` takes out the
  optional parts that still fail when no attempt is left.
- Nothing raises out of :meth:`feed` or :meth:`close`: bad input becomes a diagnostic,
  a failed slot, or (for crossed bounds) a ``pass-failed`` event after which the pass
  ignores input. The state and every event are strict JSON (no ``NaN``/``Infinity``,
  no lone surrogates). An internal fault that no rule foresaw ends the pass with
  ``pass-failed`` ``internal_error`` instead of an exception.
- ``grammar=True`` (with ``grammar_max_string_chars`` as the grammar was built): the
  output is written under the syntax's grammar, and the lexer relies on what it rules
  out (:meth:`~slotflight.syntax.base.Syntax.lexer`): in a line syntax a value the
  grammar keeps to one line completes at its newline.
- ``checks=CheckSettings(...)``: the slot checks (:mod:`.checks`) run on every value
  that validated, when its slot closes; a value they reject leaves the state with a
  ``slot-rejected`` event and, unless it is a list item dropped, fails its slot for
  the regenerator. Without it (the default of the core) no check runs; the SDK and the
  gateway turn them on.
- ``confidence=True``: :meth:`Assembler.feed` also takes the chunk's token logprobs;
  they are placed in the pass's text (:mod:`.confidence`) and every ``slot-complete``
  carries the ``confidence`` of the tokens that wrote its value (``None`` where the
  tokens are missing or do not match the text). Placing is chunk-invariant and O(total
  characters + tokens); without the option tokens are ignored.
- Diagnostics are bounded: at most ``Limits.max_diagnostics_per_code`` per code per
  pass, then one ``diagnostics_suppressed`` diagnostic with the count when the pass ends.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .._errors import ErrorDetail, OutputValidationError
from ..plan.model import Slot, SlotPlan
from ..syntax import get_syntax
from ..syntax.base import Close, Diag, End, Noise, NoiseRun, Open, Syntax, Text, Token
from .admission import Admission
from .checks import CheckSettings, SlotChecker
from .closing import PassCloser
from .confidence import TokenLedger, TokenLogprob, confidence
from .decode import InputDecoder
from .diagnostics import DiagnosticLog
from .events import Diagnostic, Event, PassFailed, Retry
from .frame import FrameReader
from .reasoning import ReasoningBlock
from .results import SlotResults
from .retry import RetryRequest, plan_retry, prepare_retry
from .state import ObjectState

__all__ = ["Assembler", "Limits", "Outcome"]


@dataclass(frozen=True)
class Limits:
    """Bounds on what one pass accepts. Crossing one fails cleanly.

    - ``max_frame_chars``: one frame's body; the slot fails (``frame_too_large``) and
      the rest of its body is dropped.
    - ``max_total_chars``: the whole pass; a ``pass-failed`` event
      (``limit_exceeded``), later input of the pass ignored, accepted slots kept.
    - ``max_noise_chars``: text outside frames in a row; ``pass-failed``
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
        grammar: bool = False,
        grammar_max_string_chars: int | None = None,
        checks: CheckSettings | None = None,
        confidence: bool = False,
    ) -> None:
        self.plan = plan
        self.confidence_enabled = confidence
        self.syntax = get_syntax(syntax)
        self.limits = limits or Limits()
        self.grammar = grammar
        self.grammar_max_string_chars = grammar_max_string_chars
        self._state = ObjectState(None if plan.root_slot is not None else {})
        self.attempt = 1
        self._request: RetryRequest | None = None  # what the current pass asks for
        self._results = SlotResults()
        self._closer = PassCloser(plan, self._state, self._results)
        self._checker = (
            SlotChecker(plan, self._results, checks)
            if checks is not None and checks.enabled
            else None
        )
        self._result: Any = None
        self._outcome: Outcome | None = None
        self.diagnostics: list[Diagnostic] = []
        self._reset_pass()

    def _reset_pass(self) -> None:
        self._lexer = (
            self.syntax.lexer(
                self.plan, grammar=True, max_string_chars=self.grammar_max_string_chars
            )
            if self.grammar
            else self.syntax.lexer(self.plan)  # also a syntax written before the option
        )
        self._diagnostics = DiagnosticLog(
            self.limits.max_diagnostics_per_code, self.attempt, self.diagnostics
        )
        self._input = InputDecoder(self._diagnostics, self.limits.max_total_chars)
        self._ledger = TokenLedger() if self.confidence_enabled else None
        self._reasoning = ReasoningBlock()
        self._noise_run = 0  # characters outside frames since the last frame opened
        self._stopped: ErrorDetail | None = None  # why the pass stopped reading input
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
            checker=self._checker,
            diagnostics=self._diagnostics,
            ledger=self._ledger,
        )
        self._closed = False
        self._cut_short = False
        self._end_marked = False

    # -- public reading ----------------------------------------------------------------

    @property
    def state(self) -> Any:
        """A snapshot of the output so far (strict JSON, schema keys only): an object, or
        for a plan whose root is a single slot, that slot's value (``null`` until set)."""
        return self._state.snapshot()

    def completed(self) -> dict[str, Any]:
        """Validated slot values so far, by concrete JSON Pointer."""
        return self._results.completed()

    def flagged(self) -> dict[str, ErrorDetail]:
        """Values kept although a slot check failed on them (``on_check_failure=
        "accept"``), by concrete JSON Pointer: the check's code and reason."""
        completed = self.completed()
        return {p: d for p, d in self._results.flagged.items() if p in completed}

    def stopped_lists(self) -> frozenset[int]:
        """The slot ids of the lists a slot check stopped at a repeated item in this
        pass (``list_repeat``: the rest of such a list is not read)."""
        return frozenset(self._results.stopped)

    def confidence(self) -> dict[str, float]:
        """The confidence of every validated value that has one, by concrete JSON
        Pointer (``confidence=True`` and a server that returned token logprobs)."""
        completed = self.completed()
        found = {}
        for pointer, logprobs in self._results.logprobs.items():
            figure = confidence(logprobs)
            if pointer in completed and figure is not None:
                found[pointer] = figure
        return found

    def value_logprobs(self) -> dict[str, tuple[float, ...]]:
        """The log probabilities of the tokens that wrote each validated value that has
        them, by concrete JSON Pointer (what :meth:`confidence` is computed from)."""
        completed = self.completed()
        return {p: lp for p, lp in self._results.logprobs.items() if p in completed}

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
    def request(self) -> RetryRequest | None:
        """The follow-up request the current pass answers (``None``: the first pass)."""
        return self._request

    @property
    def ended(self) -> bool:
        """Whether this pass's output marked its own end (the syntax's end marker)."""
        return self._end_marked

    def required_complete(self) -> bool:
        """Whether every required slot already validated (for early exit): nothing
        would be missing if the stream were cut here."""
        return not self.required_missing()

    def required_missing(self) -> list[tuple[Slot, int | None]]:
        """The required slots (at item positions) with no accepted value yet, the open
        frame's aside: what :meth:`required_complete` finds missing."""
        frame = self._frames.current
        open_key = frame.key if frame is not None else None
        return [
            (slot, index)
            for slot, index in self._closer.missing(cut=True)
            if (slot.id, index) != open_key
        ]

    # -- feeding -------------------------------------------------------------------------

    def feed(self, chunk: str | bytes, tokens: Sequence[TokenLogprob] | None = None) -> list[Event]:
        """Take the next piece of model output; return what it caused. Never raises.

        ``tokens``: the token logprobs the server sent with this piece (with
        ``confidence=True``; ignored otherwise). A token may come with the text it wrote
        or before it (``feed("", tokens)``), never after: a value closed before its
        tokens came has no confidence. Within that, how either is split does not count.
        """
        events: list[Event] = []
        if self._closed:
            return events
        try:
            if tokens and self._ledger is not None:
                self._ledger.tokens(tokens)
            self._read(self._input.feed(chunk, events), events)
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
                    self._stopped or ErrorDetail("internal_error", ""),
                )
                self._outcome = Outcome(self.attempt, self.completed(), errors, False, False)
        return events

    def _close(self, complete: bool, events: list[Event]) -> None:
        self._read(self._input.close(events), events)
        if self._stopped is None:
            if self._reasoning.inside:
                self._diagnostics.report(
                    events,
                    "reasoning",
                    f"the output ended inside a reasoning block ({self._reasoning.skipped} "
                    "characters): no frames followed it",
                    self._input.offset,
                )
            self._lex(self._reasoning.close(), events)
            tokens = self._lexer.close()
            if not complete and not self._end_marked:
                # a value that only the end of a cut-short stream ended may be cut too
                tokens = [t for t in tokens if not isinstance(t, Close)]
            self._dispatch(tokens, events)
        self._cut_short = not complete and not self._end_marked
        self._frames.truncate("the stream ended before this frame was closed", events)
        self._frames.keep_held(events)
        self._diagnostics.summarise(events, self._input.offset)
        self._closed = True
        self._finish(events)

    def _internal_error(self, exc: Exception, events: list[Event]) -> None:
        """End the pass on an unforeseen fault (``pass-failed`` ``internal_error``)."""
        self._frames.abandon()
        if self._stopped is None:
            self._stopped = ErrorDetail("internal_error", f"internal error: {type(exc).__name__}")
            events.append(PassFailed(self._stopped, self.attempt))

    def _read(self, text: str, events: list[Event]) -> None:
        """Lex decoded text within the pass's total bound."""
        if not text or self._stopped is not None:
            return
        admitted = self._input.admit(text)  # a chunk crossing the bound: read up to it
        if admitted:
            if self._ledger is not None:
                self._ledger.text(admitted)
            reasoning = self._reasoning
            if reasoning.settled:
                self._lex(admitted, events)
            else:
                rest = reasoning.feed(admitted)
                if reasoning.closed:
                    self._diagnostics.report(
                        events,
                        "reasoning",
                        f"a reasoning block of {reasoning.skipped} characters before the "
                        "frames was not read as frames",
                        self._input.offset,
                    )
                self._lex(rest, events)
        if self._input.over and self._stopped is None:
            self._stop(
                events,
                "limit_exceeded",
                f"output exceeded {self.limits.max_total_chars} characters",
            )

    def _lex(self, text: str, events: list[Event]) -> None:
        """Lex text read as frames (after a reasoning block, if the pass opened with one)."""
        if not text:
            return
        if self._ledger is not None and self._reasoning.skipped:
            self._ledger.origin = self._reasoning.skipped
        self._dispatch(self._lexer.feed(text), events)
        self._input.offset += len(text)

    # -- tokens -------------------------------------------------------------------------

    def _dispatch(self, tokens: list[Token], events: list[Event]) -> None:
        """Hand each token to its job; adjacent body text goes to the frame as one piece."""
        if len(tokens) == 1 and type(tokens[0]) is Text:  # the common case: body text only
            self._frames.text(tokens[0].text, events)
            return
        pending: list[str] = []
        for token in tokens:
            if type(token) is Text:
                pending.append(token.text)
                continue
            if pending:
                self._frames.text("".join(pending), events)
                pending = []
            if self._stopped is not None:
                return
            if isinstance(token, Open):
                self._open(token, events)
            elif isinstance(token, Close):
                self._frames.close(events, quoted=token.quoted, end=token.offset)
            elif isinstance(token, Noise):
                self._noise_run += token.count
                if self._noise_run > self.limits.max_noise_chars:
                    self._stop(
                        events,
                        "no_frames",
                        f"more than {self.limits.max_noise_chars} characters outside"
                        " frames: the model stopped producing frames",
                    )
                    return
            elif isinstance(token, NoiseRun):
                message = f"{token.count} characters outside frames ignored"
                self._diagnostics.report(events, "noise", message, token.offset)
            elif isinstance(token, Diag):
                self._diagnostics.report(events, token.code, token.message, token.offset)
            elif isinstance(token, End):
                self._end_marked = True
        if pending:
            self._frames.text("".join(pending), events)

    def _open(self, token: Open, events: list[Event]) -> None:
        """A frame opens: read it if admitted, else skip its body."""
        self._noise_run = 0
        admitted = self._admission.admit(token, events)
        if admitted is None:
            self._frames.skip()
        else:
            self._frames.open(*admitted, events, token.offset, token.body)

    def _stop(self, events: list[Event], code: str, message: str) -> None:
        """A pass-wide bound was crossed: the open frame fails, later input is ignored."""
        self._stopped = ErrorDetail(code, message)
        self._frames.truncate(f"stopped: {message}", events)
        events.append(PassFailed(self._stopped, self.attempt))

    def _finish(self, events: list[Event]) -> None:
        end = self._closer.finish(self.attempt, cut=self._cut_short, events=events)
        ok = not end.errors
        if ok:
            self._result = end.value
        self._outcome = Outcome(self.attempt, self.completed(), end.errors, ok, end.retryable)

    def leave_out_failed(self) -> list[Event]:
        """No attempt is left and the pass ended invalid: leave out the optional parts
        of the object that hold every failure (an optional field, or an optional or
        nullable object or scalar list above it; :meth:`.PassCloser.leave_out`), so
        that the object ends valid without them. Returns the events (``left_out``
        diagnostics, then ``done``); none, and nothing changed, when some failure is not
        in an optional part or the object would still be invalid. Never raises."""
        outcome = self._outcome
        if outcome is None or outcome.ok or self._stopped is not None:
            return []
        events: list[Event] = []
        try:
            end = self._closer.leave_out(
                self.attempt, outcome.errors, cut=self._cut_short, events=events
            )
        except Exception as exc:  # a fault no rule foresaw: the pass stays failed
            self._internal_error(exc, events)
            return events
        if end is not None:
            self._result = end.value
            self._outcome = Outcome(self.attempt, self.completed(), (), True, True)
        return events

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
