"""Shared pieces of the client tests: models, frame text, and clients for a server."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

import openai
from pydantic import BaseModel, Field, StringConstraints

from slotflight.plan.compiler import compile
from slotflight.plan.model import SlotPlan
from slotflight.syntax import render_frames
from slotflight.testing import ScriptedServer

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


def frames(instance: BaseModel) -> str:
    """The frame text a well-behaved model writes for ``instance``."""
    return render_frames(compile(type(instance)), instance)


def frame(slot_id: int, value: str, index: int | None = None) -> str:
    tag = str(slot_id) if index is None else f"{slot_id}:{index}"
    return f"<{tag}>\n{value}\n</{tag}>\n"


def without_frame(text: str, slot_id: int, index: int | None = None) -> str:
    """``text`` with the frame of ``slot_id`` (at ``index``) cut out."""
    tag = str(slot_id) if index is None else f"{slot_id}:{index}"
    cut, count = re.subn(rf"<{tag}>\n.*?\n</{tag}>\n", "", text, flags=re.S)
    assert count == 1, f"no single frame <{tag}> in the text"
    return cut


def replace_value(text: str, slot_id: int, value: str, index: int | None = None) -> str:
    tag = str(slot_id) if index is None else f"{slot_id}:{index}"
    cut, count = re.subn(
        rf"<{tag}>\n.*?\n</{tag}>\n", frame(slot_id, value, index), text, flags=re.S
    )
    assert count == 1, f"no single frame <{tag}> in the text"
    return cut


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


def tags_named(text: str) -> set[str]:
    """Every frame tag written in ``text`` (``2``, ``4:0`` …), open or close."""
    return set(re.findall(r"</?(\d+(?::\d+)?)>", text))


def slot_ids_named(text: str) -> set[int]:
    """The slot ids of every frame tag written in ``text``."""
    return {int(tag.split(":")[0]) for tag in tags_named(text)}
