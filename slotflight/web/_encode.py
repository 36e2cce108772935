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
  ``value``, the whole string so far. Its coalescing window is at least
  :data:`FULL_MODE_MIN_COALESCE_MS`: each message costs O(state), so its deltas are
  bounded by time, not by how finely the model's output is cut.
- ``coalesce_ms=N``: at most one ``slot-delta`` per N ms. A delta arriving sooner is
  held and merged with the next deltas of the same slot; a held delta is sent when
  the window ends, or before any other event (nothing is reordered or dropped).
- Diagnostics are coalesced the same way, always (at most one ``diagnostic`` message
  per ``max(coalesce_ms, 50)`` ms): a run of consecutive diagnostics becomes one
  message, the first one's fields plus ``count``, ``counts`` (per code) and
  ``last_offset``. A model writing noise thus costs a bounded number of messages per
  second, not one per noisy line.
- The last message is always ``done`` or ``error``: an exception in the stream, or a
  stream that ends without a terminal event, becomes an ``error`` message. A
  ``pass-failed`` (one request stopped; the stream may still recover) passes through.
- The model server's own error text never reaches the wire: an ``error`` of code
  ``upstream_status`` or ``transport_error`` gets a fixed message (with the HTTP
  status), so an upstream that echoes the API key or the request leaks neither.
- Every message is strict JSON: an event holding a non-finite number (which JSON cannot
  carry) ends the stream with ``internal_error`` instead of writing ``NaN`` or
  ``Infinity``; the state never takes it.

Per event the work is O(size of the event) in ``patch`` mode, plus O(state) for each
snapshot; ``full`` mode adds O(state) to every message, of which deltas are at most
1000 / :data:`FULL_MODE_MIN_COALESCE_MS` per second.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import re
import time
from collections import Counter, deque
from collections.abc import AsyncGenerator, AsyncIterable, AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

import anyio
import jsonpatch
import jsonpointer
import pydantic_core

from .._errors import SlotflightError
from ..assemble.events import Diagnostic, ErrorEvent, Event, SlotDelta

__all__ = [
    "DEFAULT_COALESCE_MS",
    "FULL_MODE_MIN_COALESCE_MS",
    "TERMINAL_TYPES",
    "NonFiniteNumber",
    "StateMirror",
    "StateMode",
    "WireEvent",
    "check_encoding",
    "check_finite",
    "close_source",
    "encode_events",
    "public_error",
    "wire_json",
]

StateMode = Literal["full", "patch"]

#: Event types after which a stream sends nothing more.
TERMINAL_TYPES: Final = frozenset({"done", "error"})

#: The coalescing window of the route helper and the gateway, in milliseconds: at most
#: 20 ``slot-delta`` messages per second and stream, at most 50 ms added to a delta.
DEFAULT_COALESCE_MS: Final = 50

#: The smallest coalescing window of ``state_mode="full"``, in milliseconds (a smaller
#: ``coalesce_ms`` is raised to it): every full-mode message carries the whole object,
#: so one per upstream chunk would cost O(n²) in bytes and CPU; at most 20 full-mode
#: ``slot-delta`` messages per second and stream cost O(state) each.
FULL_MODE_MIN_COALESCE_MS: Final = 50

#: A ``slot-complete`` carries ``state`` once this many times the last snapshot's
#: bytes were sent since it.
_SNAPSHOT_SPACING: Final = 2

#: Seconds each step of closing a stream (the reader task, then the source) may take
#: once its consumer stopped or was cancelled; past it the step is given up.
CLOSE_TIMEOUT_S: Final = 5.0

#: How many messages the reader of a stream gets ahead of their consumer at most.
READ_AHEAD: Final = 64

_logger = logging.getLogger("slotflight.web")


#: Error codes whose message comes from the model server (see :func:`public_error`).
_UPSTREAM_CODES: Final = frozenset({"upstream_status", "transport_error"})
_UPSTREAM_STATUS = re.compile(r"the model server answered HTTP (\d{3})\b")
#: The status an error object inside the stream gave (``upstream_status`` only: the SDK
#: writes it after the server's text, so that text cannot forge it).
_STREAM_STATUS = re.compile(r"\(code (\d{3})\)\Z")


