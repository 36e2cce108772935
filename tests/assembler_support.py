"""Shared helpers for the assembler tests: a hand-built plan, chunkers and a driver."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import jsonpatch

from slotflight.assemble.assembler import Assembler, Limits
from slotflight.assemble.events import Event
from slotflight.plan.compiler import compile as compile_schema
from slotflight.plan.instance import FrameValue, UnexpressibleValue, walk_instance
from slotflight.plan.model import INDEX, ArrayNode, ObjectNode, Slot, SlotPlan
from slotflight.syntax import SYNTAXES as REGISTERED
from slotflight.syntax import get_syntax, render_frames
from slotflight.syntax.base import Syntax

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


#: Every registered frame syntax: the syntax-neutral suites run over each.
SYNTAXES = tuple(sorted(REGISTERED))

#: The triage schema with two more fields, ``zz_secret`` (slot 10) and ``zz_words[]``
#: (slot 11): frames written for it name slots :data:`TRIAGE_PLAN` does not know.
WIDER_PLAN = compile_schema(
    {
        **TRIAGE_SCHEMA,
        "properties": {
            **TRIAGE_SCHEMA["properties"],
            "zz_secret": {"type": "string"},
            "zz_words": {"type": "array", "items": {"type": "string"}},
        },
    }
)


def task_list_schema(task: dict[str, Any]) -> dict[str, Any]:
    """An object whose required ``items`` is a list of closed objects: a required
    ``task`` of the schema ``task`` and an optional string ``owner``."""
    return {
        "type": "object",
        "properties": {
            "items": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"task": task, "owner": {"type": "string"}},
                    "required": ["task"],
                    "additionalProperties": False,
                },
            }
        },
        "required": ["items"],
        "additionalProperties": False,
    }


def retry_targets(assembler: Assembler) -> list[tuple[str, str | None]]:
    """What the assembler's follow-up asks for: each target's pointer and the value it
    tried (none without a follow-up)."""
    request = assembler.retry_request()
    if request is None:
        return []
    return [(t.slot.concrete_pointer(t.index), t.error.input) for t in request.targets]


def written(
    plan: SlotPlan, frames: Iterable[FrameValue], syntax: str | Syntax | None = None
) -> str:
    """The text ``syntax`` writes for ``frames`` without its end marker, so that the
    text of consecutive pieces of an answer can be concatenated (the end marker is
    what :meth:`Syntax.write` writes for no frames)."""
    chosen = get_syntax(syntax)
    text = chosen.write(plan, frames)
    trailer = chosen.write(plan, [])
    assert text.endswith(trailer), (text, trailer)
    return text[: len(text) - len(trailer)]


def end_marker(syntax: str | Syntax | None = None, plan: SlotPlan = TRIAGE_PLAN) -> str:
    """What ``syntax`` writes after the last frame (empty if it has no end marker)."""
    return get_syntax(syntax).write(plan, [])


@dataclass(frozen=True)
class WrittenAs(FrameValue):
    """A frame whose value text is given as written (JSON text for a ``json`` slot,
    which need not be valid)."""

    written: str = ""

    @property
    def text(self) -> str:
        return self.written


def frame_value(tag: str, body: Any, plan: SlotPlan = TRIAGE_PLAN) -> FrameValue:
    """``tag`` is ``ID`` or ``ID:INDEX``; a text ``body`` of a ``json`` slot is its
    JSON text as written."""
    slot_id, _, index = tag.partition(":")
    slot = plan[int(slot_id)]
    at = int(index) if index else None
    if slot.kind == "json" and isinstance(body, str):
        return WrittenAs(slot, at, body, written=body)
    return as_written(slot, at, body)


def as_written(slot: Slot, index: int | None, value: Any) -> FrameValue:
    """The frame of ``value``; a value the writer refuses (not of the slot's kind, not
    one of its enum values) is written as is, as a misbehaving model would."""
    frame = FrameValue(slot, index, value)
    try:
        frame.text  # noqa: B018 - the writer's check of the value
    except UnexpressibleValue:
        return WrittenAs(slot, index, value, written=str(value))
    return frame


def frames(
    pairs: Iterable[tuple[str, Any]],
    syntax: str | Syntax | None = None,
    plan: SlotPlan = TRIAGE_PLAN,
) -> str:
    """The frames ``(tag, body)`` written in one go by ``syntax``, without the end
    marker. A body is written as a value of the slot's kind, so a string that is not
    valid for a non-text kind (``"high"`` for an integer) is written as is."""
    return written(plan, [frame_value(tag, body, plan) for tag, body in pairs], syntax)


def frame(tag: str, body: Any, *, syntax: str | Syntax | None = None) -> str:
    """One frame of :data:`TRIAGE_PLAN` for ``tag`` (``3`` or ``3:0``), without the end
    marker."""
    return frames([(tag, body)], syntax)


def unknown_frame(tag: str, body: Any, *, syntax: str | Syntax | None = None) -> str:
    """A frame for slot 10 or 11 of :data:`WIDER_PLAN`, unknown to :data:`TRIAGE_PLAN`."""
    return frames([(tag, body)], syntax, WIDER_PLAN)


def triage_frames(value: dict[str, Any]) -> list[FrameValue]:
    """The frames of a :data:`TRIAGE_PLAN` instance, in canonical order."""
    return list(walk_instance(TRIAGE_PLAN, value))


def render_triage(value: dict[str, Any], syntax: str | Syntax | None = None) -> str:
    """The whole answer for a :data:`TRIAGE_PLAN` instance, end marker included."""
    return render_frames(TRIAGE_PLAN, value, syntax)


def text_before(
    value: dict[str, Any],
    found: Callable[[FrameValue], bool],
    syntax: str | Syntax | None = None,
    *,
    through: bool = False,
) -> str:
    """The written text of ``value``'s frames before the first frame ``found`` matches
    (``through``: up to and including it). A prefix of :func:`render_triage`."""
    values = triage_frames(value)
    at = next(i for i, f in enumerate(values) if found(f))
    return written(TRIAGE_PLAN, values[: at + 1 if through else at], syntax)


def render_changed(
    value: dict[str, Any],
    syntax: str | Syntax | None = None,
    *,
    replace: dict[str, Any] | None = None,
    drop: Iterable[str] = (),
) -> str:
    """:func:`render_triage` with the frames ``replace`` names (by tag, ``3`` or ``3:0``)
    carrying other bodies and the frames ``drop`` names left out."""
    replace = replace or {}
    dropped = set(drop)
    out: list[FrameValue] = []
    for f in triage_frames(value):
        tag = str(f.slot.id) if f.index is None else f"{f.slot.id}:{f.index}"
        if tag in dropped:
            continue
        out.append(as_written(f.slot, f.index, replace[tag]) if tag in replace else f)
    assert dropped | set(replace) <= {
        str(f.slot.id) if f.index is None else f"{f.slot.id}:{f.index}"
        for f in triage_frames(value)
    }, "a tag names no frame of the value"
    return get_syntax(syntax).write(TRIAGE_PLAN, out)


def slot_is(slot_id: int, index: int | None = None) -> Callable[[FrameValue], bool]:
    """Matches the frame of ``slot_id`` (at ``index``, if given)."""
    return lambda f: f.slot.id == slot_id and (index is None or f.index == index)


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
    syntax: str | Syntax | None = None,
    limits: Limits | None = None,
    check: bool = True,
    complete: bool = True,
    grammar: bool = False,
    grammar_max_string_chars: int | None = None,
) -> Run:
    """Feed ``chunks``; with ``check``, verify the invariants after every chunk.
    ``grammar``, ``grammar_max_string_chars``: as :class:`Assembler` takes them."""
    asm = Assembler(
        plan,
        syntax=syntax,
        limits=limits,
        grammar=grammar,
        grammar_max_string_chars=grammar_max_string_chars,
    )
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
