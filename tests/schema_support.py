"""Helpers for the schema tests: compile, render, assemble in seeded random chunks while
checking the state (strict JSON, equal to the replayed patches) after every chunk."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any

import jsonpatch

from slotflight import Assembler, SlotPlan, render_frames
from slotflight.assemble.events import Event
from slotflight.plan.instance import UnexpressibleValue
from slotflight.syntax import SYNTAXES, get_syntax
from slotflight.syntax.lines import LineSyntax

__all__ = [
    "SYNTAXES",
    "CountedName",
    "Fed",
    "agrees",
    "assemble",
    "raw_frame",
    "round_trip",
    "stray_frame",
    "strict_json",
]


class CountedName(str):
    """A name (a field's, one in ``required``) that counts how often any name of the
    kind is compared: set ``CountedName.compared = 0`` before the work to count."""

    compared = 0

    def __eq__(self, other: object) -> bool:
        CountedName.compared += 1
        return str.__eq__(self, other)

    __hash__ = str.__hash__


def raw_frame(plan: SlotPlan, slot_id: int, body: str, syntax: str, *, end: bool = True) -> str:
    """A frame for ``slot_id`` with ``body`` as written (no writer check: ``body`` may be
    a value no writer would produce), and the syntax's end marker when ``end``."""
    chosen = get_syntax(syntax)
    if isinstance(chosen, LineSyntax):
        text = f"{chosen.head(plan, plan[slot_id], None)} {body}\n"
        return text + ("end\n" if end else "")
    return f"<{slot_id}>\n{body}\n</{slot_id}>\n"


def stray_frame(syntax: str) -> tuple[str, str]:
    """A frame-like line for a slot the plan does not have, and the diagnostic code it
    gets: ``unknown_slot`` where ids are numbers; with named ids such a line is noise."""
    chosen = get_syntax(syntax)
    if isinstance(chosen, LineSyntax):
        if chosen.ids == "named":
            return "zz_unknown: z\n", "noise"
        return "99 z\n", "unknown_slot"
    return "<99>\nz\n</99>\n", "unknown_slot"


def strict_json(value: Any) -> str:
    """JSON text for ``value``; fails on ``NaN``/``Infinity`` and lone surrogates."""
    text = json.dumps(value, allow_nan=False, ensure_ascii=False)
    text.encode("utf-8")
    return text


@dataclass
class Fed:
    asm: Assembler
    events: list[Event] = field(default_factory=list)
    states: list[Any] = field(default_factory=list)

    @property
    def state(self) -> Any:
        return self.asm.state

    def of_type(self, kind: str) -> list[Any]:
        return [e for e in self.events if e.type == kind]

    def codes(self) -> list[str]:
        return [e.code for e in self.events if e.type == "diagnostic"]  # type: ignore[attr-defined]


def assemble(
    plan: SlotPlan,
    text: str | bytes,
    syntax: str = "v1",
    *,
    seed: int = 0,
    complete: bool = True,
    **limits: Any,
) -> Fed:
    """Feed ``text`` (as UTF-8 bytes) in random 1-17-byte chunks, then close.

    After every chunk the state must be strict JSON and equal to the state the events'
    patches build from the initial state.
    """
    from slotflight import Limits

    asm = Assembler(plan, syntax=syntax, limits=Limits(**limits) if limits else None)
    fed = Fed(asm)
    data = text.encode("utf-8") if isinstance(text, str) else text
    rng = random.Random(seed)
    chunks: list[bytes] = []
    position = 0
    while position < len(data):
        size = rng.randint(1, 17)
        chunks.append(data[position : position + size])
        position += size
    mirror = asm.state
    for chunk in [*chunks, None]:
        events = asm.feed(chunk) if chunk is not None else asm.close(complete=complete)
        fed.events += events
        for event in events:
            strict_json(event.to_json())
            if event.patch:
                mirror = jsonpatch.apply_patch(mirror, event.patch)
        state = asm.state
        strict_json(state)
        assert mirror == state, (mirror, state)
        fed.states.append(state)
    assert not [
        e
        for e in fed.events
        if e.type == "pass-failed" and e.error.code == "internal_error"  # type: ignore[attr-defined]
    ]
    return fed


def round_trip(plan: SlotPlan, instance: Any, syntax: str = "v1", *, seed: int = 0) -> Fed:
    """Render ``instance``, assemble it in random chunks; the pass must end ``ok`` with the
    instance as its state (compared as JSON text: ``1`` and ``1.0`` differ)."""
    fed = assemble(plan, render_frames(plan, instance, syntax), syntax, seed=seed)
    assert fed.asm.outcome.ok, fed.asm.outcome.errors
    assert json.dumps(fed.state, sort_keys=True) == json.dumps(instance, sort_keys=True)
    return fed


def agrees(plan: SlotPlan, checker: Any, instance: Any, syntax: str, *, seed: int = 0) -> None:
    """slotflight accepts ``instance`` exactly when ``checker`` (jsonschema) does: a valid
    instance comes back exactly; an invalid one is refused by ``render_frames``, or the
    pass does not end ``ok``, or it ends ``ok`` with another, valid output (frames the
    plan cannot take are dropped: an item past ``maxItems``)."""
    expected = checker.is_valid(instance)
    try:
        text = render_frames(plan, instance, syntax)
    except UnexpressibleValue as exc:
        assert not expected, f"render_frames refused a valid instance {instance!r}: {exc}"
        return
    if expected:
        round_trip(plan, instance, syntax, seed=seed)
        return
    fed = assemble(plan, text, syntax, seed=seed)
    if fed.asm.outcome.ok:
        same = json.dumps(fed.state, sort_keys=True) == json.dumps(instance, sort_keys=True)
        assert not same, f"accepted an invalid instance {instance!r}"
        assert checker.is_valid(fed.state), f"{instance!r} became invalid {fed.state!r}"
