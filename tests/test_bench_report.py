"""The benchmark's summary figures, computed from hand-made results documents."""

from __future__ import annotations

from typing import Any

import pytest

from slotflight.bench.report import summarize, summary_markdown


def _run(variant: str, task: str, repeat: int, scores: list[float], valid: bool) -> dict[str, Any]:
    return {
        "variant": variant,
        "mode": variant.split()[0],
        "task": task,
        "schema": task.split("-")[0],
        "repeat": repeat,
        "final_valid": valid,
        "accuracy": {
            "mean": sum(scores) / len(scores),
            "fields": [{"path": f"f{i}", "kind": "enum", "score": s} for i, s in enumerate(scores)],
        },
        "degenerate": None,
        "latency": {"first_field_s": None, "object_s": None},
        "cold": False,
        "tokens": {"reported": False},
        "requests": 1,
        "stream_valid": {"share": None},
        "unsafe_partial": {"share": None},
        "sse_bytes": None,
    }


def _figures(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s.variant: {k: v.value for k, v in s.figures.items()} for s in summarize(doc)}


def test_accuracy_gain_over_json_schema_is_paired_on_outputs_both_completed() -> None:
    doc = {
        "runs": [
            # a-0 and b-0: both valid; a-1: only slots valid; c-0: only json_schema valid
            _run("json_schema", "ticket-a", 0, [1.0, 1.0], True),
            _run("slots v3", "ticket-a", 0, [1.0, 0.0], True),
            _run("json_schema", "ticket-b", 0, [0.0, 0.0, 0.0, 0.0], True),
            _run("slots v3", "ticket-b", 0, [1.0, 1.0, 1.0, 0.0], True),
            _run("json_schema", "ticket-a", 1, [0.0, 0.0], False),
            _run("slots v3", "ticket-a", 1, [1.0, 1.0], True),
            _run("json_schema", "ticket-c", 0, [0.0, 1.0], True),
            _run("slots v3", "ticket-c", 0, [0.0, 0.0], False),
        ]
    }
    figures = _figures(doc)
    # a-0: 0.5 - 1.0; b-0: 0.75 - 0.0; each pair counts once
    assert figures["slots v3"]["accuracy_gain"] == (-0.5 + 0.75) / 2
    assert figures["json_schema"]["accuracy_gain"] is None
    # each variant on its own valid outputs, pooled over fields
    assert figures["slots v3"]["accuracy_valid"] == 6 / 8
    assert figures["json_schema"]["accuracy_valid"] == 3 / 8
    assert "accuracy minus json_schema's" in summary_markdown(summarize(doc))


def test_without_json_schema_there_is_no_gain() -> None:
    doc = {"runs": [_run("slots v3", "ticket-a", 0, [1.0], True)]}
    assert _figures(doc)["slots v3"]["accuracy_gain"] is None
    assert "json_schema" not in summary_markdown(summarize(doc))


def test_the_share_of_prompted_answers_stopped_early_or_fenced() -> None:
    doc = {
        "runs": [
            {**_run("json_prompt", "ticket-a", 0, [0.0], False), "stopped": True},
            {**_run("json_prompt", "ticket-b", 0, [1.0], True), "stopped": False},
            {**_run("json_prompt", "ticket-c", 0, [1.0], True), "fenced": True},
            {**_run("json_prompt", "ticket-d", 0, [1.0], True), "fenced": False},
            _run("slots v3", "ticket-a", 0, [1.0], True),  # older records: no field
        ]
    }
    figures = _figures(doc)
    assert figures["json_prompt"]["stopped"] == 0.5
    assert figures["json_prompt"]["fenced"] == 0.5
    assert figures["slots v3"]["stopped"] is None
    assert figures["slots v3"]["fenced"] is None
    assert "object in a code fence" in summary_markdown(summarize(doc))


