"""Metrics over recorded benchmark streams: pure functions, no I/O.

A run is recorded in one of two modes on the same server:

- **json_schema** (:class:`JsonRun`): the text chunks of a native ``response_format``
  json_schema stream, each with the time it arrived. The client view after a chunk is
  what an application holds: ``json.loads`` of the text so far (valid or not), and the
  partial view the OpenAI SDK builds, ``jiter.from_json(text.encode(), partial_mode=True)``
  (see :func:`partial_view`).
- **slots** (:class:`SlotRun`): the text chunks of a slot-frame stream, the assembler's
  state after each chunk, and the time at which each slot validated.

The metrics follow section 5 of the design brief:

- :func:`final_valid`: the final object validates against the strict schema.
- :func:`stream_valid`: share of chunks after which the client holds valid JSON.
- :func:`unsafe_partial`: share of chunks whose view shows a settled-kind scalar
  (number, boolean, null, enum or const string) that differs from its final value.
- :func:`field_times`: when each field was settled, with time to first field, time to
  all fields, p50 and p95 (:func:`percentile`).
- :func:`sse_bytes`: bytes on the wire for events encoded as Server-Sent Events.

:func:`measure` computes all of them for one run.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypeAlias

import jiter
from jsonpointer import JsonPointer
from pydantic import BaseModel, ValidationError

__all__ = [
    "Chunk",
    "FieldTimes",
    "JsonRun",
    "PartialMode",
    "RunMetrics",
    "Share",
    "SlotRun",
    "StateMode",
    "encode_sse",
    "field_times",
    "final_valid",
    "json_field_times",
    "measure",
    "partial_view",
    "percentile",
    "slot_field_times",
    "sse_bytes",
    "stream_valid",
    "unsafe_partial",
]

#: One received chunk: seconds since the request was sent, and its text.
Chunk: TypeAlias = tuple[float, str]
#: jiter's partial modes: ``True``/``"on"`` drops an unfinished trailing string (what the
#: OpenAI SDK uses); ``"trailing-strings"`` keeps its prefix.
PartialMode: TypeAlias = Literal[True, "on", "trailing-strings"]
#: What each SSE event carries besides its delta: the full state or an RFC 6902 patch.
StateMode: TypeAlias = Literal["full", "patch"]

Segment: TypeAlias = str | int

# --------------------------------------------------------------------------- records


def _check_chunks(chunks: Sequence[Chunk]) -> tuple[Chunk, ...]:
    out = tuple((float(t), text) for t, text in chunks)
    if not all(isinstance(text, str) for _, text in out):
        raise TypeError("chunk text must be str")
    for (before, _), (after, _) in itertools.pairwise(out):
        if after < before:
            raise ValueError(f"chunk times must not decrease ({after} after {before})")
    return out


@dataclass(frozen=True)
class JsonRun:
    """A json_schema-mode stream: the content chunks in arrival order."""

    chunks: tuple[Chunk, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "chunks", _check_chunks(self.chunks))

    @property
    def text(self) -> str:
        """The whole received text."""
        return "".join(text for _, text in self.chunks)


@dataclass(frozen=True)
class SlotRun:
    """A slots-mode stream.

    ``states[i]`` is a snapshot (not a live reference) of the assembler's state after
    ``chunks[i]``; ``slot_times`` maps each validated slot's concrete JSON Pointer
    (``/sections/1/heading``) to the time it validated. ``final`` is the object the
    client holds once the stream ended (defaults filled in), when it differs from the
    last state; :attr:`final_state` falls back to the last state.
    """

    chunks: tuple[Chunk, ...]
    states: tuple[Any, ...]
    slot_times: Mapping[str, float] = field(default_factory=dict)
    final: Any = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "chunks", _check_chunks(self.chunks))
        object.__setattr__(self, "states", tuple(self.states))
        if len(self.states) != len(self.chunks):
            raise ValueError(
                f"one state per chunk: {len(self.states)} states for {len(self.chunks)} chunks"
            )

    @property
    def final_state(self) -> Any:
        """The object the client ends with, or ``None`` for an empty run."""
        if self.final is not None:
            return self.final
        return self.states[-1] if self.states else None


Run: TypeAlias = JsonRun | SlotRun


@dataclass(frozen=True)
class Share:
    """``count`` of ``total`` chunks; :attr:`value` is ``None`` when there were none."""

    count: int
    total: int

    @property
    def value(self) -> float | None:
        return self.count / self.total if self.total else None

    def to_json(self) -> dict[str, Any]:
        return {"count": self.count, "total": self.total, "share": self.value}


# --------------------------------------------------------------------------- final


def final_valid(model: type[BaseModel], obj_or_text: Any) -> bool:
    """Whether the final output validates against ``model`` in strict mode.

    Text (json_schema mode) is validated as is with ``model_validate_json(text,
    strict=True)``; an object (slots state) is first serialized to JSON, so it is held
    to exactly the same rules. An object that is not JSON-serializable is not valid.
    """
    if isinstance(obj_or_text, str | bytes | bytearray):
        text = obj_or_text
    else:
        try:
            text = json.dumps(obj_or_text, allow_nan=False)
        except (TypeError, ValueError):
            return False
    try:
        model.model_validate_json(text, strict=True)
    except ValidationError:
        return False
    return True


# --------------------------------------------------------------------------- stream_valid


def _loads_ok(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def _round_trips(state: Any) -> bool:
    try:
        return bool(json.loads(json.dumps(state, allow_nan=False)) == state)
    except (TypeError, ValueError, RecursionError):
        return False


def stream_valid(run: Run) -> Share:
    """Chunks after which the client holds valid JSON.

    json_schema mode: ``json.loads`` of the text received so far succeeds. Slots mode:
    the state serializes with ``json.dumps`` (no NaN) and loads back equal to itself.
    """
    if isinstance(run, SlotRun):
        return Share(sum(_round_trips(s) for s in run.states), len(run.states))
    count = 0
    text = ""
    for _, chunk in run.chunks:
        text += chunk
        count += _loads_ok(text)
    return Share(count, len(run.chunks))


# --------------------------------------------------------------------------- unsafe_partial


def partial_view(text: str, partial_mode: PartialMode = True) -> Any:
    """The partial object a client builds from ``text`` the way the OpenAI SDK does.

    The SDK skips text that is empty after ``lstrip()`` and otherwise calls
    ``jiter.from_json(bytes(text, "utf-8"), partial_mode=True)``. Returns ``None`` when
    nothing can be parsed yet (or the text is not JSON at all).
    """
    if not text.lstrip():
        return None
    try:
        return jiter.from_json(text.encode("utf-8"), partial_mode=partial_mode)
    except (ValueError, UnicodeEncodeError):
        return None


class _SchemaIndex:
    """Answers "is the value at this concrete path an enum (or const)?" for a schema."""

    def __init__(self, schema: Mapping[str, Any]) -> None:
        self._root = schema
        self._cache: dict[tuple[Segment | None, ...], bool] = {}

    def _resolve(self, node: Any, depth: int = 0) -> list[Mapping[str, Any]]:
        """The concrete alternatives of ``node``: ``$ref`` followed, ``anyOf`` spread."""
        if not isinstance(node, Mapping) or depth > 32:
            return []
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/"):
            target: Any = self._root
            for part in ref[2:].split("/"):
                part = part.replace("~1", "/").replace("~0", "~")
                target = target.get(part) if isinstance(target, Mapping) else None
            return self._resolve(target, depth + 1)
        out: list[Mapping[str, Any]] = [node]
        for key in ("anyOf", "oneOf", "allOf"):
            for branch in node.get(key, ()):
                out.extend(self._resolve(branch, depth + 1))
        return out

    def _children(self, node: Mapping[str, Any], seg: Segment) -> list[Any]:
        if isinstance(seg, int):
            prefix = node.get("prefixItems")
            if isinstance(prefix, list) and seg < len(prefix):
                return [prefix[seg]]
            items = node.get("items")
            return [items] if isinstance(items, Mapping) else []
        props = node.get("properties")
        if isinstance(props, Mapping) and seg in props:
            return [props[seg]]
        extra = node.get("additionalProperties")
        return [extra] if isinstance(extra, Mapping) else []

    def is_enum(self, segments: Sequence[Segment]) -> bool:
        key = tuple(None if isinstance(s, int) else s for s in segments)
        known = self._cache.get(key)
        if known is not None:
            return known
        nodes = self._resolve(self._root)
        for seg in segments:
            nodes = [r for n in nodes for c in self._children(n, seg) for r in self._resolve(c)]
        answer = any("enum" in n or "const" in n for n in nodes)
        self._cache[key] = answer
        return answer


_ABSENT: Final = object()


def _leaves(
    value: Any, segments: tuple[Segment, ...] = ()
) -> Iterator[tuple[tuple[Segment, ...], Any]]:
    if isinstance(value, Mapping):
        for key, item in value.items():
            yield from _leaves(item, (*segments, key))
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from _leaves(item, (*segments, index))
    else:
        yield segments, value


def _lookup(value: Any, segments: Sequence[Segment]) -> Any:
    for seg in segments:
        if isinstance(seg, int):
            if not isinstance(value, list | tuple) or not 0 <= seg < len(value):
                return _ABSENT
            value = value[seg]
        else:
            if not isinstance(value, Mapping) or seg not in value:
                return _ABSENT
            value = value[seg]
    return value


def _same_scalar(a: Any, b: Any) -> bool:
    """Equality that keeps ``True`` apart from ``1`` but lets ``12`` equal ``12.0``."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    return type(a) is type(b) and bool(a == b)