class NonFiniteNumber(ValueError):
    """A value holds ``NaN`` or an infinity, which JSON cannot carry."""


def check_finite(value: Any) -> None:
    """Raise :class:`NonFiniteNumber` when ``value`` holds ``NaN`` or an infinity.

    O(nodes): a string counts once whatever its length."""
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, float):
            if not math.isfinite(node):
                raise NonFiniteNumber(f"{node!r} is not a JSON number")
        elif isinstance(node, dict):
            stack.extend(node.values())
        elif isinstance(node, list | tuple):
            stack.extend(node)


def wire_json(value: Any) -> str:
    """Compact JSON text of ``value``, UTF-8 characters kept; dates, enums and UUIDs
    as strings, non-finite numbers as ``null`` (the encoder refuses them before: see
    :func:`check_finite`). Text with lone surrogates (which UTF-8 cannot carry) is
    written with ASCII escapes instead. O(size)."""
    try:
        return pydantic_core.to_json(value, fallback=str, inf_nan_mode="null").decode()
    except pydantic_core.PydanticSerializationError:
        plain = pydantic_core.to_jsonable_python(value, fallback=str, inf_nan_mode="null")
        return json.dumps(plain, ensure_ascii=True, separators=(",", ":"))


def public_error(code: str, message: str) -> dict[str, Any]:
    """The ``error`` object sent for a failure: the model server's own text (which may
    echo the API key or the request) is replaced by a fixed message with the HTTP
    status; other messages are slotflight's and kept."""
    if code not in _UPSTREAM_CODES:
        return {"code": code, "message": message}
    _logger.warning("the model server failed (%s): %s", code, message)
    status = _UPSTREAM_STATUS.match(message)
    if status is not None:
        return {
            "code": code,
            "message": f"the model server answered HTTP {status[1]}",
            "status": int(status[1]),
        }
    reported = _STREAM_STATUS.search(message) if code == "upstream_status" else None
    if reported is not None:
        return {
            "code": code,
            "message": f"the model server reported an error with status {reported[1]}",
            "status": int(reported[1]),
        }
    return {"code": code, "message": "the model server reported an error"}


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
    return WireEvent("error", wire_json({"type": "error", "error": public_error(code, message)}))


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


class _HeldDiagnostics:
    """A run of consecutive diagnostics, sent as one message: O(codes) memory."""

    __slots__ = ("counts", "first", "last_offset")

    def __init__(self, event: Diagnostic) -> None:
        self.first = event
        self.counts: Counter[str] = Counter((event.code,))
        self.last_offset = event.offset

    def add(self, event: Diagnostic) -> None:
        self.counts[event.code] += 1
        self.last_offset = event.offset


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

    def diagnostics(self, held: _HeldDiagnostics) -> WireEvent:
        """One ``diagnostic`` message for a run: the first one, plus ``count``,
        ``counts`` and ``last_offset`` when the run has more than one."""
        data = held.first.to_json(patch=False)
        count = held.counts.total()
        if count > 1:
            data["count"] = count
            data["counts"] = dict(held.counts)
            data["last_offset"] = held.last_offset
        return self._send(data)

    def event(self, event: Event) -> WireEvent:
        ops = event.patch
        data = event.to_json(patch=False)
        check_finite(ops)  # before the mirror takes them: the state stays JSON
        check_finite(data)
        kind = event.type
        if isinstance(event, ErrorEvent):
            data["error"] = public_error(event.error.code, event.error.message)
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
        """The ``error`` message that ends a failed stream, with the state."""
        return self._send({"type": "error", "error": public_error(code, message)}, snapshot=True)

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


