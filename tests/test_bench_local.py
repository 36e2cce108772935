"""``slotflight bench`` on the embedded model: one extraction task, slots and json_schema.

Checks that the whole path works with a real model and a real server (the
``cache_prompt`` field included) and that every run is judged; it asserts nothing about
how good the answers are.
"""

from __future__ import annotations

import argparse
import json
import statistics
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


def _triage_run(task_id: str, output: dict[str, object], seed: int) -> dict[str, object]:
    """A slots run of the triage task ``task_id`` that wrote ``output`` in one request."""
    from dataclasses import asdict

    from slotflight.bench.accuracy import score_object
    from slotflight.bench.models import load_tasks
    from slotflight.plan.compiler import compile as compile_plan
    from slotflight.syntax import render_frames

    task = {t.id: t for t in load_tasks()}[task_id]
    schema = task.model.model_json_schema()
    scores = [asdict(s) for s in score_object(schema, output, task.gold)]
    mean = statistics.fmean(s["score"] for s in scores)
    return {
        "mode": "slots",
        "task": task_id,
        "seed": seed,
        "syntax": "v4",
        "text": render_frames(compile_plan(task.model), output, "v4"),
        "final": output,
        "final_valid": True,
        "accuracy": {"mean": mean, "fields": scores},
    }


def test_closed_choices_reads_the_same_figures_whatever_was_read_before() -> None:
    from benchmarks.closed_choices import _Reader, closed_fields
    from benchmarks.grammar_cost import _weights
    from slotflight.bench.models import load_tasks
    from slotflight.bench.runner import first_request_messages

    task = {t.id: t for t in load_tasks()}["triage-001"]
    fields = closed_fields(task.model.model_json_schema())
    messages = first_request_messages(task, "v4")
    text = "summary: A refund is asked for.\nsentiment: negative\npriority: 4\nneeds_human:"
    reader = _Reader(_weights(None), None)
    sentiment, priority, human = fields[0], fields[1], fields[2]
    first = reader.options(messages, text[: text.index("sentiment:") + 10], sentiment)
    # Read further (the cache now holds more), back, and with another option set.
    later = reader.options(messages, text, human)
    again = reader.options(messages, text[: text.index("sentiment:") + 10], sentiment)
    between = reader.options(messages, text[: text.index("priority:") + 9], priority)
    fresh = _Reader(_weights(None), None)
    anew = fresh.options(messages, text, human)
    for kind in first:
        assert anew[kind] == pytest.approx(later[kind])
        assert again[kind] == pytest.approx(first[kind])
    for figures, field in ((first, sentiment), (later, human), (between, priority)):
        assert set(figures["sequence"]) == set(field.options)
        for kind in ("sequence", "first_token", "top_20"):
            assert set(figures[kind]) <= set(field.options)
            if figures[kind]:
                assert sum(figures[kind].values()) == pytest.approx(1.0)
    # The blank before a digit is a token of its own here: priority's options are
    # told apart by the token after it.
    assert set(between["first_token"]) == set(priority.options)


def test_closed_choices_measures_a_report_against_its_content_free_answer(
    tmp_path: Path,
) -> None:
    from benchmarks.closed_choices import main
    from slotflight.bench.models import load_tasks

    gold = {t.id: t.gold for t in load_tasks()}
    wrong = dict(gold["triage-004"] or {})
    wrong["sentiment"] = next(s for s in ("positive", "mixed") if s != wrong["sentiment"])
    runs = [
        _triage_run("triage-001", dict(gold["triage-001"] or {}), 1),
        _triage_run("triage-004", wrong, 2),
    ]
    report = tmp_path / "report.json"
    json_run = {"mode": "json_schema", "task": "triage-001", "seed": 1}
    report.write_text(json.dumps({"runs": [*runs, json_run]}), encoding="utf-8")
    free = _triage_run("triage-005", dict(gold["triage-005"] or {}), 1)
    content_free = tmp_path / "free.json"
    content_free.write_text(
        json.dumps({"runs": [{**free, "task": "free-triage"}]}), encoding="utf-8"
    )
    out = tmp_path / "closed.json"
    main([str(report), "--content-free", str(content_free), "--seeds", "1,2", "--json", str(out)])
    document = json.loads(out.read_text(encoding="utf-8"))
    rows = document["fields"]
    assert [(r["task"], r["field"]) for r in rows] == [
        (task, field)
        for task in ("triage-001", "triage-004")
        for field in ("sentiment", "priority", "needs_human", "product_area")
    ]
    assert all(
        r["prior"] and set(r["prior"]["sequence"]) == set(r["figures"]["sequence"]) for r in rows
    )
    fields = document["summary"]["fields"]
    assert fields["all closed fields"]["n"] == 8
    assert fields["all closed fields"]["written"] == pytest.approx(100 * 7 / 8)
    assert fields["sentiment"]["written"] == 50.0
    whole = document["summary"]["whole"]
    assert whole["runs"] == 2
    # A run's accuracy with the values written is the one it was scored with.
    assert [r["written"] for r in document["runs"]] == pytest.approx(
        [run["accuracy"]["mean"] for run in runs]
    )