def test_variants_read_slots_first_then_the_json_modes_whatever_ran_first() -> None:
    """A log whose slots runs were added after the JSON modes' (a slots-only rerun
    resumed into it) still reports slots first, then json_schema, then json_prompt."""
    doc = {
        "runs": [
            _run("json_prompt", "ticket-a", 0, [0.0], False),
            _run("json_schema", "ticket-a", 0, [1.0], True),
            _run("slots v3", "ticket-a", 0, [1.0], True),
            _run("slots v2", "ticket-a", 0, [1.0], True),
        ]
    }
    assert [s.variant for s in summarize(doc)] == [
        "slots v3",
        "slots v2",
        "json_schema",
        "json_prompt",
    ]


def _seeded(variant: str, task: str, seed: int, scores: list[float], valid: bool) -> dict[str, Any]:
    """A run of a log started with ``--seed SEED --runs 1``: its only repetition, 0."""
    return {**_run(variant, task, 0, scores, valid), "seed": seed}


def test_logs_of_one_seed_each_joined_keep_their_seeds_apart() -> None:
    """Three logs of one seed each (every run repetition 0) read as one document: the
    per-seed spread and the pairing with json_schema go by seed, as the legend says."""
    doc = {
        "runs": [
            _seeded("slots v4", "ticket-a", 1, [1.0, 1.0], True),
            _seeded("json_schema", "ticket-a", 1, [1.0, 0.0], True),
            _seeded("slots v4", "ticket-a", 2, [0.0, 0.0], True),
            _seeded("json_schema", "ticket-a", 2, [0.0, 0.0], True),
            _seeded("slots v4", "ticket-a", 3, [1.0, 0.0], True),
            _seeded("json_schema", "ticket-a", 3, [1.0, 1.0], True),
        ]
    }
    summaries = {s.variant: s for s in summarize(doc, resamples=10)}
    slots, reference = summaries["slots v4"], summaries["json_schema"]
    assert slots.seeds == reference.seeds == 3
    accuracy = slots.figures["accuracy"]
    assert (accuracy.seed_min, accuracy.seed_max) == (0.0, 1.0)
    # seed 1: 1.0 - 0.5; seed 2: 0.0 - 0.0; seed 3: 0.5 - 1.0
    assert slots.figures["accuracy_gain"].value == pytest.approx(0.0)
    assert reference.figures["accuracy_gain"].value is None


def test_runs_without_a_seed_are_told_apart_by_repetition() -> None:
    doc = {
        "runs": [
            _run("slots v4", "ticket-a", 0, [1.0], True),
            _run("json_schema", "ticket-a", 0, [0.0], True),
            _run("slots v4", "ticket-a", 1, [0.0], True),
            _run("json_schema", "ticket-a", 1, [0.0], True),
        ]
    }
    summaries = {s.variant: s for s in summarize(doc, resamples=10)}
    assert summaries["slots v4"].seeds == 2
    assert summaries["slots v4"].figures["accuracy_gain"].value == pytest.approx(0.5)


def test_the_first_field_after_the_first_piece_counts_warm_runs_with_their_chunks() -> None:
    def timed(task: str, first: float | None, pieces: list[list[Any]] | None, cold: bool) -> Any:
        run = _run("slots v4", task, 0, [1.0], True)
        run["latency"] = {"first_field_s": first, "object_s": None}
        run["cold"] = cold
        if pieces is not None:
            run["chunk_log"] = pieces
        return run

    doc = {
        "runs": [
            timed("ticket-a", 3.0, [[2.0, "name:"], [2.5, " Ana"]], False),  # 1.0
            timed("ticket-b", 2.5, [[2.2, "name:"]], False),  # 0.3
            timed("ticket-c", 2.9, [[2.4, "name:"]], False),  # 0.5
            timed("ticket-d", 9.0, [[1.0, "name:"]], True),  # cold: not counted
            timed("ticket-e", 4.0, None, False),  # no chunk log: not counted
            timed("ticket-f", None, [[1.0, "name:"]], False),  # no field: not counted
        ]
    }
    figures = _figures(doc)["slots v4"]
    assert figures["first_field_after_first_piece"] == pytest.approx(0.5)
    assert figures["first_field_warm"] == pytest.approx(2.95)  # ticket-e counts there
    assert "after the first streamed piece" in summary_markdown(summarize(doc))
