"""The closed choices of a plan: fields whose value is one of a few options, as a
syntax writes them, for a server that calibrates the choice while it samples.

A small model writes the same few values of a closed field whatever the input says
(SmolLM2-135M answers ``integrations`` for 40 of 60 triages' product area). Contextual
calibration (Zhao et al. 2021, "Calibrate Before Use") scores each whole option where
the value begins, divides that probability by the one the model gives the option when
the input holds nothing (a content-free answer: every user message ``N/A``), and
writes the option with the best ratio. The embedded server does that when a request
carries :func:`closed_choices_field` (``docs/local.md``); this module only says which
fields and how their options are written. Pure: no model, no I/O.

A closed field here is a top-level slot, written once (not in a list), not nullable,
that is an enum of texts, a boolean, or an integer with ``minimum`` and ``maximum``
at most :data:`MAX_RANGE` values apart, in a syntax that writes each value on a line
of its own after the slot's name and a colon (``v3``, ``v3-quoted``, ``v4``,
``v4-quoted``). Other fields, and plans in other syntaxes, have none.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from ..plan.instance import FrameValue, UnexpressibleValue
from ..plan.model import Slot, SlotPlan
from .base import Syntax

__all__ = [
    "CONTENT_FREE_TEXT",
    "MAX_CLOSED_FIELDS",
    "MAX_CLOSED_OPTIONS",
    "MAX_CLOSED_OPTION_CHARS",
    "MAX_CLOSED_TEXT",
    "MAX_RANGE",
    "ClosedChoice",
    "calibrated_choice",
    "calibrated_figures",
    "closed_choices",
    "closed_choices_field",
    "content_free_messages",
    "normalised",
]

#: The most values an integer field may take to count as a closed choice.
MAX_RANGE: Final = 10
#: What every user message says in the content-free request.
CONTENT_FREE_TEXT: Final = "N/A"
#: Bounds of a request's ``closed_choices`` (the embedded server refuses more): fields,
#: options per field, characters of one text (``after``, an option, ``end``), and
#: characters of all options together, ``end`` counted with each (each option is
#: scored whole, a token at a time, where its field begins). :func:`closed_choices`
#: keeps within them, leaving out the fields past them.
MAX_CLOSED_FIELDS: Final = 32
MAX_CLOSED_OPTIONS: Final = 32
MAX_CLOSED_TEXT: Final = 200
MAX_CLOSED_OPTION_CHARS: Final = 4096


@dataclass(frozen=True)
class ClosedChoice:
    """One closed field: the text its line begins with (``after``, ``priority:``), each
    option as written after it (``" 3"``), and ``end``, the text written after every
    option (a line break) when one option begins another (``" 1"`` and ``" 10"``), so
    that scoring an option whole tells them apart."""

    path: str
    after: str
    options: tuple[str, ...]
    end: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"after": self.after, "options": list(self.options), "end": self.end}


def _values(slot: Slot) -> tuple[Any, ...]:
    if slot.kind == "enum":
        members = slot.enum or ()
        return tuple(members) if all(isinstance(m, str) for m in members) else ()
    if slot.kind == "boolean":
        return (True, False)
    if slot.kind == "integer":
        low, high = slot.constraints.get("minimum"), slot.constraints.get("maximum")
        step = slot.constraints.get("multipleOf", 1)
        if (
            isinstance(low, int)
            and isinstance(high, int)
            and isinstance(step, int)
            and not any(isinstance(b, bool) for b in (low, high, step))
            and step > 0
            and 0 < high - low + 1 <= MAX_RANGE
        ):
            return tuple(n for n in range(low, high + 1) if n % step == 0)
    return ()


def closed_choices(plan: SlotPlan, syntax: Syntax) -> tuple[ClosedChoice, ...]:
    """The closed fields of ``plan`` written in ``syntax``, in plan order (see the
    module's docstring), within the request's bounds (``MAX_CLOSED_*``); empty when
    the syntax does not write ``name: value`` lines. O(options) per slot."""
    found: list[ClosedChoice] = []
    chars = 0
    for slot in plan.slots:
        if len(found) == MAX_CLOSED_FIELDS:
            break
        if slot.repeatable or slot.nullable or len(slot.segments) != 1:
            continue
        values = _values(slot)
        if not 2 <= len(values) <= MAX_CLOSED_OPTIONS:
            continue
        after = syntax.ref(plan, slot) + ":"
        if len(after) > MAX_CLOSED_TEXT:
            continue
        options: list[str] = []
        for value in values:
            try:
                text = syntax.write(plan, [FrameValue(slot, None, value)])
            except UnexpressibleValue:
                break
            line = text.split("\n", 1)[0]
            if not line.startswith(after) or len(line) == len(after):
                break
            options.append(line[len(after) :])
        if (
            len(options) != len(values)
            or len(set(options)) != len(options)
            or any(len(o) > MAX_CLOSED_TEXT for o in options)
        ):
            continue
        prefixed = any(a != b and b.startswith(a) for a in options for b in options)
        end = "\n" if prefixed else ""
        size = sum(len(o) + len(end) for o in options)
        if chars + size > MAX_CLOSED_OPTION_CHARS:
            continue
        chars += size
        found.append(ClosedChoice(slot.path, after, tuple(options), end))
    return tuple(found)


def normalised(figures: Mapping[str, float]) -> dict[str, float]:
    """``figures`` scaled to sum to 1 (empty when they sum to nothing)."""
    total = sum(figures.values())
    return {k: v / total for k, v in figures.items()} if total > 0 else {}


def calibrated_figures(
    figures: Mapping[str, float], prior: Mapping[str, float] | None
) -> dict[str, float]:
    """Each option's probability over its prior, normalised over the options (an
    option the prior does not hold, or holds at 0, is given the prior's smallest
    figure); ``figures`` normalised when there is no prior."""
    p = normalised(figures)
    q = normalised(prior or {})
    if not p or not q:
        return p
    floor = min((v for v in q.values() if v > 0), default=1.0)
    return normalised({o: v / (q.get(o) or floor) for o, v in p.items()})


def calibrated_choice(
    figures: Mapping[str, float], prior: Mapping[str, float] | None
) -> str | None:
    """The option with the best probability over its prior (:func:`calibrated_figures`);
    without a prior, the likeliest option. ``None`` when no option has a probability."""
    ratios = calibrated_figures(figures, prior)
    return max(ratios, key=ratios.__getitem__) if ratios else None


def content_free_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` with the content of every user message replaced by
    :data:`CONTENT_FREE_TEXT` (the other messages copied as they are)."""
    return [
        {**m, "content": CONTENT_FREE_TEXT} if m.get("role") == "user" else dict(m)
        for m in messages
    ]


def closed_choices_field(
    choices: Sequence[ClosedChoice], content_free: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """The request field (``closed_choices``) that asks the embedded server to calibrate
    ``choices`` against the answer to ``content_free``."""
    return {
        "fields": [choice.to_json() for choice in choices],
        "content_free": [dict(m) for m in content_free],
    }
