"""Seeded fuzzing of the sans-I/O core: 20,000 inputs per frame syntax.

Each input is a plan (a fixed hostile schema, or a schema drawn at random) and a stream:
the frames of a valid instance mutated (bytes flipped, dropped, repeated; hostile values
spliced in: ``1e999``, ``NaN``, 5,000-digit integers, deep JSON, a BOM, lone surrogates,
invalid UTF-8, tag and end lines), or random bytes. It is fed in random chunks, closed
(completely or cut short) and sometimes retried. After every chunk: no exception, no
``internal_error``, and the state and every event are strict JSON (no ``NaN``/``Infinity``,
no lone surrogates) equal to what the patches build. Each first pass is also read in one
chunk, which must make the same events and state (chunk invariance; the mutations
include lines of a slot's name, blanks and a value, which a reader holds until the line
shows what it is).
"""

from __future__ import annotations

import json
import random
import re
from typing import Any

import jsonpatch
import pytest

from slotflight import Assembler, SchemaError, SlotPlan, compile, render_frames
from slotflight.prompting.prompt import example_instance
from slotflight.syntax import SYNTAXES

INPUTS_PER_SYNTAX = 20_000
SEED = 15
_SURROGATE = re.compile("[\ud800-\udfff]")

HOSTILE_TOKENS: tuple[str, ...] = (
    "1e999",
    "-1e999",
    "NaN",
    "Infinity",
    "9" * 5_000,
    "[" * 1_200,
    '{"a":' * 300,
    "\ufeff",
    "\ud800",
    "\udfff",
    "\x00",
    "\r",
    "\r\n",
    "<99999>\n",
    "</1>\n",
    "<1:999999999>\n",
    "<2:0>",
    "end\n",
    "\n|",
    "```json\n",
    "null",
    "true",
    '"\\ud800"',
    "2025-02-30T25:61:00Z",
    "\u202e",
    "\n1 ",
    "\n3:7 ",
)
INVALID_BYTES: tuple[bytes, ...] = (b"\xff", b"\xfe\xff", b"\xc0\xaf", b"\xed\xa0\x80", b"\xe2\x82")

HOSTILE_SCHEMAS: tuple[dict[str, Any], ...] = (
    {"type": "string", "maxLength": 40},
    {"type": "array", "items": {"type": "integer"}},
    {"anyOf": [{"type": "integer"}, {"type": "object"}]},
    {
        "type": "object",
        "properties": {
            "a": {"type": "string", "pattern": "^(a+)+$"},
            "n": {"type": "number", "multipleOf": 0.5, "maximum": 1e300},
            "i": {"type": "integer"},
            "e": {"enum": [1, 2.5, "x", True, None]},
            "d": {"type": "string", "format": "date-time"},
            "j": {"type": "array", "items": {"type": "array"}},
        },
        "required": ["a", "i"],
        "additionalProperties": {"type": "integer"},
    },
    {
        "type": "object",
        "properties": {
            "items": {
                "type": "array",
                "maxItems": 3,
                "items": {
                    "type": "object",
                    "properties": {"x": {"type": "integer"}, "y": {"type": "string"}},
                    "required": ["x"],
                    "patternProperties": {"^p": {"type": "string"}},
                },
            },
            "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1},
            "meta": {
                "anyOf": [
                    {"type": "object", "properties": {"k": {"type": "boolean"}}},
                    {"type": "null"},
                ]
            },
        },
        "required": ["items"],
    },
)


def _random_schema(rng: random.Random, depth: int = 0) -> dict[str, Any]:
    """A small JSON Schema: objects, arrays, scalars, enums, constraints, extra keys."""
    roll = rng.random()
    if depth < 3 and roll < 0.35:
        properties = {f"f{i}": _random_schema(rng, depth + 1) for i in range(rng.randint(1, 4))}
        schema: dict[str, Any] = {"type": "object", "properties": properties}
        schema["required"] = [k for k in properties if rng.random() < 0.5]
        extra = rng.choice([False, True, {"type": "integer"}, None])
        if extra is not None:
            schema["additionalProperties"] = extra
        return schema
    if depth < 3 and roll < 0.5:
        array: dict[str, Any] = {"type": "array", "items": _random_schema(rng, depth + 1)}
        if rng.random() < 0.3:
            array["maxItems"] = rng.randint(0, 4)
        return array
    kind = rng.choice(["string", "integer", "number", "boolean", "enum", "date", "null-union"])
    if kind == "enum":
        return {"enum": rng.sample(["a", "b", 1, 2.5, True, None], rng.randint(1, 4))}
    if kind == "date":
        return {"type": "string", "format": rng.choice(["date", "date-time", "time", "uuid"])}
    if kind == "null-union":
        return {"anyOf": [{"type": rng.choice(["string", "integer"])}, {"type": "null"}]}
    scalar: dict[str, Any] = {"type": kind}
    if kind == "string" and rng.random() < 0.3:
        scalar["maxLength"] = rng.randint(1, 10)
    if kind in ("integer", "number") and rng.random() < 0.3:
        scalar["minimum"] = rng.choice([0, -5, 1.5])
    return scalar


