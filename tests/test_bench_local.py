"""``slotflight bench`` on the embedded model: one extraction task, slots and json_schema.

Checks that the whole path works with a real model and a real server (the
``cache_prompt`` field included) and that every run is judged; it asserts nothing about
how good the answers are.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from tests.local_support import require_local_model

require_local_model()

from slotflight.bench.accuracy import schema_fields  # noqa: E402
from slotflight.bench.cli import add_bench_arguments, run_bench  # noqa: E402
from slotflight.bench.models import OrderTicket  # noqa: E402

pytestmark = pytest.mark.local_model


def test_bench_runs_and_judges_on_the_embedded_model(tmp_path: Path) -> None:
    parser = argparse.ArgumentParser()
    add_bench_arguments(parser)
    args = parser.parse_args(
        [
            *("--schemas", "ticket", "--limit", "1", "--runs", "1"),
            *("--modes", "slots,json_schema", "--syntax", "v2", "--max-tokens", "160"),
            *("--out", str(tmp_path), "--name", "local"),
        ]
    )
    assert run_bench(args) == 0
    doc = json.loads((tmp_path / "local.json").read_text(encoding="utf-8"))
    assert [r["variant"] for r in doc["runs"]] == ["slots v2", "json_schema"]
    fields = len(schema_fields(OrderTicket.model_json_schema()))
    for run in doc["runs"]:
        assert run["cold"] is True
        assert run["tokens"]["reported"] and run["tokens"]["completion"] > 0
        assert len(run["accuracy"]["fields"]) == fields
        assert all(0.0 <= f["score"] <= 1.0 for f in run["accuracy"]["fields"])
        if run["degenerate"] is not None:
            assert run["degenerate"]["fields"] == fields
    assert doc["environment"]["server"]["kind"] == "embedded"
    assert (tmp_path / "local.md").read_text(encoding="utf-8").startswith("# slotflight bench")
    assert (tmp_path / "local.png").stat().st_size > 10_000


def test_the_grammar_cost_benchmark_times_each_variant_of_each_schema() -> None:
    from benchmarks.grammar_cost import _weights, measure
    from slotflight.bench.models import SCHEMAS

    rows = measure(_weights(None), rounds=1, tokens=6, temperature=0.8)
    variants = ["none"] + [
        f"{g} {a}" for g in ("slots", "json_schema") for a in ("whole", "best first")
    ]
    assert [(r["schema"], r["variant"]) for r in rows] == [
        (schema, variant) for schema in SCHEMAS for variant in variants
    ]
    assert all(r["ms_per_token"] > 0 for r in rows)
    assert all(r["ratio"] == 1.0 for r in rows if r["variant"] == "none")


def test_the_context_cost_benchmark_times_a_read_and_the_decoding_after_each_context(
    tmp_path: Path,
) -> None:
    from benchmarks.context_cost import main

    out = tmp_path / "context.json"
    main(
        [
            "--rounds",
            "1",
            "--contexts",
            "0,64",
            "--input",
            "16",
            "--tokens",
            "4",
            "--json",
            str(out),
        ]
    )
    figures = json.loads(out.read_text(encoding="utf-8"))
    rows = figures["rows"]
    assert [row["context"] for row in rows] == [0, 64]
    assert rows[0]["read_ratio"] == 1.0 and rows[0]["token_ratio"] == 1.0
    assert all(row["read_ms"] > 0 and row["ms_per_token"] > 0 for row in rows)
    assert figures["input"] == 16 and figures["tokens"] == 4 and figures["threads"] >= 1