def _shows_unsafe(view: Any, final: Any, index: _SchemaIndex) -> bool:
    if view is None:
        return False  # nothing parsed yet (text before the object, no state): no value shown
    for segments, leaf in _leaves(view):
        if isinstance(leaf, str) and not index.is_enum(segments):
            continue  # free text grows as a prefix by design
        settled = _lookup(final, segments)
        if settled is _ABSENT or not _same_scalar(leaf, settled):
            return True
    return False


def _schema_of(schema: type[BaseModel] | Mapping[str, Any]) -> Mapping[str, Any]:
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        return schema.model_json_schema()
    return schema


def unsafe_partial(
    run: Run,
    schema: type[BaseModel] | Mapping[str, Any],
    *,
    partial_mode: PartialMode = True,
) -> Share:
    """Chunks whose client view shows a settled-kind value that is not its final value.

    Settled kinds are numbers, booleans, ``null`` and strings whose schema is an
    ``enum`` or ``const`` (read from ``schema``); free-text strings may grow as
    prefixes and are never unsafe. A value counts as unsafe when it differs from the
    value at the same JSON Pointer in the final object (``1`` before ``12``, ``"neg"``
    before ``"negative"``), or the final object has nothing there.

    json_schema mode: the view is :func:`partial_view` of the text so far with
    ``partial_mode``, and the final object is ``json.loads`` of the whole text, or its
    partial view when the whole text is not valid JSON. Slots mode: the view is the
    state after the chunk and the final object is :attr:`SlotRun.final_state`. A chunk
    after which there is no view yet (whitespace before the object, no state) shows no
    value and is not unsafe.
    """
    index = _SchemaIndex(_schema_of(schema))
    if isinstance(run, SlotRun):
        final = run.final_state
        count = sum(_shows_unsafe(state, final, index) for state in run.states)
        return Share(count, len(run.states))
    whole = run.text
    try:
        final = json.loads(whole)
    except ValueError:
        final = partial_view(whole, partial_mode)
    count = 0
    text = ""
    for _, chunk in run.chunks:
        text += chunk
        count += _shows_unsafe(partial_view(text, partial_mode), final, index)
    return Share(count, len(run.chunks))


