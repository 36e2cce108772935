"""Shared pieces of the client tests: models, frame text, and clients for a server."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal

import openai
from pydantic import BaseModel, Field, StringConstraints

from slotflight.plan.compiler import compile
from slotflight.plan.instance import FrameValue, walk_instance
from slotflight.plan.model import SlotPlan
from slotflight.syntax import get_syntax, render_frames
from slotflight.testing import ScriptedServer
from tests.assembler_support import as_written

MESSAGES: list[dict[str, Any]] = [
    {"role": "user", "content": "Triage this ticket: the export job fails for big files."}
]


class Triage(BaseModel):
    summary: str = Field(description="One-line summary of the ticket")
    priority: int = Field(ge=1, le=5, description="1 is lowest, 5 is most urgent")
    sentiment: Literal["positive", "neutral", "negative"]
    tags: list[Annotated[str, StringConstraints(max_length=12)]] = Field(
        default_factory=list, max_length=5
    )


class Action(BaseModel):
    owner: str
    due: str = Field(pattern=r"^\d{4}-\d{2}-\d{2}$")


class Plan(BaseModel):
    title: str
    actions: list[Action] = Field(min_length=1, max_length=4)
    notes: str | None = None


TRIAGE = Triage(
    summary="Export fails for big files",
    priority=4,
    sentiment="negative",
    tags=["export", "bug"],
)
PLAN = Plan(
    title="Fix export",
    actions=[Action(owner="Ada", due="2025-01-31"), Action(owner="Lin", due="2025-02-07")],
    notes="Check the worker memory first.",
)


def plan_of(model: type[BaseModel]) -> SlotPlan:
    return compile(model)


# Frame text in the default syntax, built from frame lists: a test drops or replaces
# frames and writes the list, and finds offsets by writing a prefix of it, so no test
# depends on how a syntax spells a frame.

#: A frame given by hand: ``(slot_id, value)`` or ``(slot_id, value, index)``.
Frame = tuple[int, Any] | tuple[int, Any, int]


def frame_values(instance: BaseModel) -> list[FrameValue]:
    """The frames a well-behaved model writes for ``instance``, in order."""
    return list(walk_instance(compile(type(instance)), instance))


def _key(f: FrameValue) -> tuple[int, int | None]:
    return (f.slot.id, f.index)


def _text(plan: SlotPlan, values: Sequence[FrameValue], *, end: bool = True) -> str:
    syntax = get_syntax()
    text = syntax.write(plan, values)
    if end:
        return text
    trailer = syntax.write(plan, [])
    assert text.endswith(trailer)
    return text[: len(text) - len(trailer)]


def frames(instance: BaseModel) -> str:
    """The frame text a well-behaved model writes for ``instance``."""
    return render_frames(compile(type(instance)), instance)


def _given(plan: SlotPlan, given: Sequence[Frame]) -> list[FrameValue]:
    return [as_written(plan[f[0]], f[2] if len(f) == 3 else None, f[1]) for f in given]


def written(model: type[BaseModel], *given: Frame) -> str:
    """A whole answer made of ``given`` frames, in that order (a follow-up's answer)."""
    plan = compile(model)
    return _text(plan, _given(plan, given))


def inside_frame(model: type[BaseModel], given: Sequence[Frame], at: int) -> int:
    """A byte offset in the middle of frame ``at`` (inside its value) of
    ``written(model, *given)``."""
    plan = compile(model)
    return _offset(plan, _given(plan, given), at, inside=True)


def edited(
    instance: BaseModel,
    *,
    drop: Sequence[tuple[int, int | None]] = (),
    replace: Mapping[tuple[int, int | None], Any] | None = None,
) -> str:
    """The answer for ``instance`` with the frames ``drop`` names (``(slot_id, index)``)
    left out and those ``replace`` names carrying another value (written as is)."""
    replace = replace or {}
    values = frame_values(instance)
    keys = {_key(f) for f in values}
    assert set(drop) | set(replace) <= keys, "a key names no frame of the instance"
    out = [
        as_written(f.slot, f.index, replace[_key(f)]) if _key(f) in replace else f
        for f in values
        if _key(f) not in drop
    ]
    return _text(compile(type(instance)), out)


def without_frame(instance: BaseModel, slot_id: int, index: int | None = None) -> str:
    """The answer for ``instance`` without the frame of ``slot_id`` (at ``index``)."""
    return edited(instance, drop=[(slot_id, index)])


def replace_value(instance: BaseModel, slot_id: int, value: Any, index: int | None = None) -> str:
    """The answer for ``instance`` with ``value`` written in the frame of ``slot_id``."""
    return edited(instance, replace={(slot_id, index): value})


def bytes_before(
    instance: BaseModel, slot_id: int, index: int | None = None, *, inside: bool = False
) -> int:
    """How many bytes of :func:`frames` come before the frame of ``slot_id`` (at
    ``index``); ``inside``: up to the middle of that frame's text (inside its value)."""
    values = frame_values(instance)
    at = next(i for i, f in enumerate(values) if _key(f) == (slot_id, index))
    return _offset(compile(type(instance)), values, at, inside=inside)


def _offset(plan: SlotPlan, values: Sequence[FrameValue], at: int, *, inside: bool) -> int:
    before = _text(plan, values[:at], end=False).encode()
    if not inside:
        return len(before)
    through = _text(plan, values[: at + 1], end=False).encode()
    return len(before) + (len(through) - len(before)) // 2


def asked_for(plan: SlotPlan, text: str) -> set[tuple[int, int | None]]:
    """The frames a retry prompt asks for: ``(slot_id, index)`` of every list line that
    starts with a frame's reference (:meth:`Syntax.ref`, the default syntax)."""
    syntax = get_syntax()
    refs = {
        syntax.ref(plan, s, i): (s.id, i)
        for s in plan.slots
        for i in [None, *(range(16) if s.repeatable else ())]
    }
    found: set[tuple[int, int | None]] = set()
    for line in text.split("\n"):
        if not line.startswith("- "):
            continue
        rest = line[2:]
        named = [r for r in refs if rest.startswith(r) and rest[len(r) : len(r) + 1] in (" ", ":")]
        if named:
            found.add(refs[max(named, key=len)])
    return found


def close_while_reading(stream: Any, server: ScriptedServer) -> list[BaseException]:
    """Read ``stream`` to its end in another thread, close it from this one once the
    server has its first request, and return what the reading raised."""
    errors: list[BaseException] = []

    def read() -> None:
        try:
            stream.final()
        except BaseException as exc:
            errors.append(exc)

    reader = threading.Thread(target=read)
    reader.start()
    server.wait_for(lambda r: len(r) == 1)
    stream.close()
    reader.join(10)
    assert not reader.is_alive()
    return errors


def sync_client(server: ScriptedServer, **options: Any) -> openai.OpenAI:
    options.setdefault("max_retries", 0)
    return openai.OpenAI(base_url=server.base_url, api_key="test", **options)


def async_client(server: ScriptedServer, **options: Any) -> openai.AsyncOpenAI:
    options.setdefault("max_retries", 0)
    return openai.AsyncOpenAI(base_url=server.base_url, api_key="test", **options)


def last_message(body: Any) -> str:
    """The content of the last message of a recorded request body."""
    content = body["messages"][-1]["content"]
    assert isinstance(content, str)
    return content
