"""Slot streams over HTTP: an SSE route helper, event stores and the gateway.

- :func:`slot_event_response`: one call turns a slot stream (``astream(...)``) into a
  Starlette/FastAPI ``EventSourceResponse``.
- :class:`MemoryEventStore`, :class:`RedisEventStore`: where streams are kept so that
  clients can resume with ``Last-Event-ID``, on any instance sharing the store.
- :func:`create_app`, :func:`serve`: the ``slotflight serve`` gateway and its page.

Needs the ``server`` extra (Starlette, sse-starlette, uvicorn, redis). See ``docs/web.md``.
"""

from __future__ import annotations

from ._cli import add_serve_arguments, run_serve
from ._encode import (
    DEFAULT_COALESCE_MS,
    FULL_MODE_MIN_COALESCE_MS,
    StateMirror,
    StateMode,
    WireEvent,
    encode_events,
)
from ._gateway import create_app, serve
from ._memory_store import MemoryEventStore
from ._redis_store import RedisEventStore
from ._request import RequestLimits
from ._sse import slot_event_response, stored_event_response
from ._store import EventStore, EventStoreFull, StoredEvent, StoreUnavailable, StreamTail

__all__ = [
    "DEFAULT_COALESCE_MS",
    "FULL_MODE_MIN_COALESCE_MS",
    "EventStore",
    "EventStoreFull",
    "MemoryEventStore",
    "RedisEventStore",
    "RequestLimits",
    "StateMirror",
    "StateMode",
    "StoreUnavailable",
    "StoredEvent",
    "StreamTail",
    "WireEvent",
    "add_serve_arguments",
    "create_app",
    "encode_events",
    "run_serve",
    "serve",
    "slot_event_response",
    "stored_event_response",
]
