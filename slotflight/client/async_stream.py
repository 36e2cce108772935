"""The asynchronous stream: :func:`astream` over an ``openai.AsyncOpenAI`` client.

::

    async with slotflight.astream(client, model="m", messages=[...], output=Triage) as s:
        async for event in s:
            ...
        triage = await s.final()

All decisions live in :func:`~slotflight.client.flow.pass_flow` and
:class:`~slotflight.client.core.StreamCore`; this module only
awaits ``client.chat.completions.create`` and the chunks (:mod:`.upstream_body`: blank
``data:`` keep-alives skipped, a JSON answer read as one chunk), and feeds a chunk whose
close costs more than the event loop should pay on a worker thread
(:mod:`.feed_placement`). Every wait for a chunk runs
under a timeout (the idle timeout, bounded by what is left of the total one: a
:class:`~.read_deadline.ReadDeadline`, one timer per stream). Cancelling the task that reads closes the upstream response, then the
``CancelledError`` propagates.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Awaitable, Mapping, Sequence
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
from .feed_placement import FeedPlacement, default_workers
from .flow import END, Emit, Feed, Read, Request, Wait, pass_flow
from .read_deadline import ReadDeadline
from .request import GrammarBackend, Output, PromptPlacement, StreamOptions
from .upstream_body import achunks, body_limit
from .upstream_errors import UPSTREAM_ERRORS
from .usage import Usage
from .workers import Workers

__all__ = ["AsyncSlotStream", "acomplete", "astream"]

T = TypeVar("T")
R = TypeVar("R")
M = TypeVar("M", bound=BaseModel)


class AsyncSlotStream(Generic[T]):
    """A running structured-output stream (async). Iterate it for events; await
    :meth:`final` for the validated object. Leaving ``async with`` closes the upstream.

    A chunk that closes a large value, and every chunk once one cost more than a few
    milliseconds of CPU, is fed on a thread of ``workers`` (by default a pool of four
    that the process's async streams share), so that validating the value and running
    its slot checks, custom ones included, do not hold the event loop: see
    :mod:`~slotflight.client.feed_placement`. One stream's feeds run one at a time;
    reading its state meanwhile (:attr:`state`, :meth:`completed` …, from another task)
    waits for the feed to end, so it never sees a value half applied.
    """

    def __init__(
        self, client: openai.AsyncOpenAI, core: StreamCore, workers: Workers | None = None
    ) -> None:
        self._client = client
        self._requests = core.request_client(client)
        self._core = core
        self._events: AsyncGenerator[Event, None] | None = None
        self._upstream: openai.AsyncStream[Any] | None = None
        self._chunks: Any = None  # what _read reads: the upstream, or its JSON answer
        self._body_limit = body_limit(core.options.limits)
        self._closed = False
        self._closing = asyncio.Event()  # set by close(): ends a wait before a retry
        self._reading = False  # a task is inside __anext__ (close() may come from another)
        self._read_deadline = ReadDeadline()
        self._feeds = FeedPlacement(default_workers() if workers is None else workers)

    # -- reading -------------------------------------------------------------------------

    @property
    def plan(self) -> SlotPlan:
        return self._core.plan

    @property
    def state(self) -> Any:
        """A snapshot of the object so far (valid JSON after every event)."""
        with self._feeds.lock:
            return self._core.assembler.state

    def completed(self) -> dict[str, Any]:
        """Only the validated slot values so far, by JSON Pointer."""
        with self._feeds.lock:
            return self._core.assembler.completed()

    def flagged(self) -> dict[str, ErrorDetail]:
        """Values kept although a slot check failed on them again on their retry
        (``on_check_failure="accept"``), by JSON Pointer: the check's ``code`` and
        ``message`` (its reason). Empty when every value passed its checks."""
        with self._feeds.lock:
            return self._core.assembler.flagged()

    def confidence(self) -> dict[str, float]:
        """The confidence of each validated value, by JSON Pointer: in ``[0, 1]``, the
        probability the model gave the tokens that wrote it (their product). Only with
        ``confidence=True`` and a server that returned token logprobs; a value whose
        tokens are missing or do not match the text has none (never invented)."""
        with self._feeds.lock:
            return self._core.assembler.confidence()

    @property
    def attempt(self) -> int:
        """The current attempt (1 for the first request, 2 for the first follow-up …)."""
        return self._core.assembler.attempt

    @property
    def usage(self) -> Usage:
        """Token usage per request made, and the total."""
        with self._feeds.lock:
            return self._core.usage

    @property
    def closed(self) -> bool:
        return self._closed

    # -- iteration -----------------------------------------------------------------------

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> Event:
        if self._closed:
            raise StreamClosed("the stream is closed")
        if self._events is None:
            self._events = self._run()
        self._reading = True
        try:
            return await anext(self._events)
        finally:
            self._reading = False

    async def final(self) -> T:
        """Read the rest of the stream and return the validated object.

        Raises :class:`~slotflight.OutputValidationError` when slots still fail after
        the last attempt, a :class:`~slotflight.TransportError` when the server could not
        be used, :class:`~slotflight.StreamClosed` when the stream was closed first.
        """
        if not self._closed:
            async for _ in self:
                pass
        result: T = self._core.result()
        return result

    async def close(self) -> None:
        """Stop now: close the upstream HTTP response. Idempotent."""
        self._closed = True
        self._closing.set()
        events, self._events = self._events, None
        try:
            if events is not None and not self._reading:
                await events.aclose()
        finally:
            await self._close_upstream()

    async def aclose(self) -> None:
        """Alias of :meth:`close`."""
        await self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # -- I/O -----------------------------------------------------------------------------

    async def _close_upstream(self) -> None:
        self._read_deadline.close()
        self._chunks = None
        upstream, self._upstream = self._upstream, None
        if upstream is not None:
            await upstream.close()

    async def _run(self) -> AsyncGenerator[Event, None]:
        """Drive :func:`~.flow.pass_flow` with awaited I/O, each wait under
        a timeout (``asyncio.timeout`` for the request, the stream's
        :class:`~.read_deadline.ReadDeadline` for each chunk); however it ends, the
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
                    for event in command.events:
                        yield event
                elif isinstance(command, Request):
                    reply = await self._request(command)
                elif isinstance(command, Read):
                    reply = await self._read(command)
                elif isinstance(command, Feed):
                    reply = await self._feeds.feed(command)
                elif isinstance(command, Wait):
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(command.seconds):
                            await self._closing.wait()
                    if self._closed:
                        raise StreamClosed("the stream was closed before a request was retried")
                else:
                    self._feeds.pass_over()
                    await self._close_upstream()
                    if self._closed:
                        raise StreamClosed("the stream was closed while reading")
        finally:
            await self._close_upstream()
        if self._core.error is not None:
            raise self._core.error

    async def _request(self, command: Request) -> BaseException | None:
        """Send the request; ``None``, or the exception it raised."""
        try:
            async with asyncio.timeout(command.wait) as deadline:
                upstream = await self._unless_closed(
                    self._requests.chat.completions.create(**command.kwargs)
                )
                self._upstream = upstream
                self._chunks = achunks(upstream, self._body_limit)
        except TimeoutError as exc:
            if not deadline.expired():
                raise
            return exc
        except UPSTREAM_ERRORS as exc:
            if self._closed:
                raise StreamClosed("the stream was closed during the request") from exc
            return exc
        if self._closed:  # close() came from another task while the request was sent
            await self._close_upstream()
            await upstream.close()
            raise StreamClosed("the stream was closed during the request")
        return None

    async def _unless_closed(self, request: Awaitable[R]) -> R:
        """Await ``request`` unless close() comes first: then cancel it, which closes the
        HTTP request still waiting for its response headers (else it would stay open,
        and the reader waiting, until the server answers), and raise StreamClosed."""
        task = asyncio.ensure_future(request)
        closing = asyncio.ensure_future(self._closing.wait())
        try:
            await asyncio.wait((task, closing), return_when=asyncio.FIRST_COMPLETED)
        finally:
            closing.cancel()
            if not task.done():
                task.cancel()
                # wait() does not raise the task's cancellation, only this task's own
                await asyncio.wait((task,))
        if task.cancelled():
            raise StreamClosed("the stream was closed during the request")
        return task.result()

    async def _read(self, command: Read) -> Any:
        """The next chunk, :data:`~.flow.END`, or the exception reading raised."""
        upstream = self._upstream
        if upstream is None:  # close() came from another task while a chunk was fed
            raise StreamClosed("the stream was closed while reading")
        waiting = self._read_deadline
        try:
            with waiting.within(command.wait):
                return await anext(self._chunks)
        except StopAsyncIteration:
            return END
        except TimeoutError as exc:
            if not waiting.expired():
                raise
            return exc
        except UPSTREAM_ERRORS as exc:
            if self._closed:
                raise StreamClosed("the stream was closed while reading") from exc
            return exc


@overload
def astream(
    client: openai.AsyncOpenAI,
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
) -> AsyncSlotStream[M]: ...


@overload
def astream(
    client: openai.AsyncOpenAI,
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
) -> AsyncSlotStream[Any]: ...


def astream(
    client: openai.AsyncOpenAI,
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
) -> AsyncSlotStream[Any]:
    """Stream ``output`` from a chat-completion model as validated slots (async).

    Nothing is sent until the stream is iterated (or :meth:`AsyncSlotStream.final`
    awaited). Every keyword not listed here goes through to
    ``client.chat.completions.create``. See ``docs/sdk.md``.
    """
    if isinstance(client, openai.OpenAI):
        raise TypeError("astream() needs an openai.AsyncOpenAI client; use stream() for OpenAI")
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
    return AsyncSlotStream(client, core)


@overload
async def acomplete(
    client: openai.AsyncOpenAI,
    *,
    model: str,
    messages: Sequence[Mapping[str, Any]],
    output: type[M],
    **options: Any,
) -> M: ...


@overload
async def acomplete(
    client: openai.AsyncOpenAI,
    *,
    model: str,
    messages: Sequence[Mapping[str, Any]],
    output: Mapping[str, Any] | SlotPlan,
    **options: Any,
) -> Any: ...


async def acomplete(
    client: openai.AsyncOpenAI,
    *,
    model: str,
    messages: Sequence[Mapping[str, Any]],
    output: Output,
    **options: Any,
) -> Any:
    """:func:`astream` and :meth:`AsyncSlotStream.final` in one call."""
    async with astream(client, model=model, messages=messages, output=output, **options) as s:
        return await s.final()
