"""The synchronous stream: :func:`stream` over an ``openai.OpenAI`` client.

::

    with slotflight.stream(client, model="m", messages=[...], output=Triage) as s:
        for event in s:
            ...
        triage = s.final()

All decisions live in :func:`~slotflight.client.flow.pass_flow` and
:class:`~slotflight.client.core.StreamCore`; this module only calls
``client.chat.completions.create`` and reads the chunks (:mod:`.upstream_body`: blank
``data:`` keep-alives skipped, a JSON answer read as one chunk). The idle timeout is the
HTTP read timeout of each request; the total timeout also bounds it, and is checked
after every chunk. A :class:`~.watchdog.Watchdog` also bounds each wait for a chunk,
which the read timeout does not do while the server sends only SSE comment lines.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import weakref
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any, Generic, Literal, Self, TypeVar, overload

import openai
from pydantic import BaseModel

from .._errors import ErrorDetail, StreamClosed
from ..assemble.assembler import Limits
from ..assemble.checks import ChecksOption, OnCheckFailure
from ..assemble.events import Event
from ..plan.model import SlotPlan
from ..syntax import DEFAULT_SYNTAX
from ..syntax.base import Syntax
from .core import StreamCore, new_core
from .flow import END, Emit, Feed, Read, Request, Wait, pass_flow
from .request import GrammarBackend, Output, PromptPlacement, StreamOptions
from .upstream_body import body_limit, chunks
from .upstream_errors import UPSTREAM_ERRORS
from .usage import Usage
from .watchdog import Watchdog

__all__ = ["SlotStream", "complete", "stream"]

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)


class SlotStream(Generic[T]):
    """A running structured-output stream. Iterate it for events; :meth:`final` for the
    validated object. Use it as a context manager: leaving it closes the upstream."""

    def __init__(self, client: openai.OpenAI, core: StreamCore) -> None:
        self._client = client
        self._requests = core.request_client(client)
        self._core = core
        self._events: Generator[Event, None, None] | None = None
        self._upstream: openai.Stream[Any] | None = None
        self._chunks: Iterator[Any] = iter(())
        self._body_limit = body_limit(core.options.limits)
        self._closed = False
        self._closing = threading.Event()  # set by close(): ends a wait before a retry
        self._reading = False  # inside __next__ (close() may come from another thread)
        self._watchdog = Watchdog(_weak_call(self._expire))  # bounds the waits for a chunk
        # the watchdog's thread holds no reference to the stream: a stream dropped
        # before it ended is collected, and its thread then ends
        weakref.finalize(self, self._watchdog.close)

    # -- reading -------------------------------------------------------------------------

    @property
    def plan(self) -> SlotPlan:
        return self._core.plan

    @property
    def state(self) -> Any:
        """A snapshot of the object so far (valid JSON after every event)."""
        return self._core.assembler.state

    def completed(self) -> dict[str, Any]:
        """Only the validated slot values so far, by JSON Pointer."""
        return self._core.assembler.completed()

    def flagged(self) -> dict[str, ErrorDetail]:
        """Values kept although a slot check failed on them again on their retry
        (``on_check_failure="accept"``), by JSON Pointer: the check's ``code`` and
        ``message`` (its reason). Empty when every value passed its checks."""
        return self._core.assembler.flagged()

    def confidence(self) -> dict[str, float]:
        """The confidence of each validated value, by JSON Pointer: in ``[0, 1]``, the
        probability the model gave the tokens that wrote it (their product). Only with
        ``confidence=True`` and a server that returned token logprobs; a value whose
        tokens are missing or do not match the text has none (never invented)."""
        return self._core.assembler.confidence()

    @property
    def attempt(self) -> int:
        """The current attempt (1 for the first request, 2 for the first follow-up …)."""
        return self._core.assembler.attempt

    @property
    def usage(self) -> Usage:
        """Token usage per request made, and the total."""
        return self._core.usage

    @property
    def closed(self) -> bool:
        return self._closed

    # -- iteration -----------------------------------------------------------------------

    def __iter__(self) -> Self:
        return self

    def __next__(self) -> Event:
        if self._closed:
            raise StreamClosed("the stream is closed")
        if self._events is None:
            self._events = self._run()
        self._reading = True
        try:
            return next(self._events)
        finally:
            self._reading = False

    def final(self) -> T:
        """Read the rest of the stream and return the validated object.

        Raises :class:`~slotflight.OutputValidationError` when slots still fail after
        the last attempt, a :class:`~slotflight.TransportError` when the server could not
        be used, :class:`~slotflight.StreamClosed` when the stream was closed first.
        """
        if not self._closed:
            for _ in self:
                pass
        result: T = self._core.result()
        return result

    def close(self) -> None:
        """Stop now: close the upstream HTTP response. Idempotent."""
        self._closed = True
        self._closing.set()
        events, self._events = self._events, None
        if events is not None and not self._reading:
            events.close()
        self._close_upstream()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- I/O -----------------------------------------------------------------------------

    def _close_upstream(self) -> None:
        upstream, self._upstream = self._upstream, None
        if upstream is not None:
            if self._reading:  # from another thread, while a read may be blocked
                _shut_down(upstream)
            upstream.close()

    def _run(self) -> Generator[Event, None, None]:
        """Drive :func:`~.flow.pass_flow` with blocking I/O; however it ends, the
        upstream response is closed."""
        flow = pass_flow(self._core)
        reply: Any = None
        try:
            while True:
                try:
                    command = flow.send(reply)
                except StopIteration:
                    break
                reply = None
                if isinstance(command, Emit):
                    if self._core.finished or self._core.error is not None:
                        # no read is left: end the thread now, as the caller may stop
                        # at ``done`` and never resume the stream to its end
                        self._watchdog.close()
                    yield from command.events
                elif isinstance(command, Request):
                    reply = self._request(command)
                elif isinstance(command, Read):
                    reply = self._read(command)
                elif isinstance(command, Feed):
                    reply = command.feed()
                elif isinstance(command, Wait):
                    if self._closing.wait(command.seconds):
                        raise StreamClosed("the stream was closed before a request was retried")
                else:
                    self._close_upstream()
                    if self._closed:
                        raise StreamClosed("the stream was closed while reading")
        finally:
            self._watchdog.close()
            self._close_upstream()
        if self._core.error is not None:
            raise self._core.error

    def _request(self, command: Request) -> BaseException | None:
        """Send the request; ``None``, or the exception it raised."""
        try:
            self._upstream = upstream = self._requests.chat.completions.create(**command.kwargs)
        except UPSTREAM_ERRORS as exc:
            if self._closed:
                raise StreamClosed("the stream was closed during the request") from exc
            return exc
        if self._closed:  # close() came from another thread while the request was sent
            self._close_upstream()
            upstream.close()
            raise StreamClosed("the stream was closed during the request")
        self._watchdog.reset()
        self._chunks = chunks(upstream, self._body_limit)
        return None

    def _read(self, command: Read) -> Any:
        """The next chunk, :data:`~.flow.END`, or the exception reading raised (a
        read timeout when the watchdog closed the response at the deadline)."""
        watchdog = self._watchdog
        if command.wait is not None:
            watchdog.arm(command.wait)
        try:
            chunk = next(self._chunks)
        except StopIteration:
            chunk = END
        except Exception as exc:
            if self._closed:  # close() came from another thread during the read
                raise StreamClosed("the stream was closed while reading") from exc
            if watchdog.expired:
                return self._timed_out()
            if not isinstance(exc, UPSTREAM_ERRORS):
                raise
            if self._closed:
                raise StreamClosed("the stream was closed while reading") from exc
            return exc
        finally:
            watchdog.disarm()
        if self._closed:
            raise StreamClosed("the stream was closed while reading")
        return self._timed_out() if chunk is END and watchdog.expired else chunk

    def _timed_out(self) -> BaseException:
        """The read the watchdog ended, as the client's own read timeout reports it."""
        upstream = self._upstream
        if upstream is None:
            return TimeoutError()
        return openai.APITimeoutError(request=upstream.response.request)

    def _expire(self) -> None:
        """The watchdog's deadline passed during a read: shut the socket down and close
        the response. The read is blocked on this stream's thread, and closing alone
        would leave it waiting out the HTTP read timeout, which restarted at the last
        byte and so may end well past the deadline."""
        upstream = self._upstream
        if upstream is not None:
            _shut_down(upstream)
            upstream.close()


