"""What a stream does between the HTTP calls, shared by the sync and async streams.

:class:`StreamCore` holds the assembler, the attempts, the deadline and the usage, and
decides everything: which request to send next, what each chunk produces, when to
stop reading, whether to regenerate, and which error ends the stream. The sync and
async streams (``_stream_sync``, ``_stream_async``) only perform the I/O it asks for.

One stream is a sequence of passes, one request each::

    while (kwargs := core.next_request()) is not None:   # None: finished or failed
        upstream = create(**kwargs)                      # errors: core.request_failed
        for chunk in upstream:
            events = core.on_chunk(chunk)
            if core.stop_reading: break
        close upstream
        events = core.end_pass(dropped=...)              # Done, Retry or ErrorEvent
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, Final, TypeVar

import openai

from .._errors import (
    ErrorDetail,
    OutputValidationError,
    SlotflightError,
    StreamClosed,
    UpstreamDisconnected,
    UpstreamTimeout,
)
from ..assemble.assembler import Assembler
from ..assemble.checks import CheckSettings
from ..assemble.confidence import tokens_from_openai
from ..assemble.events import (
    Diagnostic,
    Done,
    ErrorEvent,
    Event,
    PassFailed,
    Retry,
    SlotComplete,
    SlotDelta,
    SlotStart,
)
from ..assemble.retry import RetryRequest, RetryTarget
from ..plan.model import Slot, SlotPlan
from .request import Output, RequestBuilder, StreamOptions, input_text, resolve_plan
from .request_retry import retry_delay
from .upstream_errors import is_drop, transport_error
from .usage import TokenUsage, Usage

__all__ = ["StreamCore", "new_core"]

_Client = TypeVar("_Client", openai.OpenAI, openai.AsyncOpenAI)

#: A timer that fires this close to the total deadline is the total timeout's.
_TIMER_SLACK: Final = 0.01

#: What cut a pass short, as the follow-up's reasons say it.
_DROPPED: Final = "the connection dropped"
_SERVER_FAILED: Final = "the model server failed"
_AT_LIMIT: Final = "the answer reached the token limit"

#: Characters of a refusal kept for the error that names it.
_MAX_REFUSAL_CHARS: Final = 500

#: Why the model stopped without writing the answer, when asking again would meet the
#: same end (see :meth:`StreamCore.end_pass`): the error code, and what its message says.
_REFUSED: Final = "refused"
_CONTENT_FILTER: Final = "content_filter"
_TOOL_CALLS: Final = "tool_calls"
_STOPPED_BY: Final = {
    _CONTENT_FILTER: "the model server's content filter stopped the answer",
    _TOOL_CALLS: "the model called a tool instead of writing the answer",
}


class StreamCore:
    """The sans-I/O state of one stream (see the module docs)."""

    def __init__(
        self,
        plan: SlotPlan,
        options: StreamOptions,
        *,
        model: str,
        messages: Sequence[Mapping[str, Any]],
        params: Mapping[str, Any],
        client_timeout: Any,
    ) -> None:
        self.plan = plan
        self.options = options
        self.builder = RequestBuilder(plan, options, model=model, messages=messages, params=params)
        self.assembler = Assembler(
            plan,
            syntax=options.syntax,
            limits=options.limits,
            grammar=options.grammar is not False,
            grammar_max_string_chars=options.grammar_max_string_chars,
            checks=CheckSettings(
                options.checks,
                options.on_check_failure,
                input_text(self.builder.caller_messages),
                options.max_attempts,
            )
            if options.checks != "none"
            else None,
            confidence=options.confidence,
        )
        self._client_timeout = client_timeout
        self._started_at: float | None = None
        self._usage: list[TokenUsage | None] = []
        self._retry: RetryRequest | None = None
        self._passes = 0
        self._request_retries = 0  # how often a request may be sent again (its failure)
        self._retries_done = 0  # how often this pass's request was sent again
        self._watching_for_early_exit = False
        #: Early exit: the slot ids whose next value may complete the required slots
        #: (those found missing at the last check); ``None``: check again.
        self._awaited: frozenset[int] | None = None
        self._at_line_start = True  # the text read so far in this pass ends a line
        self.stop_reading = False
        self.finished = False
        self.error: SlotflightError | None = None
        self._result: Any = None
        self._pending: list[Event] = []
        self._last_slot_id = 0  # the largest slot id opened in this pass
        self._finish_reason: str | None = None  # what the server said ended this pass
        self._refusal: list[str] = []  # the refusal this pass wrote (``delta.refusal``)
        self._refusal_chars = 0
        self._tool_called = False  # this pass wrote a tool call (``delta.tool_calls``)
        self._stopped_early = False  # early exit: the pass was stopped on purpose
        self._asked: frozenset[int] | None = None  # slot ids this pass asks for (None: all)
        #: A pass already ended with every required value: a follow-up only asks for
        #: optional ones, and its failure ends the stream with the object, not an error.
        self._settled = False

    # -- reading -------------------------------------------------------------------------

    @property
    def usage(self) -> Usage:
        return Usage(tuple(self._usage))

    @property
    def requests_made(self) -> int:
        return self._passes

    def result(self) -> Any:
        """The validated object; raises the error that ended the stream, if any."""
        if self.error is not None:
            raise self.error
        if not self.finished:
            raise StreamClosed("the stream was closed before it finished")
        return self._result

    # -- time ----------------------------------------------------------------------------

    def remaining(self) -> float | None:
        """Seconds left of the total timeout (``None``: no total timeout)."""
        if self.options.timeout is None:
            return None
        if self._started_at is None:
            return self.options.timeout
        return self.options.timeout - (time.monotonic() - self._started_at)

    def expired(self, slack: float = 0.0) -> bool:
        """Whether the total timeout ran out (``slack``: seconds early still counted)."""
        remaining = self.remaining()
        return remaining is not None and remaining <= slack

    def wait_limit(self) -> float | None:
        """How long to wait for the next chunk: the idle timeout or the time left."""
        idle, remaining = self.options.idle_timeout, self.remaining()
        limit = idle if remaining is None else remaining if idle is None else min(idle, remaining)
        return None if limit is None else max(limit, 0.0)

    def _request_timeout(self) -> openai.Timeout | None:
        """The ``timeout=`` of a request: the client's, with its ``read`` (when it has
        one) bounded by :meth:`wait_limit` so that a silent server raises instead of
        blocking."""
        read = self.wait_limit()
        if read is None:
            return None
        base = self._client_timeout
        if isinstance(base, openai.Timeout):
            if base.read is not None:
                read = min(read, base.read)
            return openai.Timeout(connect=base.connect, read=read, write=base.write, pool=base.pool)
        if isinstance(base, int | float) and not isinstance(base, bool):
            return openai.Timeout(float(base), read=min(read, float(base)))
        return openai.Timeout(None, read=read)

    def request_client(self, client: _Client) -> _Client:
        """The client to send this stream's requests with. With ``timeout`` or
        ``idle_timeout`` set, a copy without the ``openai`` client's own retries: they
        run inside one request (each retry waits the whole read timeout again, a
        ``retry-after`` is slept through), past the deadlines. The stream retries
        instead, as often as ``client.max_retries`` says, while the waits fit
        (:meth:`request_retry_wait`)."""
        if self.options.timeout is None and self.options.idle_timeout is None:
            return client
        retries = getattr(client, "max_retries", 0)
        self._request_retries = retries if isinstance(retries, int) and retries > 0 else 0
        return client.with_options(max_retries=0)

    def request_retry_wait(self, exc: BaseException) -> float | None:
        """Seconds to wait before sending the request that just failed with ``exc``
        again, or ``None`` to let the failure end the stream: when the client's own
        retries are on (no timeout set), when ``max_retries`` retries of this request
        were made, when the failure is not one the ``openai`` client retries
        (:func:`~.request_retry.retry_delay`), or when the wait would take more than
        the idle timeout or half the time left of the total one (the request after
        it must have the rest)."""
        if self._retries_done >= self._request_retries:
            return None
        delay = retry_delay(exc, self._retries_done)
        if delay is None:
            return None
        limit = self.options.idle_timeout
        remaining = self.remaining()
        if remaining is not None:
            limit = remaining / 2 if limit is None else min(limit, remaining / 2)
        if limit is not None and delay > limit:
            return None
        self._retries_done += 1
        return delay

    def retry_request(self, kwargs: dict[str, Any]) -> dict[str, Any] | None:
        """The request of this pass to send again after a wait, its read timeout
        bounded by the time left now; ``None`` when the total timeout ran out during
        the wait (the stream fails then, as :meth:`next_request` says)."""
        if self.expired():
            self._pending = self.fail(self.timeout_error(cause=None))
            return None
        timeout = self._request_timeout()
        return kwargs if timeout is None else {**kwargs, "timeout": timeout}

    # -- passes --------------------------------------------------------------------------

    def next_request(self) -> dict[str, Any] | None:
        """The ``create`` keywords of the next pass, or ``None`` when the stream is over.

        When the total timeout has run out the stream fails instead; the driver then
        sees ``None`` and takes the error events from :meth:`pending_events`.
        """
        if self.finished or self.error is not None:
            return None
        if self._started_at is None:
            self._started_at = time.monotonic()
        elif self._passes and self._retry is None:
            return None
        if self.expired():
            self._pending = self.fail(self.timeout_error(cause=None))
            return None
        timeout = self._request_timeout()
        kwargs = (
            self.builder.first(timeout)
            if self._retry is None
            else self.builder.retry(self._retry, timeout)
        )
        self._asked = (
            None if self._retry is None else frozenset(t.slot.id for t in self._retry.targets)
        )
        self._retry = None
        self._passes += 1
        self._retries_done = 0
        self._usage.append(None)
        self.stop_reading = False
        self._last_slot_id = 0
        self._finish_reason = None
        self._refusal = []
        self._refusal_chars = 0
        self._tool_called = False
        self._stopped_early = False
        self._watching_for_early_exit = (
            self.options.early_exit and not self.assembler.required_complete()
        )
        self._awaited = None
        self._at_line_start = True
        return kwargs

    def pending_events(self) -> list[Event]:
        """Events produced outside a pass (the timeout error of :meth:`next_request`)."""
        events, self._pending = self._pending, []
        return events

    def on_chunk(self, chunk: Any) -> list[Event]:
        """Feed one ``ChatCompletionChunk``; sets :attr:`stop_reading` when done early."""
        usage = getattr(chunk, "usage", None)
        if usage is not None:
            self._usage[-1] = TokenUsage.from_openai(usage)
        choice = first_choice(chunk)
        text = choice_text(choice)
        tokens = None
        if choice is not None:
            self._finish_reason = getattr(choice, "finish_reason", None) or self._finish_reason
            if not text:
                self._note_no_content(getattr(choice, "delta", None))
            if self.options.confidence:
                logprobs = getattr(choice, "logprobs", None)
                tokens = tokens_from_openai(getattr(logprobs, "content", None))
        if not text and not tokens:
            return []
        events = self.assembler.feed(text, tokens)
        if text:
            self._at_line_start = text.endswith("\n")
        for event in events:
            if isinstance(event, SlotStart):
                self._last_slot_id = max(self._last_slot_id, event.slot_id)
        if any(isinstance(e, PassFailed) for e in events):
            self.stop_reading = True  # the pass ignores further input
        elif self._watching_for_early_exit and self._may_exit_early(events):
            self.stop_reading = self._stopped_early = True
        return events

    def _note_no_content(self, delta: Any) -> None:
        """A delta without text: keep the refusal it writes (OpenAI's ``delta.refusal``,
        its first :data:`_MAX_REFUSAL_CHARS` characters), note a tool call."""
        refusal = getattr(delta, "refusal", None)
        if isinstance(refusal, str) and refusal and self._refusal_chars < _MAX_REFUSAL_CHARS:
            part = refusal[: _MAX_REFUSAL_CHARS - self._refusal_chars]
            self._refusal.append(part)
            self._refusal_chars += len(part)
        if getattr(delta, "tool_calls", None) or getattr(delta, "function_call", None):
            self._tool_called = True

    def _stopped_by(self) -> str | None:
        """Why the model stopped without writing the answer, when a new request would
        meet the same end: it refused (``delta.refusal``), the server's content filter
        stopped it (``finish_reason: "content_filter"``), or it called a tool
        (``finish_reason: "tool_calls"``, or a tool call in its deltas); else ``None``."""
        if self._refusal:
            return _REFUSED
        if self._finish_reason == "content_filter":
            return _CONTENT_FILTER
        if self._tool_called or self._finish_reason in ("tool_calls", "function_call"):
            return _TOOL_CALLS
        return None

    def _stopped_error(self, reason: str) -> OutputValidationError:
        """The error for a pass that :meth:`_stopped_by` names: the assembler's failure
        (``partial``, ``errors``, ``attempts``), with the reason as its code and message."""
        failure = self.assembler.failure()
        if reason == _REFUSED:
            said = "".join(self._refusal)
            message = f"the model refused to answer: {said!r}"
        else:
            message = _STOPPED_BY[reason]
        error = OutputValidationError(
            f"{message}; not asked again ({failure.message})",
            partial=failure.partial,
            errors=failure.errors,
            attempts=failure.attempts,
        )
        error.code = reason
        return error

    def _may_exit_early(self, events: list[Event]) -> bool:
        """Whether early exit stops the pass here: every required slot validated, no
        frame is open, and the text read ends a line.

        Frames open at line starts, so mid-line the lexer may hold the start of the
        next frame (a list item's ``-``): closing the pass would read it as a value the
        model never wrote. At a line end it holds nothing that could open one.

        Checking the required slots walks every one of them (every item of a list of
        objects); it is done again only after a value of a slot found missing at the
        last check arrived (or anything else happened to a slot), so a long list
        costs one check per item at most, not one per item per chunk."""
        awaited = self._awaited
        if awaited is not None and any(
            not isinstance(e, SlotStart | SlotDelta | Diagnostic)
            and (not isinstance(e, SlotComplete) or e.slot_id in awaited)
            for e in events
        ):
            self._awaited = awaited = None
        if not self._at_line_start or self.assembler.in_frame or awaited is not None:
            return False
        missing = self.assembler.required_missing()
        if not missing:
            return True
        self._awaited = self._awaiting(missing)
        return False

    def _awaiting(self, missing: Sequence[tuple[Slot, int | None]]) -> frozenset[int]:
        """The slot ids whose values may fill ``missing``: each missing slot's, and for
        a list of objects missing as a whole, those of every field of its items."""
        ids = {slot.id for slot, _ in missing}
        whole = {
            slot.array.pointer
            for slot, index in missing
            if index is None and slot.array is not None and slot.array.items_are_objects
        }
        for pointer in whole:
            ids.update(s.id for s in self.plan.array_slots(pointer))
        return frozenset(ids)

    def end_pass(self, dropped: BaseException | None = None) -> list[Event]:
        """The pass ended (normally, early, or by a drop): validate, then regenerate,
        finish or fail. Returns the events; a ``Retry`` event means another pass.

        ``dropped``: what cut the pass short, a broken connection or a transient error
        event (:func:`~.upstream_errors.is_interruption`).

        A pass cut short (a drop, the token limit) before the output marked its end
        also asks for what the model had not written yet (:meth:`_cut_targets`), even
        when every required value arrived; with no attempt (or time) left, a valid
        object ends the stream as it is.

        A follow-up that would repeat this pass's request word for word (the same
        failures and rejected texts, the same accepted values:
        :meth:`~slotflight.assemble.retry.RetryRequest.repeats`) is not sent: the
        failures are settled as on the last attempt (the model answers the same request
        the same way with a seed, and rarely better without). A pass a drop or a server
        error cut is not the model's answer: its follow-up is sent.

        A pass the model ended without the answer in a way a new request would meet
        again (:meth:`_stopped_by`: a refusal, the content filter, a tool call) is not
        asked again: what still fails outside the optional parts ends the stream with an
        :class:`OutputValidationError` whose ``code`` names why.
        """
        assembler = self.assembler
        events = assembler.close(complete=self._complete(dropped))
        cut = self._cut(dropped)
        stopped = None if dropped is not None else self._stopped_by()
        attempts_left = self._passes < self.options.max_attempts and stopped is None
        if assembler.outcome.ok:
            if cut is None or not attempts_left or self.expired():
                return self._succeed(events)
            targets = self._cut_targets(set(), cut)
            if not targets:
                return self._succeed(events)
            more = RetryRequest(assembler.attempt + 1, tuple(targets), assembler.state)
            return self._follow_up_valid(events, more)
        request = None
        if attempts_left:
            request = assembler.retry_request()
            if request is not None and cut is not None:
                request = self._with_cut_targets(request, cut)
            if request is not None and dropped is None and request.repeats(assembler.request):
                request = None  # answered already, the same way: settled as the last one
        error: SlotflightError
        if request is not None and self.expired():
            error = self.timeout_error(cause=None)
        elif request is not None:
            self._retry, retry_events = assembler.begin_retry(request)
            return events + retry_events
        else:
            events += assembler.leave_out_failed()
            if assembler.outcome.ok:
                return self._succeed(events)
            if dropped is not None:
                error = self._interrupted_error(dropped)
            elif stopped is not None:
                error = self._stopped_error(stopped)
            else:
                error = assembler.failure()
        return events + self.fail(error)

    def _interrupted_error(self, dropped: BaseException) -> SlotflightError:
        """The error for a pass ``dropped`` cut, with no attempt left: the drop as
        :class:`UpstreamDisconnected`, an error event as what it says."""
        error: SlotflightError
        if is_drop(dropped) or not isinstance(dropped, Exception):
            error = UpstreamDisconnected(
                f"the stream dropped during attempt {self.assembler.attempt}"
                " and no attempts are left"
            )
        else:
            error = transport_error(dropped, during="the stream")
        error.__cause__ = dropped
        return error

    def _succeed(self, events: list[Event]) -> list[Event]:
        """The pass ended valid: the stream is finished with its object."""
        self.finished = True
        self._result = self.assembler.result
        return events

    def _follow_up_valid(self, events: list[Event], request: RetryRequest) -> list[Event]:
        """Ask ``request`` after a pass that ended valid: its ``done`` becomes the
        follow-up's ``retry``, which carries the changes ``done`` made to the state."""
        self._settled = True
        done_ops = tuple(op for e in events if isinstance(e, Done) for op in e.ops)
        self._retry, retry_events = self.assembler.begin_retry(request)
        kept = [e for e in events if not isinstance(e, Done)]
        for event in retry_events:
            if isinstance(event, Retry):
                event = replace(event, ops=done_ops + event.ops)
            kept.append(event)
        return kept

    def _complete(self, dropped: BaseException | None) -> bool:
        """Whether the pass's output is whole: stopped on purpose (early exit), or ended
        by the model (``finish_reason: stop``) with the syntax's end marker, if it has
        one. Otherwise (token limit, dropped connection, a server that never said) its
        last open value may be cut, and is regenerated rather than accepted."""
        if dropped is not None:
            return False
        if self._stopped_early:
            return True
        if self._finish_reason != "stop":
            return False
        return self.assembler.ended or not self.assembler.syntax.end_marker

    def _cut(self, dropped: BaseException | None) -> str | None:
        """What cut the pass before the model had written all it meant to (a drop, the
        token limit), as the follow-up says it; ``None`` when nothing did: the pass was
        stopped on purpose, or the output marked its own end."""
        if self._stopped_early or self.assembler.ended:
            return None
        if dropped is not None:
            return _DROPPED if is_drop(dropped) else _SERVER_FAILED
        if self._finish_reason == "length":
            return _AT_LIMIT
        return None

    def _with_cut_targets(self, request: RetryRequest, cut: str) -> RetryRequest:
        """``request`` with the targets of :meth:`_cut_targets` added, in slot order."""
        extra = self._cut_targets({(t.slot.id, t.index) for t in request.targets}, cut)
        if not extra:
            return request
        targets = sorted(
            (*request.targets, *extra),
            key=lambda t: (t.slot.id, -1 if t.index is None else t.index),
        )
        return RetryRequest(request.attempt, tuple(targets), request.accepted)

    def _cut_targets(self, asked: set[tuple[int, int | None]], cut: str) -> list[RetryTarget]:
        """What a cut pass had not written yet, beyond the failed slots (``asked``).

        Slots are written in id order, so an optional slot (or scalar list) of this
        pass's request with an id above every slot opened in the cut pass, and no
        accepted value, is one the model may still have meant to write: asked for
        "only if it has a value". A scalar list the pass was writing when it was cut
        (the last slot opened, its items so far accepted) may have had more items: it
        is asked for again whole (a list is one unit), unless it is full or a slot check
        stopped it at a repeated item (then it ended there). Object-array items beyond
        those seen are not asked for.
        """
        completed = self.assembler.completed()
        unwritten = ErrorDetail(
            "not_written",
            f"{cut} before this optional value was written; write it only if it has a value",
        )
        extra: list[RetryTarget] = []
        for slot in self.plan.slots:
            if (slot.id, None) in asked or (self._asked is not None and slot.id not in self._asked):
                continue
            array = slot.array
            if slot.id == self._last_slot_id:
                stopped = slot.id in self.assembler.stopped_lists()  # settled by its check
                if array is not None and not array.items_are_objects and not stopped:
                    target = _cut_list(slot, completed, cut)
                    if target is not None:
                        extra.append(target)
                continue
            if slot.id < self._last_slot_id:
                continue
            if array is None:
                if slot.pointer in completed:
                    continue
            elif array.items_are_objects or any(
                p.startswith(array.pointer + "/") for p in completed
            ):
                continue
            extra.append(RetryTarget(slot, None, unwritten))
        return extra

    # -- failures ------------------------------------------------------------------------

    def fail(self, error: SlotflightError) -> list[Event]:
        """End the stream with ``error``: returns the ``error`` event to emit.

        When a follow-up fails on a transport failure (timeout, drop, error status), the
        pass is closed as cut and what it left failing is left out; when the object is
        then valid (every required value arrived, whether or not an earlier pass
        already ended valid: a cut inside an optional value fails that value), the
        stream ends with it instead, the events ending with a ``follow_up_failed``
        diagnostic and ``done``.
        """
        events: list[Event] = []
        follow_up = self._settled or self.assembler.attempt > 1
        if follow_up and not isinstance(error, OutputValidationError):
            events = self._end_settled(error)
            if self.finished:
                return events
        self.error = error
        errors = tuple(error.errors) if isinstance(error, OutputValidationError) else ()
        detail = ErrorDetail(error.code, error.message, error.location)
        return [*events, ErrorEvent(detail, self.assembler.attempt, errors)]

    def _end_settled(self, error: SlotflightError) -> list[Event]:
        """Close the pass ``error`` ended as cut; finish when the object is valid."""
        assembler = self.assembler
        events = assembler.close(complete=False)
        if not assembler.outcome.ok:
            events += assembler.leave_out_failed()
        if not assembler.outcome.ok:
            return events
        note = Diagnostic(
            "follow_up_failed",
            f"{error.message}: the object ends without the optional values it asked for",
            0,
            assembler.attempt,
        )
        at = next((i for i, e in enumerate(events) if isinstance(e, Done)), len(events))
        return self._succeed([*events[:at], note, *events[at:]])

    def request_failed(self, exc: Exception, *, during: str) -> list[Event]:
        """An ``openai`` error that ends the stream (status, timeout, broken request)."""
        if isinstance(exc, openai.APITimeoutError):
            return self.fail(self.timeout_error(cause=exc))
        error = transport_error(exc, during=during)
        if error is not exc:
            error.__cause__ = exc
        return self.fail(error)

    def timeout_error(self, *, cause: BaseException | None) -> UpstreamTimeout:
        """The timeout that fired: the total one once it ran out, else the idle one."""
        if self.expired(slack=_TIMER_SLACK):
            error = UpstreamTimeout(f"the total timeout of {self.options.timeout:g}s expired")
        elif self.options.idle_timeout is not None:
            error = UpstreamTimeout(
                f"no data from the model server for {self.options.idle_timeout:g}s (idle timeout)"
            )
        else:
            error = UpstreamTimeout("the model server timed out")
        error.__cause__ = cause
        return error


