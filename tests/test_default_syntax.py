"""One default frame syntax for every entry point (``slotflight.syntax.DEFAULT_SYNTAX``),
and every registered syntax accepted wherever a syntax is named."""

from __future__ import annotations

import inspect

import pytest
from pydantic import ValidationError

from slotflight.assemble.assembler import Assembler
from slotflight.bench import runner
from slotflight.cli import build_parser
from slotflight.cli.demo import _embedded_model, run_demo
from slotflight.client.async_stream import astream
from slotflight.client.request import StreamOptions
from slotflight.client.sync_stream import stream
from slotflight.plan.compiler import compile
from slotflight.prompting.prompt import RetryItem, prompt, retry_prompt
from slotflight.syntax import DEFAULT_SYNTAX, SYNTAXES, get_syntax, grammar, render_frames
from slotflight.web._request import StreamRequestOptions
from tests.client_support import TRIAGE, Triage


def test_the_core_defaults_to_it() -> None:
    plan = compile(Triage)
    assert DEFAULT_SYNTAX in SYNTAXES and get_syntax() is SYNTAXES[DEFAULT_SYNTAX]
    assert Assembler(plan).syntax is get_syntax(DEFAULT_SYNTAX)
    assert prompt(plan) == prompt(plan, DEFAULT_SYNTAX)
    assert grammar(plan) == grammar(plan, DEFAULT_SYNTAX)
    assert render_frames(plan, TRIAGE) == render_frames(plan, TRIAGE, DEFAULT_SYNTAX)
    items = [RetryItem(plan.by_path("priority"), None, "too high", "7")]
    assert retry_prompt(plan, items) == retry_prompt(plan, items, None, DEFAULT_SYNTAX)


def test_the_sdk_defaults_to_it() -> None:
    assert StreamOptions().syntax == DEFAULT_SYNTAX
    for entry in (stream, astream):
        assert inspect.signature(entry).parameters["syntax"].default == DEFAULT_SYNTAX


def test_the_gateway_defaults_to_it_and_takes_every_registered_name() -> None:
    assert StreamRequestOptions().syntax == DEFAULT_SYNTAX
    for name in SYNTAXES:
        assert StreamRequestOptions(syntax=name).syntax == name
    with pytest.raises(ValidationError):
        StreamRequestOptions(syntax="v9")


def test_the_cli_defaults_to_it_and_takes_every_registered_name() -> None:
    parser = build_parser()
    assert parser.parse_args(["compile", "schema.json"]).syntax == DEFAULT_SYNTAX
    for name in SYNTAXES:
        assert parser.parse_args(["compile", "schema.json", "--syntax", name]).syntax == name
        assert parser.parse_args(["demo", "--syntax", name]).syntax == name


def test_the_demo_defaults_to_it_on_the_packaged_model_and_a_server() -> None:
    """Unless named, the demo's syntax is the embedded model's: the default for the
    packaged SmolLM2, and on a server (``None`` reaches the SDK's default)."""
    assert build_parser().parse_args(["demo"]).syntax is None
    assert inspect.signature(run_demo).parameters["syntax"].default is None
    assert _embedded_model(None)[2] == DEFAULT_SYNTAX


def test_the_benchmark_defaults_to_it_and_takes_every_registered_name() -> None:
    assert runner.BenchConfig().syntaxes == (DEFAULT_SYNTAX,)
    url = "http://127.0.0.1:9/v1"
    assert runner.BenchConfig(base_url=url, model="any").syntaxes == (DEFAULT_SYNTAX,)
    # a model of the embedded server answers in its own syntax unless one is named
    for name, model in runner.KNOWN_MODELS.items():
        assert runner.BenchConfig(model=name).syntaxes == (model.syntax or DEFAULT_SYNTAX,)
        assert runner.BenchConfig(base_url=url, model=name).syntaxes == (DEFAULT_SYNTAX,)
        assert runner.BenchConfig(model=name, syntaxes=("v3",)).syntaxes == ("v3",)
    assert set(runner.SYNTAXES) == set(SYNTAXES)
    runner.BenchConfig(syntaxes=tuple(SYNTAXES))  # every one may be measured