def _weak_call(method: Callable[[], None]) -> Callable[[], None]:
    """``method`` called through a weak reference to its object (nothing once that is
    gone)."""
    ref = weakref.WeakMethod(method)

    def call() -> None:
        bound = ref()
        if bound is not None:
            bound()

    return call


def _shut_down(upstream: openai.Stream[Any]) -> None:
    """Shut the response's socket down, so that a read blocked on it in another thread
    returns now (closing the response alone does not wake a blocked ``recv``)."""
    network = upstream.response.extensions.get("network_stream")
    sock = network.get_extra_info("socket") if network is not None else None
    if isinstance(sock, socket.socket):
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


@overload
def stream(
    client: openai.OpenAI,
    *,
    model: str,
    messages: Sequence[Mapping[str, Any]],
    output: type[M],
    syntax: str | Syntax = ...,
    max_attempts: int = ...,
    grammar: GrammarBackend | Literal[False] = ...,
    grammar_max_string_chars: int | None = ...,
    prompt_role: PromptPlacement = ...,
    timeout: float | None = ...,
    idle_timeout: float | None = ...,
    early_exit: bool = ...,
    limits: Limits | None = ...,
    checks: ChecksOption = ...,
    on_check_failure: OnCheckFailure = ...,
    confidence: bool = ...,
    calibrate: bool | None = ...,
    **params: Any,
) -> SlotStream[M]: ...


