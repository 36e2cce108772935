"""Slot events to wire messages: state mode, coalescing, and a terminal event always.

:func:`encode_events` reads a slot stream (any async iterable of
:class:`~slotflight.assemble.events.Event`) and yields :class:`WireEvent` s, the SSE
``event:`` name and ``data:`` JSON of each message, ready for a response or an event
store. It keeps a :class:`StateMirror` of the object, so no event asks the stream for
a snapshot.

- ``state_mode="patch"`` (lean, O(n) bytes in all): a ``slot-delta`` carries ``delta``,
  the text appended to the string at ``path``; other messages carry ``patch``, RFC 6902
  operations from the previous state. Nothing is sent twice: a ``slot-complete`` for a
  string its deltas already built carries neither ``value`` nor ``patch``. ``done`` and
  ``error`` carry ``state``, the whole object; so does a ``slot-complete`` once the
  stream has sent at least twice the last snapshot's bytes since it (the first
  ``slot-complete`` always does), so snapshots stay a bounded share of the stream.
- ``state_mode="full"`` (the shape slot-flight clients know, O(n²) bytes): every
  message carries ``state``, the whole object after it, and a ``slot-delta`` also
  ``value``, the whole string so far.
- ``coalesce_ms=N``: at most one ``slot-delta`` per N ms. A delta arriving sooner is
  held and merged with the next deltas of the same slot; a held delta is sent when
  the window ends, or before any other event (nothing is reordered or dropped).
- The last message is always ``done`` or ``error``: an exception in the stream, or a
  stream that ends without a terminal event, becomes an ``error`` message. A
  ``pass-failed`` (one request stopped; the stream may still recover) passes through.

Per event the work is O(size of the event) in ``patch`` mode, plus O(state) for each
snapshot; ``full`` mode adds O(state) to every message.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

import jsonpatch
import jsonpointer
import pydantic_core

from .._errors import SlotflightError
from ..assemble.events import Event, SlotDelta

__all__ = [
    "DEFAULT_COALESCE_MS",
    "TERMINAL_TYPES",
    "StateMirror",
    "StateMode",
    "WireEvent",
    "close_source",
    "encode_events",
    "wire_json",
]

StateMode = Literal["full", "patch"]

#: Event types after which a stream sends nothing more.
TERMINAL_TYPES: Final = frozenset({"done", "error"})

#: The coalescing window of the route helper and the gateway, in milliseconds: at most
#: 20 ``slot-delta`` messages per second and stream, at most 50 ms added to a delta.
DEFAULT_COALESCE_MS: Final = 50

#: A ``slot-complete`` carries ``state`` once this many times the last snapshot's
#: bytes were sent since it.
_SNAPSHOT_SPACING: Final = 2

_logger = logging.getLogger("slotflight.web")


def wire_json(value: Any) -> str:
    """Compact JSON text of ``value``, UTF-8 characters kept; dates, enums and UUIDs
    as strings, non-finite numbers as ``null``. Text with lone surrogates (which UTF-8
    cannot carry) is written with ASCII escapes instead. O(size)."""
    try:
        return pydantic_core.to_json(value, fallback=str, inf_nan_mode="null").decode()
    except pydantic_core.PydanticSerializationError:
        plain = pydantic_core.to_jsonable_python(value, fallback=str, inf_nan_mode="null")
        return json.dumps(plain, ensure_ascii=True, separators=(",", ":"))


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
    return WireEvent(
        "error", wire_json({"type": "error", "error": {"code": code, "message": message}})
    )


class StateMirror:
    """The object as a client rebuilds it from messages, at O(delta) per ``slot-delta``.

    :meth:`apply` takes one message's data (patch mode: ``patch`` operations, or a
    ``slot-delta``'s ``delta`` appended to the string at ``path``). Appended text is
    kept as parts and joined into the object only when something reads it
    (:meth:`value`, :attr:`state`) or an operation is applied, so a string of n
    characters costs O(n) to build however it was split.
    """

    __slots__ = ("_pending", "_state")

    def __init__(self) -> None:
        self._state: dict[str, Any] = {}
        self._pending: dict[str, list[str]] = {}

    @property
    def state(self) -> dict[str, Any]:
        """The object so far (the mirror's own dict: copy it before changing it)."""
        self._join()
        return self._state

    def apply(self, message: Mapping[str, Any]) -> None:
        """Apply one message's change (``delta`` of a ``slot-delta``, else ``patch``)."""
        if message.get("type") == "slot-delta":
            self.append(str(message["path"]), str(message.get("delta", "")))
        elif message.get("patch"):
            self.patch(message["patch"])

    def append(self, path: str, text: str) -> None:
        """Append ``text`` to the string at ``path`` (joined when next read)."""
        if text:
            self._pending.setdefault(path, []).append(text)

    def patch(self, ops: list[dict[str, Any]]) -> None:
        """Apply RFC 6902 operations."""
        if ops:
            self._join()
            self._state = jsonpatch.apply_patch(self._state, ops, in_place=True)

    def value(self, path: str) -> Any:
        """The value at JSON Pointer ``path`` (``None`` when absent)."""
        self._join()
        return jsonpointer.resolve_pointer(self._state, path, None)

    def _join(self) -> None:
        for path, parts in self._pending.items():
            parent, key = jsonpointer.JsonPointer(path).to_last(self._state)
            parent[key] = parent[key] + "".join(parts)
        self._pending.clear()


class _Encoder:
    """Turns events into messages, keeping the state mirror and the snapshot budget."""

    def __init__(self, state_mode: StateMode) -> None:
        self.full = state_mode == "full"
        self.mirror = StateMirror()
        self.sent_since_snapshot = 0
        self.last_snapshot = 0
        self.snapshots = 0

    def delta(self, event: SlotDelta) -> None:
        self.mirror.append(event.path, event.delta)

    def deltas(self, first: SlotDelta, text: str) -> WireEvent:
        """One ``slot-delta`` message for ``first`` and the deltas merged into it."""
        data = first.to_json()
        data["delta"] = text
        if self.full:
            data["value"] = self.mirror.value(first.path)
        return self._send(data)

    def event(self, event: Event) -> WireEvent:
        ops = event.patch
        data = event.to_json(patch=False)
        kind = event.type
        if self.full:
            self.mirror.patch(ops)
            return self._send(data)
        if kind == "slot-complete":
            ops = self._changes(ops, data)
        self.mirror.patch(ops)
        if ops:
            data["patch"] = ops
        snapshot = kind in TERMINAL_TYPES or (
            kind == "slot-complete"
            and (
                self.snapshots == 0
                or self.sent_since_snapshot >= _SNAPSHOT_SPACING * self.last_snapshot
            )
        )
        if kind == "done":
            data.pop("value", None)  # the final state, sent as ``state``
        return self._send(data, snapshot=snapshot)

    def failure(self, code: str, message: str) -> WireEvent:
        return self._send(
            {"type": "error", "error": {"code": code, "message": message}}, snapshot=True
        )

    def _changes(self, ops: list[dict[str, Any]], data: dict[str, Any]) -> list[dict[str, Any]]:
        """``ops`` less a ``replace`` of the slot's string by the text its deltas built
        (O(length) once per slot); ``value`` is then left out of ``data`` too."""
        path = data.get("path")
        kept = []
        for op in ops:
            value = op.get("value")
            if (
                op.get("op") == "replace"
                and op.get("path") == path
                and isinstance(value, str)
                and self.mirror.value(op["path"]) == value
            ):
                data.pop("value", None)
                continue
            kept.append(op)
        return kept

    def _send(self, data: dict[str, Any], *, snapshot: bool = False) -> WireEvent:
        if self.full or snapshot:
            state = wire_json(self.mirror.state)
            body = wire_json(data)
            text = f'{body[:-1]},"state":{state}}}'
            if not self.full:
                self.snapshots += 1
                self.last_snapshot = len(state)
                self.sent_since_snapshot = 0
        else:
            text = wire_json(data)
            self.sent_since_snapshot += len(text)
        return WireEvent(str(data["type"]), text)


class _HeldDelta:
    """A ``slot-delta`` held back by coalescing, merged with later ones of its slot."""

    __slots__ = ("first", "parts")

    def __init__(self, event: SlotDelta) -> None:
        self.first = event
        self.parts = [event.delta]

    def same_slot(self, event: SlotDelta) -> bool:
        return event.path == self.first.path and event.attempt == self.first.attempt

    def text(self) -> str:
        return "".join(self.parts)


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
    state_mode: StateMode = "patch",
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
                    yield encoder.deltas(held.first, held.text())
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
            if isinstance(event, SlotDelta):
                if held is not None and held.same_slot(event):
                    encoder.delta(event)
                    held.parts.append(event.delta)
                    continue
                if held is not None:
                    yield encoder.deltas(held.first, held.text())
                    held = None
                    last_delta_at = time.monotonic()
                encoder.delta(event)
                if time.monotonic() - last_delta_at < window:
                    held = _HeldDelta(event)
                    continue
                last_delta_at = time.monotonic()
                yield encoder.deltas(event, event.delta)
                continue
            if held is not None:
                yield encoder.deltas(held.first, held.text())
                held = None
            yield encoder.event(event)
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
        yield encoder.deltas(held.first, held.text())
    yield encoder.failure(code, message)
