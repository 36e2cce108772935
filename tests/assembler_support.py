"""Shared helpers for the assembler tests: a hand-built plan, chunkers and a driver."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import jsonpatch

from slotflight.assemble.assembler import Assembler, Limits
from slotflight.assemble.events import Event
from slotflight.plan.model import INDEX, ArrayNode, ObjectNode, Slot, SlotPlan
from slotflight.syntax import render_frames

TAGS = ArrayNode(("tags",), True, 0, 6)
ITEMS = ArrayNode(("items",), True, 0, 4, True)
ITEM = ObjectNode(("items", INDEX), True)
ADDRESS = ObjectNode(("address",), False, True)

TRIAGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "summary": {"type": "string", "maxLength": 400},
        "priority": {"type": "integer", "minimum": 1, "maximum": 5},
        "sentiment": {"enum": ["positive", "neutral", "negative"]},
        "urgent": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 6},
        "items": {
            "type": "array",
            "maxItems": 4,
            "items": {
                "type": "object",
                "properties": {
                    "owner": {"type": "string"},
                    "due": {"type": "string", "format": "date"},
                },
                "required": ["owner", "due"],
            },
        },
        "address": {
            "anyOf": [
                {
                    "type": "object",
                    "properties": {"city": {"type": "string"}},
                    "required": ["city"],
                },
                {"type": "null"},
            ]
        },
        "extra": {"type": "object", "additionalProperties": {"type": "integer"}},
    },
    "required": ["summary", "priority", "sentiment", "urgent", "tags", "items"],
}

TRIAGE_PLAN = SlotPlan(
    slots=(
        Slot(1, ("summary",), "string", True, False, "Summary", constraints={"maxLength": 400}),
        Slot(
            2,
            ("priority",),
            "integer",
            True,
            False,
            "Priority",
            constraints={"minimum": 1, "maximum": 5},
        ),
        Slot(
            3,
            ("sentiment",),
            "enum",
            True,
            False,
            "Sentiment",
            enum=("positive", "neutral", "negative"),
        ),
        Slot(4, ("urgent",), "boolean", True, False, "Urgent"),
        Slot(5, ("tags", INDEX), "string", False, True, "Tag", array=TAGS),
        Slot(
            6,
            ("items", INDEX, "owner"),
            "string",
            True,
            True,
            "Owner",
            array=ITEMS,
            parents=(ITEM,),
        ),
        Slot(7, ("items", INDEX, "due"), "date", True, True, "Due", array=ITEMS, parents=(ITEM,)),
        Slot(8, ("address", "city"), "string", True, False, "City", parents=(ADDRESS,)),
        Slot(
            9,
            ("extra",),
            "json",
            False,
            False,
            "Extra",
            schema={"type": "object", "additionalProperties": {"type": "integer"}},
        ),
    ),
    schema=TRIAGE_SCHEMA,
    arrays=(TAGS, ITEMS),
    objects=(ITEM, ADDRESS),
)

STRING_POINTERS = ("/summary", "/tags/", "/items/", "/address/city")


#: The frame syntaxes the syntax-neutral suites run over.
SYNTAXES = ("v1", "v2")


def frame(tag: str, body: str, *, crlf: bool = False, syntax: str = "v1") -> str:
    """One frame for ``tag`` (``3`` or ``3:0``) in ``syntax``, written by hand."""
    nl = "\r\n" if crlf else "\n"
    if syntax == "v2":
        first, *rest = body.split("\n")
        return f"{tag} {first}" + "".join(f"{nl}|{line}" for line in rest) + nl
    return f"<{tag}>{nl}{body}{nl}</{tag}>{nl}"


def render_triage(value: dict[str, Any], syntax: str = "v1") -> str:
    """Frames for a TRIAGE_PLAN instance: v1 written by hand, v2 by the renderer."""
    if syntax != "v1":
        return render_frames(TRIAGE_PLAN, value, syntax)
    out = [frame("1", value["summary"]), frame("2", str(value["priority"]))]
    out.append(frame("3", value["sentiment"]))
    out.append(frame("4", "true" if value["urgent"] else "false"))
    out += [frame(f"5:{i}", t) for i, t in enumerate(value["tags"])]
    for i, item in enumerate(value["items"]):
        out += [frame(f"6:{i}", item["owner"]), frame(f"7:{i}", item["due"])]
    if value.get("address") is not None:
        out.append(frame("8", value["address"]["city"]))
    if "extra" in value:
        out.append(frame("9", json.dumps(value["extra"], ensure_ascii=False)))
    return "".join(out)


def split_at(data: Any, cuts: Iterable[int]) -> list[Any]:
    points = sorted({c for c in cuts if 0 < c < len(data)})
    pieces, last = [], 0
    for p in points:
        pieces.append(data[last:p])
        last = p
    pieces.append(data[last:])
    return pieces


@dataclass
class Run:
    events: list[Event] = field(default_factory=list)
    states: list[dict[str, Any]] = field(default_factory=list)
    asm: Assembler | None = None

    def non_delta(self) -> list[dict[str, Any]]:
        return [e.to_json(patch=False) for e in self.events if e.type != "slot-delta"]

    def deltas(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for e in self.events:
            if e.type == "slot-delta":
                out[e.path] = out.get(e.path, "") + e.delta  # type: ignore[attr-defined]
        return out

    @property
    def final(self) -> dict[str, Any]:
        assert self.asm is not None
        return self.asm.state


def drive(
    chunks: Sequence[str | bytes],
    plan: SlotPlan = TRIAGE_PLAN,
    *,
    syntax: str = "v1",
    limits: Limits | None = None,
    check: bool = True,
    complete: bool = True,
) -> Run:
    """Feed ``chunks``; with ``check``, verify the invariants after every chunk."""
    asm = Assembler(plan, syntax=syntax, limits=limits)
    run = Run(asm=asm)
    mirror: Any = asm.state
    for chunk in [*chunks, None]:
        events = asm.feed(chunk) if chunk is not None else asm.close(complete=complete)
        run.events += events
        if not check:
            continue
        for event in events:
            ops = event.patch
            if ops:
                mirror = jsonpatch.apply_patch(mirror, ops)
        state = asm.state
        json.loads(json.dumps(state, allow_nan=False))  # strict JSON after every chunk
        assert mirror == state, (mirror, state)
        run.states.append(state)
    return run
