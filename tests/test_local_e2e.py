"""End to end on the embedded model: SDK -> local server -> llama.cpp with the plan's
grammar -> frames -> a validated object, in every frame syntax; and the demo itself."""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Literal

import pytest
from openai import OpenAI
from pydantic import BaseModel, Field
from rich.console import Console

from tests.local_support import assert_sensible, require_local_model

require_local_model()

import slotflight  # noqa: E402
from slotflight.cli.demo import Triage, run_demo  # noqa: E402
from slotflight.local import LocalServer, start_local_server  # noqa: E402
from slotflight.syntax import SYNTAXES  # noqa: E402

pytestmark = pytest.mark.local_model


class Ticket(BaseModel):
    summary: str = Field(description="One-sentence summary", max_length=200)
    sentiment: Literal["positive", "neutral", "negative"]
    priority: int = Field(ge=1, le=5, description="1 lowest, 5 urgent")
    tags: list[str] = Field(min_length=1, max_length=3, description="Short topic tags")


MESSAGES = [{"role": "user", "content": "Ticket: the CSV export times out for big files. Urgent!"}]


@pytest.fixture(scope="module")
def server() -> Iterator[LocalServer]:
    with start_local_server(seed=3) as running:
        yield running


@pytest.mark.parametrize("syntax", sorted(SYNTAXES))
def test_frames_through_the_local_server_give_a_validated_object(
    server: LocalServer, syntax: str
) -> None:
    client = OpenAI(base_url=server.base_url, api_key="local", max_retries=0)
    events: list[str] = []
    with slotflight.stream(
        client,
        model=server.model,
        messages=MESSAGES,
        output=Ticket,
        syntax=syntax,
        grammar="llama.cpp",
        grammar_max_string_chars=120,
        max_tokens=300,
        temperature=0.2,
        seed=3,
        max_attempts=3,
    ) as s:
        for event in s:
            events.append(event.type)
            assert isinstance(s.state, dict)
        result = s.final()
        usage = s.usage.total
    assert isinstance(result, Ticket)
    assert Ticket.model_validate(result.model_dump()) == result
    assert events[-1] == "done"
    assert "slot-complete" in events
    assert usage.completion_tokens > 0


def test_the_demo_runs_on_the_embedded_model() -> None:
    out = io.StringIO()
    code = run_demo(console=Console(file=out, width=10_000, force_terminal=False))
    text = out.getvalue()
    assert code == 0
    assert "time to first field" in text
    final = Triage.model_validate_json(text.strip().splitlines()[-1]).model_dump(mode="json")
    assert_sensible(Triage, final)


def test_the_embedded_server_gives_each_field_a_confidence(server: LocalServer) -> None:
    client = OpenAI(base_url=server.base_url, api_key="local", max_retries=0)
    with slotflight.stream(
        client,
        model=server.model,
        messages=MESSAGES,
        output=Ticket,
        grammar="llama.cpp",
        grammar_max_string_chars=120,
        max_tokens=300,
        temperature=0.2,
        seed=3,
        confidence=True,
    ) as s:
        completes = [e for e in s if isinstance(e, slotflight.SlotComplete)]
        s.final()
        figures = s.confidence()
    assert completes
    assert set(figures) == set(s.completed())
    assert all(0.0 <= figure <= 1.0 for figure in figures.values())
    assert all(e.confidence is not None for e in completes)
