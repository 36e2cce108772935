"""The prompt and retry templates: golden files, layout rules, example frames.

Golden files live in ``tests/golden/``. After an intended change to a template or to
the compiler, regenerate them with ``SLOTFLIGHT_UPDATE_GOLDEN=1 pytest tests/test_prompt.py``
and review the diff; without that variable a difference fails.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path
from typing import Annotated

import pytest
from hypothesis import HealthCheck, given, settings
from pydantic import BaseModel, Field

from slotflight.plan.compiler import compile
from slotflight.plan.model import SlotPlan
from slotflight.prompting.prompt import (
    EXAMPLE_BEGIN,
    EXAMPLE_END,
    RetryItem,
    example_instance,
    extract_example,
    prompt,
    retry_prompt,
)
from slotflight.prompting.templates import prompts_dir
from slotflight.syntax import render_frames
from tests.golden_models import GOLDEN_MODELS, TicketTriage
from tests.strategies import Case, model_and_instance

GOLDEN = Path(__file__).parent / "golden"


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("SLOTFLIGHT_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"{path} is missing: run with SLOTFLIGHT_UPDATE_GOLDEN=1 to create it"
    assert text == path.read_text(encoding="utf-8"), (
        f"{name} differs from the golden file; if the change is intended, rerun with "
        "SLOTFLIGHT_UPDATE_GOLDEN=1 and review the diff"
    )


def assert_no_indented_lines(text: str) -> None:
    """The layout rule: no line starts with whitespace.

    Template text, slot lines, JSON context and the example frames all start at
    column 0; example values are made up without leading whitespace on any line. (A
    frame body line may start with whitespace only if the value itself does, which no
    prompt value does.)
    """
    for number, line in enumerate(text.split("\n"), 1):
        assert line == line.lstrip(), f"line {number} is indented: {line!r}"
    assert "\r" not in text and "\t" not in text


@pytest.mark.parametrize("name", sorted(GOLDEN_MODELS))
def test_prompt_matches_golden_file(name: str) -> None:
    check_golden(f"prompt_{name}.txt", prompt(compile(GOLDEN_MODELS[name])))


def triage_retry(plan: SlotPlan) -> str:
    requests = [
        RetryItem(plan.by_path("priority"), None, "Input should be less than or equal to 5", "7"),
        RetryItem(
            plan.by_path("tags[]"), None, "List should have at most 6 items after validation"
        ),
        RetryItem(
            plan.by_path("action_items[].due"),
            1,
            "1 validation error for date\n  Input should be a valid date",
            "  next friday\n",
        ),
    ]
    accepted = {
        "summary": "Export to CSV fails.",
        "urgent": True,
        "action_items": [{"owner": "ops"}],
    }
    return retry_prompt(plan, requests, accepted)


def test_retry_prompt_matches_golden_file() -> None:
    check_golden("retry_triage.txt", triage_retry(compile(TicketTriage)))


@pytest.mark.parametrize("name", sorted(GOLDEN_MODELS))
def test_prompts_have_no_indented_lines(name: str) -> None:
    plan = compile(GOLDEN_MODELS[name])
    assert_no_indented_lines(prompt(plan))


def test_retry_prompt_shows_reasons_rejected_text_and_context() -> None:
    plan = compile(TicketTriage)
    text = triage_retry(plan)
    assert_no_indented_lines(text)
    assert "- <2> priority:" in text
    assert 'Input should be less than or equal to 5 Rejected text: "7"' in text
    assert "<5:0>, <5:1>, … (the whole list, from index 0)" in text
    assert "- <8:1> action_items[1].due:" in text
    assert 'Rejected text: "  next friday\\n"' in text
    context = {
        "summary": "Export to CSV fails.",
        "urgent": True,
        "action_items": [{"owner": "ops"}],
    }
    assert json.dumps(context, separators=(",", ":")) in text.split("\n")
    example = extract_example(text)
    assert example.startswith("<2>\n3\n</2>\n<5:0>\n")
    assert "<8:1>\n2025-01-31\n</8:1>\n" in example
    assert "</2>" in example and "<1>" not in example


def test_retry_prompt_without_context_and_item_field_needs_index() -> None:
    plan = compile(TicketTriage)
    text = retry_prompt(plan, [RetryItem(plan.by_path("urgent"), None, "bad", None)])
    assert "already accepted" not in text and "Rejected text" not in text
    with pytest.raises(ValueError, match="index"):
        retry_prompt(plan, [RetryItem(plan.by_path("action_items[].owner"), None, "x")])


@pytest.mark.parametrize("name", sorted(GOLDEN_MODELS))
def test_example_is_the_rendered_example_instance(name: str) -> None:
    model = GOLDEN_MODELS[name]
    plan = compile(model)
    text = prompt(plan)
    assert text.count(EXAMPLE_BEGIN) == 1 and text.count(EXAMPLE_END) == 1
    instance = example_instance(plan)
    model.model_validate(instance)
    assert extract_example(text) == render_frames(plan, instance)


def test_prompt_lists_every_slot_with_its_facts() -> None:
    plan = compile(TicketTriage)
    lines = prompt(plan).split("\n")
    for s in plan.slots:
        tag = f"- <{s.id}:i> " if s.repeatable else f"- <{s.id}> "
        (line,) = [line for line in lines if line.startswith(tag)]
        assert s.instruction in line
        assert ("required" in line) == (s.required or "required list" in line)
    assert any("one of: positive | neutral | negative" in line for line in lines)
    assert any("integer, 1-5" in line for line in lines)
    assert any("optional list, 0 to 6 items" in line for line in lines)


def test_example_respects_bounds_and_min_items() -> None:
    class Box(BaseModel):
        size: Annotated[int, Field(gt=10, lt=13)]
        ratio: Annotated[float, Field(ge=2, le=3)]
        code: Annotated[str, Field(min_length=30, max_length=32)]
        short: Annotated[str, Field(max_length=3)]
        tags: Annotated[list[str], Field(min_length=3)]
        one: Annotated[list[int], Field(max_length=1)]
        when: dt.datetime | None = None

    plan = compile(Box)
    example = example_instance(plan)
    Box.model_validate(example)
    assert len(example["tags"]) == 3 and len(example["one"]) == 1


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model_and_instance())
def test_random_prompts_have_no_indented_lines(case: Case) -> None:
    plan = compile(case.model)
    text = prompt(plan)
    assert_no_indented_lines(text)
    assert extract_example(text) == render_frames(plan, example_instance(plan))


def test_templates_come_from_the_prompts_folder() -> None:
    folder = prompts_dir()
    assert (folder / "v1" / "prompt.j2").is_file() and (folder / "v1" / "retry.j2").is_file()
    with pytest.raises(ValueError, match="syntax"):
        prompt(compile(TicketTriage), syntax="v9")