def _plans(rng: random.Random) -> list[SlotPlan]:
    plans = [compile(schema) for schema in HOSTILE_SCHEMAS]
    while len(plans) < 40:
        try:
            plans.append(compile(_random_schema(rng)))
        except SchemaError:
            continue
    return plans


def _stream(rng: random.Random, plan: SlotPlan, syntax: str) -> list[str | bytes]:
    """Chunks of one hostile stream (bytes, or text when it carries lone surrogates)."""
    try:
        text = render_frames(plan, example_instance(plan), syntax)
    except (TypeError, ValueError):
        text = ""
    if rng.random() < 0.05:
        data = bytes(rng.randrange(256) for _ in range(rng.randint(0, 200)))
        return _chunks(rng, data)
    pieces = list(text)
    for _ in range(rng.randint(0, 6)):
        at = rng.randint(0, len(pieces))
        action = rng.random()
        if action < 0.1 and plan.slots:
            # a line of a slot's name, blanks and a value: a line start is held until it
            # shows what it is (a block list's name, or v3's item on its name's line)
            name = SYNTAXES[syntax].ref(plan, rng.choice(plan.slots))
            value = rng.choice(('"', '"x"', "x", ""))
            pieces.insert(at, f"\n{name}:{' ' * rng.randint(1, 20)}{value}\n")
        elif action < 0.45:
            pieces.insert(at, rng.choice(HOSTILE_TOKENS))
        elif action < 0.65 and pieces:
            del pieces[at : at + rng.randint(1, 8)]
        elif action < 0.8 and pieces:
            pieces[at:at] = pieces[max(0, at - 20) : at]
        else:
            pieces.insert(at, chr(rng.randrange(0x20, 0x3000)))
    mutated = "".join(pieces)
    if _SURROGATE.search(mutated):
        return [mutated[i : i + n] for i, n in _cuts(rng, len(mutated))]
    data = mutated.encode("utf-8")
    if rng.random() < 0.2:
        at = rng.randint(0, len(data))
        data = data[:at] + rng.choice(INVALID_BYTES) + data[at:]
    return _chunks(rng, data)


def _cuts(rng: random.Random, length: int) -> list[tuple[int, int]]:
    out, position = [], 0
    while position < length:
        size = rng.randint(1, 17)
        out.append((position, size))
        position += size
    return out


def _chunks(rng: random.Random, data: bytes) -> list[str | bytes]:
    return [data[i : i + n] for i, n in _cuts(rng, len(data))]


def _check(asm: Assembler, events: list[Any], mirror: Any) -> Any:
    for event in events:
        data = event.to_json()
        json.dumps(data, allow_nan=False, ensure_ascii=False).encode("utf-8")
        assert not (event.type == "pass-failed" and data["error"]["code"] == "internal_error"), data
        if event.patch:
            mirror = jsonpatch.apply_patch(mirror, event.patch, in_place=True)
    state = asm.state
    json.dumps(state, allow_nan=False, ensure_ascii=False).encode("utf-8")
    assert mirror == state
    return mirror


def _same_as_read_whole(
    plan: SlotPlan,
    syntax: str,
    chunks: list[str | bytes],
    complete: bool,
    events: list[Any],
    state: Any,
) -> None:
    """Chunk invariance: the stream read in one chunk makes the same events and the same
    state; but the deltas, which follow the chunks, and ``invalid_utf8``, reported once
    per chunk that had some (``assemble/decode.py``), with the count of those not
    reported one by one."""
    whole = Assembler(plan, syntax=syntax)
    data: str | bytes = b"".join(c for c in chunks if isinstance(c, bytes)) or "".join(
        c for c in chunks if isinstance(c, str)
    )
    once = whole.feed(data) + whole.close(complete=complete)
    assert _invariant(once) == _invariant(events)
    assert whole.state == state


def _invariant(events: list[Any]) -> list[dict[str, Any]]:
    return [
        e.to_json(patch=False)
        for e in events
        if e.type != "slot-delta"
        and getattr(e, "code", None) not in ("invalid_utf8", "diagnostics_suppressed")
    ]


@pytest.mark.timeout(600)
@pytest.mark.parametrize("syntax", SYNTAXES)
def test_fuzzed_streams_never_raise_and_stay_strict_json(syntax: str) -> None:
    rng = random.Random(f"{SEED}:{syntax}")
    plans = _plans(rng)
    for _ in range(INPUTS_PER_SYNTAX):
        plan = rng.choice(plans)
        asm = Assembler(plan, syntax=syntax)
        mirror = asm.state
        chunks = _stream(rng, plan, syntax)
        complete = rng.random() < 0.7
        events: list[Any] = []
        for chunk in [*chunks, None]:
            made = asm.close(complete=complete) if chunk is None else asm.feed(chunk)
            mirror = _check(asm, made, mirror)
            events += made
        _same_as_read_whole(plan, syntax, chunks, complete, events, asm.state)
        if asm.retry_request() is not None and rng.random() < 0.3:
            _, events = asm.begin_retry()
            mirror = _check(asm, events, mirror)
            for chunk in _stream(rng, plan, syntax):
                mirror = _check(asm, asm.feed(chunk), mirror)
            _check(asm, asm.close(), mirror)