# --------------------------------------------------------------------------- field times


def _pointer(segments: Iterable[Segment]) -> str:
    return str(JsonPointer.from_parts(segments).path)


_WS: Final = frozenset(" \t\r\n")
_BARE: Final = frozenset("0123456789+-.eEtrufalsn")
_MAX_KEY: Final = 4096

# Scanner states.
_VALUE, _VALUE_OR_CLOSE, _KEY_OR_CLOSE, _KEY, _COLON, _AFTER, _STRING, _BAREWORD, _END = range(9)


@dataclass
class _Frame:
    """One open container: an object (current key) or an array (current index)."""

    is_object: bool
    key: str = ""
    index: int = 0

    @property
    def segment(self) -> Segment:
        return self.key if self.is_object else self.index


class _SettleScanner:
    """Incremental JSON scanner recording when each leaf value is settled.

    One pass over the text, one character at a time, keeping only the container path,
    the current key (bounded) and string-escape state. On malformed input it stops and
    keeps what it had recorded.
    """

    def __init__(self) -> None:
        self.settled: dict[str, float] = {}
        self._path: list[_Frame] = []
        self._state = _VALUE
        self._pending: str | None = None
        self._key: list[str] = []
        self._in_key = False
        self._escaped = False
        self._broken = False

    def _here(self) -> str:
        return _pointer(frame.segment for frame in self._path)

    def feed(self, text: str, t: float) -> None:
        for ch in text:
            if self._broken:
                return
            self._step(ch, t)

    def _settle(self, t: float) -> None:
        if self._pending is not None:
            self.settled[self._pending] = t
            self._pending = None

    def _open_value(self, ch: str) -> None:
        if ch == "{":
            self._path.append(_Frame(is_object=True))
            self._state = _KEY_OR_CLOSE
        elif ch == "[":
            self._path.append(_Frame(is_object=False))
            self._state = _VALUE_OR_CLOSE
        elif ch == '"':
            self._in_key = False
            self._state = _STRING
        elif ch in _BARE:
            self._state = _BAREWORD
        else:
            self._broken = True

    def _close(self, ch: str, t: float) -> None:
        if not self._path:
            self._broken = True
            return
        if (ch == "}") != self._path[-1].is_object:
            self._broken = True
            return
        self._settle(t)
        self._path.pop()
        self._state = _AFTER if self._path else _END

    def _step(self, ch: str, t: float) -> None:
        state = self._state
        if state == _STRING:
            if self._escaped:
                self._escaped = False
            elif ch == "\\":
                self._escaped = True
            elif ch == '"':
                if self._in_key:
                    self._end_key()
                else:
                    self._end_scalar()
                return
            if self._in_key:
                self._key.append(ch)
                if len(self._key) > _MAX_KEY:
                    self._broken = True
            return
        if state == _BAREWORD:
            if ch in _BARE:
                return
            self._end_scalar()
            state = self._state
        if ch in _WS:
            return
        if state in (_VALUE, _VALUE_OR_CLOSE):
            if state == _VALUE_OR_CLOSE and ch == "]":
                self._close(ch, t)
            else:
                self._open_value(ch)
        elif state in (_KEY_OR_CLOSE, _KEY):
            if state == _KEY_OR_CLOSE and ch == "}":
                self._close(ch, t)
            elif ch == '"':
                self._in_key = True
                self._key.clear()
                self._state = _STRING
            else:
                self._broken = True
        elif state == _COLON:
            if ch == ":":
                self._state = _VALUE
            else:
                self._broken = True
        elif state == _AFTER:
            if ch == ",":
                self._settle(t)
                frame = self._path[-1]
                if frame.is_object:
                    self._state = _KEY
                else:
                    frame.index += 1
                    self._state = _VALUE
            elif ch in "}]":
                self._close(ch, t)
            else:
                self._broken = True
        # _END: text after the top-level value is ignored, as json.loads would reject it.

    def _end_scalar(self) -> None:
        if self._path:
            self._pending = self._here()
            self._state = _AFTER
        else:  # a top-level scalar has no container to settle it
            self._state = _END

    def _end_key(self) -> None:
        try:
            key = json.loads('"' + "".join(self._key) + '"')
        except ValueError:
            self._broken = True
            return
        self._path[-1].key = key
        self._state = _COLON


