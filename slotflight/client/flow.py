"""The request → read → regenerate flow of one stream, written once, without I/O.

:func:`pass_flow` is a generator that tells its driver what to do next and is sent
the outcome, in the manner of ``httpx.Auth.auth_flow``::

    flow = pass_flow(core)
    reply = None
    while True:
        command = flow.send(reply)        # StopIteration: the stream is over
        reply = None
        if isinstance(command, Request):  # create(**command.kwargs); reply: an
            ...                           # exception if it failed
        elif isinstance(command, Read):   # the next chunk, END, or an exception
            ...
        elif isinstance(command, Feed):   # reply: command.feed(), here or on a thread
            ...
        elif isinstance(command, Release):  # close the upstream response
            ...
        elif isinstance(command, Wait):   # sleep command.seconds (a request's retry)
            ...
        else:                             # Emit: hand command.events to the user
            ...

The sync and async streams (:mod:`.sync_stream`, :mod:`.async_stream`) are such
drivers; so is the benchmark's recorder. A driver sends exceptions as they are: the
``openai`` ones of ``create`` and of reading, and :class:`TimeoutError` when a wait
it bounded by :attr:`Request.wait` / :attr:`Read.wait` ran out. Everything else
(what a chunk means, when to stop reading, what a failure ends, whether to
regenerate) is decided here and in :class:`~.core.StreamCore`.

Feeding a chunk to the core is the one step whose CPU cost the model's output chooses
(closing a value validates it and runs its slot checks, O(value)): the flow hands it
to the driver as a :class:`Feed`, so that an async driver can run a costly one off its
event loop (:mod:`.feed_placement`). The flow waits for its reply before its next
command, so the core is touched by one thread at a time.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import Any, Final

from ..assemble.events import Event
from .core import StreamCore
from .upstream_errors import is_interruption

__all__ = ["END", "Command", "Emit", "Feed", "Read", "Release", "Request", "Wait", "pass_flow"]


class _End:
    def __repr__(self) -> str:
        return "END"


#: Sent back for a :class:`Read` when the upstream response has no more chunks.
END: Final = _End()


@dataclass(frozen=True, slots=True)
class Request:
    """Send ``client.chat.completions.create(**kwargs)`` (streaming), waiting at most
    ``wait`` seconds (``None``: no bound) for the response to start."""

    kwargs: dict[str, Any]
    wait: float | None


@dataclass(frozen=True, slots=True)
class Read:
    """Read the next chunk of the open response, waiting at most ``wait`` seconds."""

    wait: float | None


@dataclass(frozen=True, slots=True)
class Feed:
    """Feed ``chunk`` (just read) to the stream core: reply with what :meth:`feed`
    returns, run on this thread or another one (pure CPU; it never raises for what a
    chunk holds)."""

    core: StreamCore
    chunk: Any

    def feed(self) -> list[Event]:
        """The events of the chunk (:meth:`StreamCore.on_chunk`)."""
        return self.core.on_chunk(self.chunk)


@dataclass(frozen=True, slots=True)
class Release:
    """Close the open response (the pass is over, or reading stopped early)."""


@dataclass(frozen=True, slots=True)
class Wait:
    """Wait ``seconds`` before the next command: the delay before a failed request is
    sent again. Closing the stream ends the wait (the driver raises
    :class:`~slotflight.StreamClosed`)."""

    seconds: float


@dataclass(frozen=True, slots=True)
class Emit:
    """Hand these events to the user, in order."""

    events: Sequence[Event]


Command = Request | Read | Feed | Release | Wait | Emit

#: What :func:`_open` returns when the total timeout ran out while it waited.
_EXPIRED: Final = object()


def pass_flow(core: StreamCore) -> Generator[Command, Any, None]:
    """The passes of one stream (see the module docs). When the generator ends, the
    stream is over: :meth:`StreamCore.result` has the object or the error."""
    while (kwargs := core.next_request()) is not None:
        opened = yield from _open(core, kwargs)
        if opened is _EXPIRED:
            break
        if isinstance(opened, BaseException):
            yield Emit(_failed(core, opened, during="the request"))
            break
        failure: list[Event] = []
        dropped: BaseException | None = None
        while True:
            chunk = yield Read(core.wait_limit())
            if chunk is END:
                break
            if isinstance(chunk, BaseException):
                if is_interruption(chunk):  # a drop, or a transient error event
                    dropped = chunk
                else:
                    failure = _failed(core, chunk, during="the stream")
                break
            yield Emit((yield Feed(core, chunk)))
            if core.stop_reading:
                break
            if core.expired():
                failure = core.fail(core.timeout_error(cause=None))
                break
        yield Release()
        if failure:
            yield Emit(failure)
            break
        yield Emit(core.end_pass(dropped))
    yield Emit(core.pending_events())


def _open(core: StreamCore, kwargs: dict[str, Any]) -> Generator[Command, Any, Any]:
    """Send a pass's request, and again after a wait while its failure may be retried
    (:meth:`StreamCore.request_retry_wait`); the last outcome (``None``: the response
    is open; an exception), or :data:`_EXPIRED`."""
    while True:
        opened = yield Request(kwargs, core.remaining())
        if not isinstance(opened, BaseException):
            return opened
        delay = core.request_retry_wait(opened)
        if delay is None:
            return opened
        yield Wait(delay)
        again = core.retry_request(kwargs)
        if again is None:
            return _EXPIRED
        kwargs = again


def _failed(core: StreamCore, exc: BaseException, *, during: str) -> list[Event]:
    if isinstance(exc, TimeoutError):
        return core.fail(core.timeout_error(cause=None))
    if not isinstance(exc, Exception):
        raise exc
    return core.request_failed(exc, during=during)