def _cut_list(slot: Slot, completed: Mapping[str, Any], cut: str) -> RetryTarget | None:
    """The whole-list target for the scalar list ``slot`` that a cut pass was writing,
    or ``None`` when it has no accepted item yet (then it failed or is missing, and is
    asked for as such) or is full, or lies in a list of objects."""
    array = slot.array
    if array is None or not all(isinstance(s, str) for s in array.segments):
        return None
    prefix = array.pointer + "/"
    items = sum(1 for p in completed if p.startswith(prefix))
    if items == 0 or (array.max_items is not None and items >= array.max_items):
        return None
    detail = ErrorDetail(
        "truncated",
        f"{cut} while this list was being written; write the whole list again,"
        " its items so far included",
        array.pointer,
        array.path,
    )
    return RetryTarget(slot, None, detail)


def first_choice(chunk: Any) -> Any | None:
    """Choice 0 of a ``ChatCompletionChunk``, the one a stream reads; ``None`` when the
    chunk has none (its ``choices`` missing, null, not a list, or without index 0)."""
    choices = getattr(chunk, "choices", None)
    if not isinstance(choices, list | tuple):
        return None
    for choice in choices:
        if getattr(choice, "index", 0) == 0:
            return choice
    return None


def choice_text(choice: Any) -> str:
    """The text a chunk's choice adds (``delta.content``); ``""`` when none."""
    text = getattr(getattr(choice, "delta", None), "content", None)
    return text if isinstance(text, str) else ""


def chunk_text(chunk: Any) -> str:
    """The text choice 0 of ``chunk`` adds, as a stream reads it; ``""`` when none."""
    return choice_text(first_choice(chunk))


def new_core(
    output: Output,
    *,
    model: str,
    messages: Sequence[Mapping[str, Any]],
    options: StreamOptions,
    params: Mapping[str, Any],
    client_timeout: Any,
) -> StreamCore:
    """A core for ``output`` (compiled when it is not a plan yet)."""
    return StreamCore(
        resolve_plan(output),
        options,
        model=model,
        messages=messages,
        params=params,
        client_timeout=client_timeout,
    )