def json_field_times(run: JsonRun) -> dict[str, float]:
    """When each leaf of a json_schema-mode stream was settled, keyed by JSON Pointer.

    A leaf is a string, number, boolean or ``null`` inside an object or array (empty
    ``[]``/``{}`` hold no leaf). It is settled at the time of the chunk that carries the
    first structural character after its value: the ``,`` that introduces the next key
    or item, or the ``}``/``]`` closing its container. Only then can a client know that
    the value is complete (``1`` may still become ``12``; a closed string may still be
    followed by garbage). Whitespace does not settle. Text that stops being valid JSON
    stops the scan; leaves settled before stay. A leaf never settled is absent.
    """
    scanner = _SettleScanner()
    for t, chunk in run.chunks:
        scanner.feed(chunk, t)
    return dict(scanner.settled)


def slot_field_times(run: SlotRun) -> dict[str, float]:
    """When each slot validated, keyed by concrete JSON Pointer (as recorded)."""
    return dict(run.slot_times)


def percentile(values: Iterable[float], q: float) -> float:
    """The ``q``-th percentile (0-100) with linear interpolation between order statistics.

    Matches NumPy's default (``method="linear"``): rank ``(n - 1) * q / 100`` in the
    sorted values. Raises :class:`ValueError` for no values or ``q`` outside 0-100.
    """
    data = sorted(float(v) for v in values)
    if not data:
        raise ValueError("percentile of no values")
    if not 0 <= q <= 100 or math.isnan(q):
        raise ValueError(f"percentile q must be within 0-100, got {q}")
    rank = (len(data) - 1) * q / 100
    low = math.floor(rank)
    high = min(low + 1, len(data) - 1)
    return data[low] + (data[high] - data[low]) * (rank - low)


