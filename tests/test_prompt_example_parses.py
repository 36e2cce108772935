"""The example frames shown in every prompt parse into a valid object with the real parser."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings

from slotflight.assemble.assembler import Assembler
from slotflight.plan.compiler import compile as compile_schema
from slotflight.prompting.prompt import example_instance, extract_example, prompt
from slotflight.syntax import render_frames
from tests.golden_models import GOLDEN_MODELS
from tests.strategies import Case, model_and_instance


def _check(model: type) -> None:
    plan = compile_schema(model)
    text = prompt(plan)
    frames = extract_example(text)
    asm = Assembler(plan)
    asm.feed(frames)
    asm.close()
    assert asm.outcome.ok, asm.outcome.errors
    assert not asm.diagnostics
    assert plan.model is not None
    assert isinstance(asm.result, plan.model)
    # the example is what the renderer writes for the example instance
    assert frames == render_frames(plan, example_instance(plan))


def test_golden_prompts_examples_parse() -> None:
    for model in GOLDEN_MODELS.values():
        _check(model)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model_and_instance())
def test_random_prompts_examples_parse(case: Case) -> None:
    _check(case.model)
