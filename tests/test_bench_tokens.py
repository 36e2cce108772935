"""The token benchmark: every format writes every object; the default syntax costs fewer
tokens than JSON as the models write it, for the same content."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.tokens import (
    FORMATS,
    RESULTS,
    gold_instances,
    load_instances,
    main,
    measure,
    results_path,
    table,
)
from slotflight.bench.models import SCHEMAS
from slotflight.syntax import DEFAULT_SYNTAX
from tests.local_support import require_local_model


def test_every_format_writes_every_hand_written_instance() -> None:
    rows = load_instances()
    assert len(rows) >= 12 and {r["schema"] for r in rows} == {
        "triage",
        "product",
        "outline",
        "meeting",
    }
    result = measure(rows, len)  # characters stand in for tokens here
    assert set(result["totals"]) == set(FORMATS)
    assert result["ratio"]["json"] == 1.0
    text = table(result)
    assert all(r["task"] in text for r in rows)


def test_the_gold_answers_cover_every_schema_and_json_spaced_is_json_with_blanks() -> None:
    rows = gold_instances()
    assert len(rows) >= 50 and {r["schema"] for r in rows} == set(SCHEMAS)
    result = measure(rows, len)
    assert set(result["by_schema"]) == set(SCHEMAS)
    for entry in result["per_task"]:
        counts = entry["tokens"]
        assert counts["json-spaced"] > counts["json"], entry
    spaced = FORMATS["json-spaced"](None, {"a": [1, 2]})  # type: ignore[arg-type]
    assert spaced == '{"a": [1, 2]}' and json.loads(spaced) == {"a": [1, 2]}


def test_results_go_to_one_file_per_tokenizer() -> None:
    assert results_path(None) == RESULTS / "tokens.json"
    assert results_path("qwen2.5-coder-1.5b") == RESULTS / "tokens-qwen2.5-coder-1.5b.json"
    assert results_path("/models/Other-1B.Q4.gguf") == RESULTS / "tokens-Other-1B.Q4.json"
    assert results_path("../weights/other.bin") == RESULTS / "tokens-other.json"


def test_the_default_syntax_costs_fewer_tokens_than_json_as_models_write_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    require_local_model()
    out = tmp_path / "tokens.json"
    main(["--out", str(out)])
    result = json.loads(out.read_text(encoding="utf-8"))
    assert result["objects"] == "task set gold answers"
    assert result["tokenizer"].startswith("SmolLM2")
    ratio = result["ratio"]
    assert ratio[DEFAULT_SYNTAX] < 0.95 * ratio["json-spaced"], ratio
    assert ratio["v2"] <= 0.9 and ratio["v2"] < ratio["v1"], ratio
    assert "per object" in capsys.readouterr().out