@dataclass(frozen=True)
class FieldTimes:
    """Per-field completion times of one run (seconds since the request was sent)."""

    per_field: Mapping[str, float]

    @property
    def first(self) -> float | None:
        """Time to the first settled field."""
        return min(self.per_field.values(), default=None)

    @property
    def all(self) -> float | None:
        """Time by which every settled field was settled (meaningful for valid runs)."""
        return max(self.per_field.values(), default=None)

    def quantile(self, q: float) -> float | None:
        """The ``q``-th percentile of the per-field times, ``None`` without fields."""
        return percentile(self.per_field.values(), q) if self.per_field else None

    @property
    def p50(self) -> float | None:
        return self.quantile(50)

    @property
    def p95(self) -> float | None:
        return self.quantile(95)

    def to_json(self) -> dict[str, Any]:
        return {
            "first": self.first,
            "all": self.all,
            "p50": self.p50,
            "p95": self.p95,
            "per_field": dict(self.per_field),
        }


def field_times(run: Run) -> FieldTimes:
    """Per-field completion times: slot validation (slots) or settling (json_schema)."""
    if isinstance(run, SlotRun):
        return FieldTimes(slot_field_times(run))
    return FieldTimes(json_field_times(run))


# --------------------------------------------------------------------------- SSE bytes


def encode_sse(event: Mapping[str, Any], event_id: int, mode: StateMode) -> bytes:
    """One event as a Server-Sent Events message, UTF-8 encoded.

    ``event: <type>``, ``id: <event_id>`` and one ``data:`` line of compact JSON, then a
    blank line. In ``"full"`` mode the event keeps its ``state`` snapshot and drops any
    ``patch``; in ``"patch"`` mode it keeps its ``patch`` and drops ``state``.
    """
    if mode not in ("full", "patch"):
        raise ValueError(f"unknown state mode {mode!r}")
    kind = event.get("type")
    if not isinstance(kind, str) or not kind or any(c in kind for c in "\r\n"):
        raise ValueError("an event needs a one-line string 'type'")
    drop = "patch" if mode == "full" else "state"
    body = {key: value for key, value in event.items() if key != drop}
    data = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return f"event: {kind}\nid: {event_id}\ndata: {data}\n\n".encode()


def sse_bytes(events: Iterable[Mapping[str, Any]], mode: StateMode) -> int:
    """Bytes on the wire for ``events`` sent in order with ids 0, 1, 2, ..."""
    return sum(len(encode_sse(event, i, mode)) for i, event in enumerate(events))


# --------------------------------------------------------------------------- all together


@dataclass(frozen=True)
class RunMetrics:
    """Every per-run metric of one recorded stream."""

    mode: Literal["slots", "json_schema"]
    final_valid: bool
    stream_valid: Share
    unsafe_partial: Share
    fields: FieldTimes
    chunks: int

    def to_json(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "final_valid": self.final_valid,
            "stream_valid": self.stream_valid.to_json(),
            "unsafe_partial": self.unsafe_partial.to_json(),
            "fields": self.fields.to_json(),
            "chunks": self.chunks,
        }


def measure(run: Run, model: type[BaseModel], *, partial_mode: PartialMode = True) -> RunMetrics:
    """All metrics of ``run`` against ``model``."""
    if isinstance(run, SlotRun):
        final = run.final_state
        valid = final is not None and final_valid(model, final)
        mode: Literal["slots", "json_schema"] = "slots"
    else:
        valid = final_valid(model, run.text)
        mode = "json_schema"
    return RunMetrics(
        mode=mode,
        final_valid=valid,
        stream_valid=stream_valid(run),
        unsafe_partial=unsafe_partial(run, model, partial_mode=partial_mode),
        fields=field_times(run),
        chunks=len(run.chunks),
    )