@overload
def stream(
    client: openai.OpenAI,
    *,
    model: str,
    messages: Sequence[Mapping[str, Any]],
    output: Mapping[str, Any] | SlotPlan,
    syntax: str | Syntax = ...,
    max_attempts: int = ...,
    grammar: GrammarBackend | Literal[False] = ...,
    grammar_max_string_chars: int | None = ...,
    prompt_role: PromptPlacement = ...,
    timeout: float | None = ...,
    idle_timeout: float | None = ...,
    early_exit: bool = ...,
    limits: Limits | None = ...,
    checks: ChecksOption = ...,
    on_check_failure: OnCheckFailure = ...,
    confidence: bool = ...,
    calibrate: bool | None = ...,
    **params: Any,
) -> SlotStream[Any]: ...


def stream(
    client: openai.OpenAI,
    *,
    model: str,
    messages: Sequence[Mapping[str, Any]],
    output: Output,
    syntax: str | Syntax = DEFAULT_SYNTAX,
    max_attempts: int = 3,
    grammar: GrammarBackend | Literal[False] = False,
    grammar_max_string_chars: int | None = None,
    prompt_role: PromptPlacement = "system",
    timeout: float | None = None,
    idle_timeout: float | None = None,
    early_exit: bool = False,
    limits: Limits | None = None,
    checks: ChecksOption = "all",
    on_check_failure: OnCheckFailure = "accept",
    confidence: bool = False,
    calibrate: bool | None = None,
    **params: Any,
) -> SlotStream[Any]:
    """Stream ``output`` from a chat-completion model as validated slots (sync).

    Nothing is sent until the stream is iterated (or :meth:`SlotStream.final` called).
    Every keyword not listed here goes through to ``client.chat.completions.create``.
    See ``docs/sdk.md`` for the options, regeneration and errors.
    """
    if isinstance(client, openai.AsyncOpenAI):
        raise TypeError("stream() needs a sync openai.OpenAI client; use astream() for AsyncOpenAI")
    options = StreamOptions(
        syntax=syntax,
        max_attempts=max_attempts,
        grammar=grammar,
        grammar_max_string_chars=grammar_max_string_chars,
        prompt_role=prompt_role,
        timeout=timeout,
        idle_timeout=idle_timeout,
        early_exit=early_exit,
        limits=limits,
        checks=checks,
        on_check_failure=on_check_failure,
        confidence=confidence,
        calibrate=calibrate,
    )
    core = new_core(
        output,
        model=model,
        messages=messages,
        options=options,
        params=params,
        client_timeout=client.timeout,
    )
    return SlotStream(client, core)


@overload
def complete(
    client: openai.OpenAI,
    *,
    model: str,
    messages: Sequence[Mapping[str, Any]],
    output: type[M],
    **options: Any,
) -> M: ...


@overload
def complete(
    client: openai.OpenAI,
    *,
    model: str,
    messages: Sequence[Mapping[str, Any]],
    output: Mapping[str, Any] | SlotPlan,
    **options: Any,
) -> Any: ...


def complete(
    client: openai.OpenAI,
    *,
    model: str,
    messages: Sequence[Mapping[str, Any]],
    output: Output,
    **options: Any,
) -> Any:
    """:func:`stream` and :meth:`SlotStream.final` in one call: the validated object."""
    with stream(client, model=model, messages=messages, output=output, **options) as s:
        return s.final()