class _Coalescer:
    """Holds back deltas and diagnostics, at most one message of each kind per window.

    A delta (a diagnostic) is sent at once when the last one went out at least a window
    ago; otherwise it is held, and the deltas of the same slot (all diagnostics) that
    follow are merged into it. A held message goes out when its window ends
    (:attr:`due`) or before any other message: nothing is reordered or dropped.
    """

    def __init__(self, encoder: _Encoder, delta_window: float, diagnostic_window: float) -> None:
        self.encoder = encoder
        self.delta_window = delta_window
        self.diagnostic_window = diagnostic_window
        self.held: _HeldDelta | _HeldDiagnostics | None = None
        self.last_delta_at = -float("inf")
        self.last_diagnostic_at = -float("inf")

    @property
    def due(self) -> float:
        """When the held message must go out (``time.monotonic()``)."""
        if isinstance(self.held, _HeldDelta):
            return self.last_delta_at + self.delta_window
        return self.last_diagnostic_at + self.diagnostic_window

    def add(self, event: Event) -> list[WireEvent]:
        """The messages to send now that ``event`` came."""
        held = self.held
        if isinstance(event, SlotDelta):
            if isinstance(held, _HeldDelta) and held.same_slot(event):
                self.encoder.delta(event)
                held.parts.append(event.delta)
                return []
            sent = self.flush()
            self.encoder.delta(event)
            if time.monotonic() - self.last_delta_at < self.delta_window:
                self.held = _HeldDelta(event)
                return sent
            self.last_delta_at = time.monotonic()
            return [*sent, self.encoder.deltas(event, event.delta)]
        if isinstance(event, Diagnostic):
            if isinstance(held, _HeldDiagnostics):
                held.add(event)
                return []
            sent = self.flush()
            run = _HeldDiagnostics(event)
            if time.monotonic() - self.last_diagnostic_at < self.diagnostic_window:
                self.held = run
                return sent
            self.last_diagnostic_at = time.monotonic()
            return [*sent, self.encoder.diagnostics(run)]
        return [*self.flush(), self.encoder.event(event)]

    def flush(self) -> list[WireEvent]:
        """The held message, if any, to send now."""
        held, self.held = self.held, None
        if held is None:
            return []
        if isinstance(held, _HeldDelta):
            self.last_delta_at = time.monotonic()
            return [self.encoder.deltas(held.first, held.text())]
        self.last_diagnostic_at = time.monotonic()
        return [self.encoder.diagnostics(held)]


async def close_source_shielded(source: object) -> None:
    """:func:`close_source`, shielded from the caller's cancellation (a response
    cancelled through an anyio cancel scope is cancelled again at every await in it) and
    bounded by :data:`CLOSE_TIMEOUT_S`."""
    with anyio.CancelScope(shield=True), anyio.move_on_after(CLOSE_TIMEOUT_S):
        await close_source(source)


async def close_source(source: object) -> None:
    """Close a slot stream (``aclose()``, else ``close()``): ends its upstream request."""
    closer = getattr(source, "aclose", None) or getattr(source, "close", None)
    if closer is None:
        return
    result = closer()
    if asyncio.iscoroutine(result):
        await result


class _ReadAhead:
    """Reads a source in a task of its own and turns its events into wire messages
    there (the coalescer's work), so the consumer wakes once per message, not once per
    event, and a held message goes out when its window ends without cancelling the
    read (which would end the source).

    One task per stream, one future per wait of the consumer, and at most one timer
    per held message (re-armed only when its deadline moves): a held ``slot-delta``
    costs no task, no timer and no wake-up per upstream chunk. The task keeps at most
    :data:`READ_AHEAD` messages ahead of the consumer, then waits for room.
    """

    __slots__ = (
        "_coalescer",
        "_end",
        "_loop",
        "_room",
        "_task",
        "_terminal",
        "_timer",
        "_timer_due",
        "_waiter",
        "_wires",
    )

    def __init__(self, source: AsyncIterable[Event], coalescer: _Coalescer) -> None:
        self._loop = asyncio.get_running_loop()
        self._coalescer = coalescer
        self._wires: deque[WireEvent] = deque()
        self._terminal = False  # the source ended with a terminal event, all encoded
        self._end: BaseException | None = None  # StopAsyncIteration, or what was raised
        self._waiter: asyncio.Future[None] | None = None  # the consumer, waiting
        self._room: asyncio.Future[None] | None = None  # the reader, waiting for room
        self._timer: asyncio.TimerHandle | None = None
        self._timer_due = 0.0
        self._task = asyncio.ensure_future(self._read(aiter(source)))

    async def _read(self, iterator: AsyncIterator[Event]) -> None:
        coalescer = self._coalescer
        wires = self._wires
        try:
            while True:
                event = await anext(iterator)
                sent = coalescer.add(event)
                if event.type in TERMINAL_TYPES:
                    wires.extend(sent)
                    self._terminal = True
                    return
                if sent:
                    wires.extend(sent)
                    self._wake()
                if coalescer.held is not None:
                    self._arm(coalescer.due)
                if len(wires) >= READ_AHEAD:
                    self._room = self._loop.create_future()
                    await self._room
        except Exception as exc:  # StopAsyncIteration included: the source ended
            self._end = exc
        finally:
            if self._end is None:
                self._end = StopAsyncIteration()
            self._cancel_timer()  # what is still held, the consumer flushes
            self._wake()

    def _arm(self, due: float) -> None:
        if self._timer is not None:
            if self._timer_due == due:
                return
            self._timer.cancel()
        self._timer_due = due
        self._timer = self._loop.call_later(due - time.monotonic(), self._on_due)

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _on_due(self) -> None:
        self._timer = None
        coalescer = self._coalescer
        if coalescer.held is None:
            return
        due = coalescer.due
        if due > time.monotonic():  # the clock's rounding: not yet
            self._arm(due)
            return
        self._wires.extend(coalescer.flush())
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def next(self) -> WireEvent | None:
        """The next message; ``None`` once the source ended with a terminal event and
        every message was taken. Raises ``StopAsyncIteration`` when it ended without
        one, or what the source (or encoding) raised."""
        if not self._wires and not self._task.done():
            self._waiter = self._loop.create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        if self._wires:
            wire = self._wires.popleft()
            room = self._room
            if room is not None and not room.done():
                room.set_result(None)
            return wire
        if self._terminal:
            return None
        raise self._end or StopAsyncIteration()

    async def aclose(self) -> None:
        """Stop reading (the read in progress is cancelled) and wait for the task."""
        self._cancel_timer()
        if not self._task.done():
            self._task.cancel()
            await asyncio.wait({self._task})


