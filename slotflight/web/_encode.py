"""Slot events to wire messages: state mode, coalescing, and a terminal event always.

:func:`encode_events` reads a slot stream (any async iterable of
:class:`~slotflight.assemble.events.Event`) and yields :class:`WireEvent` s, the SSE
``event:`` name and ``data:`` JSON of each message, ready for a response or an event
store. It keeps a mirror of the object state by applying each event's RFC 6902
patch, so no event asks the stream for a snapshot.

- ``state_mode="full"``: every message carries ``state`` (the object after it).
- ``state_mode="patch"``: messages carry ``patch``; ``slot-complete``, ``done`` and
  ``error`` also carry ``state``, so a client can resynchronise at those points.
  ``slot-delta`` messages leave out ``value`` (their patch holds it).
- ``coalesce_ms=N``: at most one ``slot-delta`` per N ms. A delta arriving sooner is
  held and merged with the next deltas of the same slot; a held delta is sent when
  the window ends, or before any other event (nothing is reordered or dropped).
- The last message is always ``done`` or ``error``: an exception in the stream, or a
  stream that ends without a terminal event, becomes an ``error`` message.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterable
from dataclasses import dataclass
from typing import Any, Final, Literal

import jsonpatch

from .._errors import SlotflightError
from .._jsonable import dumps
from ..assemble.events import Event

__all__ = ["TERMINAL_TYPES", "StateMode", "WireEvent", "close_source", "encode_events"]

StateMode = Literal["full", "patch"]

#: Event types after which a stream sends nothing more.
TERMINAL_TYPES: Final = frozenset({"done", "error"})

#: Event types that carry ``state`` in ``patch`` mode.
_STATE_IN_PATCH_MODE: Final = frozenset({"slot-complete", "done", "error"})

_logger = logging.getLogger("slotflight.web")


@dataclass(frozen=True, slots=True)
class WireEvent:
    """One SSE message before it gets its id: the ``event:`` name and ``data:`` JSON."""

    event: str
    data: str

    @property
    def terminal(self) -> bool:
        return self.event in TERMINAL_TYPES


def error_message(code: str, message: str) -> WireEvent:
    """An ``error`` message with this code and text."""
    return WireEvent("error", dumps({"type": "error", "error": {"code": code, "message": message}}))


class _Encoder:
    """Turns events into message dicts, keeping the state mirror."""

    def __init__(self, state_mode: StateMode) -> None:
        self.state_mode = state_mode
        self.state: dict[str, Any] = {}

    def encode(self, event: Event) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """The message dict of ``event`` (state not yet attached) and its patch."""
        ops = event.patch
        if ops:
            self.state = jsonpatch.apply_patch(self.state, ops, in_place=True)
        data = event.to_json(patch=False)
        if self.state_mode == "patch" and ops:
            data["patch"] = ops
        return data, ops

    def finish(self, data: dict[str, Any]) -> WireEvent:
        kind = str(data["type"])
        if self.state_mode == "full" or kind in _STATE_IN_PATCH_MODE:
            data["state"] = self.state
        elif kind == "slot-delta":
            # the patch already carries the value so far; sending it twice would double
            # the bytes of every delta
            data.pop("value", None)
        return WireEvent(kind, dumps(data))


class _HeldDelta:
    """A ``slot-delta`` held back by coalescing, merged with later ones of its slot."""

    def __init__(self, data: dict[str, Any], ops: list[dict[str, Any]]) -> None:
        self.data = data
        self.deltas = [str(data.get("delta", ""))]
        self.ops = list(ops)

    def same_slot(self, data: dict[str, Any]) -> bool:
        return data.get("path") == self.data.get("path") and data.get("attempt") == self.data.get(
            "attempt"
        )

    def merge(self, data: dict[str, Any], ops: list[dict[str, Any]]) -> None:
        self.deltas.append(str(data.get("delta", "")))
        self.data["value"] = data.get("value")
        for op in ops:
            last = self.ops[-1] if self.ops else None
            if (
                op.get("op") == "replace"
                and last is not None
                and last.get("path") == op.get("path")
                and last.get("op") in ("add", "replace")
            ):
                # A later replace of the same path supersedes the value just set.
                self.ops[-1] = {**last, "value": op.get("value")}
            else:
                self.ops.append(op)

    def message(self, state_mode: StateMode) -> dict[str, Any]:
        data = self.data
        data["delta"] = "".join(self.deltas)
        if state_mode == "patch" and self.ops:
            data["patch"] = self.ops
        return data


async def close_source(source: object) -> None:
    """Close a slot stream (``aclose()``, else ``close()``): ends its upstream request."""
    closer = getattr(source, "aclose", None) or getattr(source, "close", None)
    if closer is None:
        return
    result = closer()
    if asyncio.iscoroutine(result):
        await result


async def encode_events(
    source: AsyncIterable[Event],
    *,
    state_mode: StateMode = "full",
    coalesce_ms: float = 0,
) -> AsyncGenerator[WireEvent, None]:
    """The wire messages of ``source`` (see the module docs). Closes ``source`` at the
    end, also when the consumer stops early or is cancelled."""
    if state_mode not in ("full", "patch"):
        raise ValueError(f"state_mode must be 'full' or 'patch', got {state_mode!r}")
    if coalesce_ms < 0:
        raise ValueError(f"coalesce_ms must be >= 0, got {coalesce_ms!r}")
    encoder = _Encoder(state_mode)
    window = coalesce_ms / 1000.0
    iterator = aiter(source)
    held: _HeldDelta | None = None
    last_delta_at = -float("inf")
    pending: asyncio.Future[Event] | None = None  # a read that outlived a window
    try:
        while True:
            if held is not None:
                wait = last_delta_at + window - time.monotonic()
                if wait > 0:
                    if pending is None:
                        pending = asyncio.ensure_future(anext(iterator))
                    await asyncio.wait({pending}, timeout=wait)
                if pending is None or not pending.done():
                    yield encoder.finish(held.message(state_mode))
                    held = None
                    last_delta_at = time.monotonic()
                    continue
            try:
                event = await (pending if pending is not None else anext(iterator))
            except StopAsyncIteration:
                break
            finally:
                if pending is not None and pending.done():
                    pending = None
            data, ops = encoder.encode(event)
            if event.type == "slot-delta" and window > 0:
                if held is not None and held.same_slot(data):
                    held.merge(data, ops)
                    continue
                if held is not None:
                    yield encoder.finish(held.message(state_mode))
                    held = None
                    last_delta_at = time.monotonic()
                if time.monotonic() - last_delta_at < window:
                    held = _HeldDelta(data, ops)
                    continue
                last_delta_at = time.monotonic()
            elif held is not None:
                yield encoder.finish(held.message(state_mode))
                held = None
            yield encoder.finish(data)
            if event.type in TERMINAL_TYPES:
                return
        code, message = "incomplete", "the stream ended without a done or error event"
    except SlotflightError as exc:
        code, message = exc.code, exc.message
    except Exception as exc:
        _logger.exception("a slot stream failed")
        code, message = "internal_error", f"the stream failed: {type(exc).__name__}"
    finally:
        if pending is not None and not pending.done():
            pending.cancel()
            await asyncio.wait({pending})
        await close_source(source)
    if held is not None:
        yield encoder.finish(held.message(state_mode))
    yield encoder.finish({"type": "error", "error": {"code": code, "message": message}})
