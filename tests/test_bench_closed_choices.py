"""The closed-choice measurement's own logic: which fields are closed choices, the
calibrated choice, and what a choice makes of a run's accuracy (the model's reading
is tested on the embedded model in ``test_bench_local``)."""

from __future__ import annotations

import enum

import pytest
from pydantic import BaseModel, Field

from benchmarks.closed_choices import (
    CHOICES,
    MAX_RANGE,
    ClosedField,
    _run_accuracy,
    calibrated,
    closed_fields,
    normalised,
    summary,
)
from slotflight.bench.models import SCHEMAS


def test_the_closed_fields_of_the_benchmark_schemas() -> None:
    found = {
        name: [(f.name, f.options) for f in closed_fields(model.model_json_schema())]
        for name, model in SCHEMAS.items()
    }
    assert found["triage"] == [
        ("sentiment", ("positive", "neutral", "negative", "mixed")),
        ("priority", ("1", "2", "3", "4", "5")),
        ("needs_human", ("true", "false")),
        (
            "product_area",
            (
                "billing",
                "authentication",
                "performance",
                "integrations",
                "mobile_app",
                "data_export",
            ),
        ),
    ]
    # reading_time_min runs from 1 to 60: too many values to be a closed choice.
    assert [name for name, _ in found["outline"]] == ["audience"]
    assert [name for name, _ in found["product"]] == ["currency", "in_stock"]
    assert [name for name, _ in found["ticket"]] == [
        "product",
        "issue_type",
        "sentiment",
        "refund_requested",
    ]
    assert found["meeting"] == []


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Form(BaseModel):
    colour: Colour
    size: int = Field(ge=0, le=MAX_RANGE - 1)
    wide: int = Field(ge=0, le=MAX_RANGE)
    codes: list[str]
    level: int = Field(ge=3)
    only: Colour | None = None


def test_a_referenced_enum_and_an_integer_range_are_closed_and_the_rest_is_not() -> None:
    assert closed_fields(Form.model_json_schema()) == [
        ClosedField("colour", ("red", "blue")),
        ClosedField("size", tuple(str(n) for n in range(MAX_RANGE))),
    ]


def test_an_enum_of_other_values_than_strings_and_a_single_option_are_left_out() -> None:
    schema = {
        "properties": {
            "code": {"enum": [1, 2]},
            "fixed": {"enum": ["only"]},
            "kind": {"enum": ["a", "b"]},
        }
    }
    assert closed_fields(schema) == [ClosedField("kind", ("a", "b"))]


def test_normalised_scales_to_one_and_nothing_stays_nothing() -> None:
    assert normalised({"a": 1.0, "b": 3.0}) == {"a": 0.25, "b": 0.75}
    assert normalised({"a": 0.0}) == {}
    assert normalised({}) == {}


def test_calibration_takes_the_best_probability_over_prior() -> None:
    # The model says "a" whatever the input holds (prior 0.9); with this input "b"
    # gains far more against its prior than "a" does.
    assert calibrated({"a": 0.7, "b": 0.3}, {"a": 0.9, "b": 0.1}) == "b"
    assert calibrated({"a": 0.95, "b": 0.05}, {"a": 0.9, "b": 0.1}) == "a"
    # An even prior changes nothing.
    assert calibrated({"a": 0.6, "b": 0.4}, {"a": 0.5, "b": 0.5}) == "a"
    # No prior at all: the likeliest option.
    assert calibrated({"a": 0.2, "b": 0.8}, {}) == "b"
    assert calibrated({}, {"a": 1.0}) is None


def test_an_option_the_prior_lacks_gets_the_priors_smallest_figure() -> None:
    # "c" is missing from the prior: it is given 0.1 (not 0, which would always win).
    assert calibrated({"a": 0.5, "b": 0.3, "c": 0.2}, {"a": 0.9, "b": 0.1}) == "b"
    assert calibrated({"a": 0.5, "b": 0.1, "c": 0.4}, {"a": 0.9, "b": 0.1}) == "c"


def _run(valid: bool, scores: dict[str, float]) -> dict[str, object]:
    fields = [{"path": path, "kind": "enum", "score": s} for path, s in scores.items()]
    return {"final_valid": valid, "accuracy": {"mean": 0.0, "fields": fields}}


def test_a_runs_accuracy_with_some_fields_scored_again() -> None:
    run = _run(True, {"a": 1.0, "b": 0.0, "c": 0.5, "d": 0.5})
    assert _run_accuracy(run, {}) == pytest.approx(0.5)
    assert _run_accuracy(run, {"b": 1.0}) == pytest.approx(0.75)
    assert _run_accuracy(run, {"a": 0.0, "b": 1.0}) == pytest.approx(0.5)
    # An object that did not validate scores 0, whatever a choice would change.
    assert _run_accuracy(_run(False, {"a": 1.0}), {"a": 1.0}) == 0.0


def _row(field: str, gold: str, written: str, calibrated: str | None = None) -> dict[str, object]:
    """A field whose every choice is the value written, but the calibrated sequence one."""
    choices = {label: written for label, _, _ in CHOICES}
    choices["calibrated, sequence"] = calibrated or written
    return {"field": field, "gold": gold, "written": written, "choices": choices}


def test_the_summary_counts_each_choice_against_gold_and_pairs_the_runs() -> None:
    result = {
        "fields": [
            _row("mood", "sad", "happy", "sad"),
            _row("mood", "happy", "happy"),
            _row("kind", "x", "x", "y"),
            {"field": "kind", "gold": None, "written": "x", "choices": {}},
        ],
        "runs": [
            {
                "written": 0.5,
                "argmax, sequence": 0.5,
                "calibrated, sequence": 0.75,
                "calibrated, first token": 0.5,
                "calibrated, top 20": 0.5,
            },
            {
                "written": 0.25,
                "argmax, sequence": 0.25,
                "calibrated, sequence": 0.25,
                "calibrated, first token": 0.25,
                "calibrated, top 20": 0.25,
            },
        ],
    }
    figures = summary(result)
    mood = figures["fields"]["mood"]
    assert mood["n"] == 2 and mood["written"] == 50.0 and mood["calibrated, sequence"] == 100.0
    assert figures["fields"]["kind"]["calibrated, sequence"] == 0.0
    assert figures["fields"]["all closed fields"]["n"] == 3
    whole = figures["whole"]
    assert whole["runs"] == 2 and whole["written"] == pytest.approx(37.5)
    assert whole["calibrated, sequence"]["paired"] == pytest.approx(12.5)
    low, high = whole["calibrated, sequence"]["interval"]
    assert 0.0 <= low <= 12.5 <= high <= 25.0
    assert whole["calibrated, top 20"]["interval"] == [0.0, 0.0]