def check_encoding(state_mode: Any, coalesce_ms: Any) -> None:
    """``ValueError`` unless ``state_mode`` is ``"full"`` or ``"patch"`` and
    ``coalesce_ms`` a finite number of milliseconds >= 0."""
    if state_mode not in ("full", "patch"):
        raise ValueError(f"state_mode must be 'full' or 'patch', got {state_mode!r}")
    if (
        isinstance(coalesce_ms, bool)
        or not isinstance(coalesce_ms, int | float)
        or not (math.isfinite(coalesce_ms) and coalesce_ms >= 0)
    ):
        raise ValueError(f"coalesce_ms must be a finite number >= 0, got {coalesce_ms!r}")


async def encode_events(
    source: AsyncIterable[Event],
    *,
    state_mode: StateMode = "patch",
    coalesce_ms: float = 0,
) -> AsyncGenerator[WireEvent, None]:
    """The wire messages of ``source`` (see the module docs). Closes ``source`` at the
    end, also when the consumer stops early or is cancelled."""
    check_encoding(state_mode, coalesce_ms)
    if state_mode == "full":
        coalesce_ms = max(coalesce_ms, FULL_MODE_MIN_COALESCE_MS)
    encoder = _Encoder(state_mode)
    coalescer = _Coalescer(
        encoder, coalesce_ms / 1000.0, max(coalesce_ms, DEFAULT_COALESCE_MS) / 1000.0
    )
    reader = _ReadAhead(source, coalescer)
    try:
        while True:
            try:
                wire = await reader.next()
            except StopAsyncIteration:
                break
            if wire is None:  # the terminal event's messages went out
                return
            yield wire
        code, message = "incomplete", "the stream ended without a done or error event"
    except SlotflightError as exc:
        code, message = exc.code, exc.message
    except Exception as exc:
        _logger.exception("a slot stream failed")
        code, message = "internal_error", f"the stream failed: {type(exc).__name__}"
    finally:
        # Shielded: a response cancelled through an anyio cancel scope (sse-starlette,
        # when the client goes away) is cancelled again at every await in the scope, so
        # an unshielded close would stop at its first await and leave the upstream
        # request open until garbage collection. Bounded, so a source that never ends
        # its close cannot hold the task; a cancellation still propagates afterwards.
        with anyio.CancelScope(shield=True):
            with anyio.move_on_after(CLOSE_TIMEOUT_S):
                await reader.aclose()
        await close_source_shielded(source)
    for wire in coalescer.flush():
        yield wire
    yield encoder.failure(code, message)
