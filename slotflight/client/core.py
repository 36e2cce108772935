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
from typing import Any, Final

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
from ..assemble.events import ErrorEvent, Event, PassFailed, SlotStart
from ..assemble.retry import RetryRequest, RetryTarget
from ..plan.model import SlotPlan
from .request import Output, RequestBuilder, StreamOptions, input_text, resolve_plan
from .upstream_errors import transport_error
from .usage import TokenUsage, Usage

__all__ = ["StreamCore", "new_core"]

#: A timer that fires this close to the total deadline is the total timeout's.
_TIMER_SLACK: Final = 0.01

_UNWRITTEN: Final = ErrorDetail(
    "not_written",
    "the connection dropped before this optional value was written;"
    " write it only if it has a value",
)


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
                input_text(messages),
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
        self._watching_for_early_exit = False
        self.stop_reading = False
        self.finished = False
        self.error: SlotflightError | None = None
        self._result: Any = None
        self._pending: list[Event] = []
        self._last_slot_id = 0  # the largest slot id opened in this pass
        self._finish_reason: str | None = None  # what the server said ended this pass
        self._stopped_early = False  # early exit: the pass was stopped on purpose

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
        """The ``timeout=`` of a request: the client's, with ``read`` bounded by
        :meth:`wait_limit` so that a silent server raises instead of blocking."""
        read = self.wait_limit()
        if read is None:
            return None
        base = self._client_timeout
        if isinstance(base, openai.Timeout):
            return openai.Timeout(connect=base.connect, read=read, write=base.write, pool=base.pool)
        if isinstance(base, int | float) and not isinstance(base, bool):
            return openai.Timeout(float(base), read=read)
        return openai.Timeout(None, read=read)

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
        self._retry = None
        self._passes += 1
        self._usage.append(None)
        self.stop_reading = False
        self._last_slot_id = 0
        self._finish_reason = None
        self._stopped_early = False
        self._watching_for_early_exit = (
            self.options.early_exit and not self.assembler.required_complete()
        )
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
        choices = getattr(chunk, "choices", None) or ()
        text = None
        tokens = None
        for choice in choices:
            if getattr(choice, "index", 0) == 0:
                delta = getattr(choice, "delta", None)
                text = getattr(delta, "content", None)
                self._finish_reason = getattr(choice, "finish_reason", None) or self._finish_reason
                if self.options.confidence:
                    logprobs = getattr(choice, "logprobs", None)
                    tokens = tokens_from_openai(getattr(logprobs, "content", None))
                break
        if not isinstance(text, str):
            text = ""
        if not text and not tokens:
            return []
        events = self.assembler.feed(text, tokens)
        for event in events:
            if isinstance(event, SlotStart):
                self._last_slot_id = max(self._last_slot_id, event.slot_id)
        if any(isinstance(e, PassFailed) for e in events):
            self.stop_reading = True  # the pass ignores further input
        elif (
            self._watching_for_early_exit
            and not self.assembler.in_frame
            and self.assembler.required_complete()
        ):
            self.stop_reading = self._stopped_early = True
        return events

    def end_pass(self, dropped: BaseException | None = None) -> list[Event]:
        """The pass ended (normally, early, or by a drop): validate, then regenerate,
        finish or fail. Returns the events; a ``Retry`` event means another pass."""
        assembler = self.assembler
        events = assembler.close(complete=self._complete(dropped))
        if assembler.outcome.ok:
            return self._succeed(events)
        request = None
        if self._passes < self.options.max_attempts:
            request = assembler.retry_request()
            if request is not None and dropped is not None:
                request = self._with_unwritten(request)
        error: SlotflightError
        if request is not None and self.expired():
            error = self.timeout_error(cause=None)
        elif request is not None:
            self._retry, retry_events = assembler.begin_retry(request)
            return events + retry_events
        elif dropped is not None:
            error = UpstreamDisconnected(
                f"the stream dropped during attempt {assembler.attempt} and no attempts are left"
            )
            error.__cause__ = dropped
        else:
            events += assembler.leave_out_failed()
            if assembler.outcome.ok:
                return self._succeed(events)
            error = assembler.failure()
        return events + self.fail(error)

    def _succeed(self, events: list[Event]) -> list[Event]:
        """The pass ended valid: the stream is finished with its object."""
        self.finished = True
        self._result = self.assembler.result
        return events

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

    def _with_unwritten(self, request: RetryRequest) -> RetryRequest:
        """After a drop, also ask for the optional slots the model had not reached yet.

        Slots are written in id order, so an optional slot (or scalar list) with an id
        above every slot opened in the dropped pass, and no accepted value, is one the
        model may still have meant to write. Object-array items beyond those seen are
        not asked for.
        """
        asked = {(t.slot.id, t.index) for t in request.targets}
        completed = self.assembler.completed()
        extra: list[RetryTarget] = []
        for slot in self.plan.slots:
            if slot.id <= self._last_slot_id or (slot.id, None) in asked:
                continue
            array = slot.array
            if array is None:
                if slot.pointer in completed:
                    continue
            elif array.items_are_objects or any(
                p.startswith(array.pointer + "/") for p in completed
            ):
                continue
            extra.append(RetryTarget(slot, None, _UNWRITTEN))
        if not extra:
            return request
        targets = sorted(
            (*request.targets, *extra),
            key=lambda t: (t.slot.id, -1 if t.index is None else t.index),
        )
        return RetryRequest(request.attempt, tuple(targets), request.accepted)

    # -- failures ------------------------------------------------------------------------

    def fail(self, error: SlotflightError) -> list[Event]:
        """End the stream with ``error``: returns the ``error`` event to emit."""
        self.error = error
        errors = tuple(error.errors) if isinstance(error, OutputValidationError) else ()
        detail = ErrorDetail(error.code, error.message, error.location)
        return [ErrorEvent(detail, self.assembler.attempt, errors)]

    def request_failed(self, exc: Exception, *, during: str) -> list[Event]:
        """An ``openai`` error that ends the stream (status, timeout, broken request)."""
        if isinstance(exc, openai.APITimeoutError):
            return self.fail(self.timeout_error(cause=exc))
        error = transport_error(exc, during=during)
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
