"""Event stores: where a stream's messages wait for the clients that read them.

A producer appends each message of a stream with its per-stream sequence number (the
SSE ``id``: 1, 2, 3 …). Readers :meth:`EventStore.follow` a stream from the id they
last saw (``Last-Event-ID``): first what they missed, then live, until the terminal
``done`` or ``error`` message. Streams are kept for a retention window after their
last message, so a client that lost its connection can come back, to this process or,
with a shared store, to another one.

Readers also say that they are there (:meth:`EventStore.touch`); a producer whose
stream nobody has watched for a grace period is stopped (see ``_hub``).

Producers hold a lease: each stream names the instance producing it, and that
instance renews its lease (:meth:`EventStore.heartbeat`). A reader that waits on a
stream whose producer's lease lapsed before its terminal message (the instance died)
ends it with an ``error`` message ``producer_lost``, stored as the stream's last
message, so every reader, here or on another instance, gets it.

A store that cannot be reached (Redis down) raises :class:`StoreUnavailable` from every
method: the gateway answers ``503`` to new requests and ends the streams it serves with
an ``error`` message ``store_unavailable``.
"""

from __future__ import annotations

import abc
import asyncio
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Final

from .._errors import SlotflightError
from ._encode import TERMINAL_TYPES, error_message

__all__ = [
    "IDLE_CHECK_S",
    "EventStore",
    "EventStoreFull",
    "StoreUnavailable",
    "StoredEvent",
    "StreamTail",
    "beyond_event",
    "beyond_message",
    "expired_event",
    "gap_event",
    "lost_message",
]

#: How often a waiting reader checks the producer's lease (and whether to stop), in s.
IDLE_CHECK_S: Final = 1.0


class EventStoreFull(SlotflightError):
    """The store holds as many live streams as it may; no new one can start now."""

    code = "too_many_streams"


class StoreUnavailable(SlotflightError):
    """The store cannot be reached (its server is down or does not answer in time)."""

    code = "store_unavailable"

    def __init__(self, message: str = "the event store cannot be reached") -> None:
        super().__init__(message)


@dataclass(frozen=True, slots=True)
class StoredEvent:
    """One message of a stream: SSE ``id`` (``None``: a notice with no id), ``event``
    name and ``data`` JSON text."""

    id: int | None
    event: str
    data: str

    @property
    def terminal(self) -> bool:
        return self.event in TERMINAL_TYPES


@dataclass(frozen=True, slots=True)
class StreamTail:
    """Where a retained stream stands: the id of its last stored message (0: none yet)
    and whether that message is its terminal one (``finished``: nothing follows it)."""

    last: int
    finished: bool


def gap_event(after: int, first: int) -> StoredEvent:
    """The ``error`` a reader gets when the messages after ``after`` were trimmed."""
    wire = error_message(
        "resume_gap",
        f"messages {after + 1}..{first - 1} of this stream are no longer retained;"
        " start a new stream",
    )
    return StoredEvent(None, wire.event, wire.data)


def beyond_message(after: int, last: int) -> str:
    """Why a resume after ``after`` is refused when the stream's last id is ``last``."""
    return (
        f"message {after} was never sent on this stream (its last so far is {last});"
        " resume from an id it sent, or start a new stream"
    )


def beyond_event(after: int, last: int) -> StoredEvent:
    """The ``error`` (``invalid_last_event_id``) a reader gets when ``after`` is beyond
    the stream's last message: every message a client got was stored first, so no
    client can have seen that id, and waiting for it would skip the messages up to it
    (or, once the stream ended, send nothing, which an ``EventSource`` answers by
    reconnecting forever)."""
    wire = error_message("invalid_last_event_id", beyond_message(after, last))
    return StoredEvent(None, wire.event, wire.data)


def expired_event() -> StoredEvent:
    """The ``error`` a reader gets when the stream left the store while it waited."""
    wire = error_message("stream_expired", "the stream is no longer retained")
    return StoredEvent(None, wire.event, wire.data)


def lost_message() -> str:
    """The data of the ``error`` that ends a stream whose producer is gone."""
    return error_message(
        "producer_lost", "the instance producing this stream stopped without ending it"
    ).data


class EventStore(abc.ABC):
    """Where streams' messages are kept for their retention window."""

    @abc.abstractmethod
    async def create(self, stream_id: str, producer: str = "") -> None:
        """Register a new stream (no messages yet), produced by instance ``producer``
        (empty: no lease is checked). Raises :class:`EventStoreFull`."""

    @abc.abstractmethod
    async def append(self, stream_id: str, event: StoredEvent) -> None:
        """Add the next message; ``event.id`` is one more than the previous one's."""

    @abc.abstractmethod
    async def end(self, stream_id: str, data: str) -> bool:
        """Store an ``error`` message with ``data`` as the stream's last one, with the
        next id, unless it has ended already or is no longer retained. Whether it did."""

    @abc.abstractmethod
    async def exists(self, stream_id: str) -> bool:
        """Whether the stream is retained (created, not yet expired)."""

    @abc.abstractmethod
    def follow(
        self,
        stream_id: str,
        after: int = 0,
        stop: asyncio.Event | None = None,
        *,
        checked: bool = False,
    ) -> AsyncGenerator[StoredEvent, None]:
        """Messages with an id above ``after``: the retained ones, then live ones, up to
        and including the terminal message. Ends with an id-less ``error`` message when
        messages after ``after`` were trimmed (``resume_gap``), the stream expired
        (``stream_expired``), or ``after`` is beyond its last message, finished or not
        (``invalid_last_event_id``: see :func:`beyond_event`; ``checked``: the caller
        found ``after`` at most :meth:`last_id`, so it is not read again). While
        waiting, every :data:`IDLE_CHECK_S` it checks the producer's lease (a lapsed one
        stores the ``producer_lost`` terminal message, then read like any other) and
        ``stop``: once that is set, it returns. From a finished stream's terminal
        message it yields nothing, without waiting."""

    async def last_id(self, stream_id: str) -> int | None:
        """The id of the stream's last stored message (0: none yet), so a resume beyond
        it can be refused before the response starts; ``None`` when the stream is not
        retained or the store cannot tell (then :meth:`exists` and :meth:`follow` tell).
        Ids only grow: an ``after`` found at most this id stays so."""
        return None

    async def tail(self, stream_id: str) -> StreamTail | None:
        """:meth:`last_id` and whether the stream has finished, read together (one round
        trip on a shared store), so that a resume at a finished stream's terminal
        message, which has nothing to send, is answered before the response starts.
        ``finished`` is read no later than the id: once set, that id is the terminal
        message's. By default from :meth:`last_id`, never finished."""
        last = await self.last_id(stream_id)
        return None if last is None else StreamTail(last, False)

    @abc.abstractmethod
    async def heartbeat(self, producer: str, seconds: float) -> None:
        """Instance ``producer`` is alive: its lease lasts ``seconds`` from now."""

    @abc.abstractmethod
    async def touch(self, stream_id: str, seconds: float) -> None:
        """A reader is attached: count the stream as watched for ``seconds``."""

    @abc.abstractmethod
    async def watched(self, stream_id: str) -> bool:
        """Whether a reader touched the stream within its last touch's window."""

    async def ping(self) -> None:  # noqa: B027 - a store in this process is always there
        """Raise :class:`StoreUnavailable` when the store cannot be reached now."""

    async def aclose(self) -> None:  # noqa: B027 - optional for stores without resources
        """Release connections."""
