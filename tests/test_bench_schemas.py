"""``python -m benchmarks.schemas`` on a two-schema corpus written here (the real corpus
is not part of the project), and its clean skip when the corpus is absent."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from benchmarks.schemas import main
from slotflight.syntax import SYNTAXES


def test_an_absent_corpus_is_skipped_with_a_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--data", str(tmp_path / "absent"), "--out", str(tmp_path / "out")]) == 0
    assert "not found" in capsys.readouterr().out
    assert not (tmp_path / "out").exists()


def test_the_harness_reports_coverage_round_trips_and_rejections(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    object_schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "n": {"type": "integer"}},
        "required": ["name"],
        "additionalProperties": False,
    }
    cases = {
        "Handwritten---obj": (
            object_schema,
            [(True, {"name": "a", "n": 1}), (False, {"n": "x"}), (False, {"name": "a", "z": 1})],
        ),
        "Synthesized---root": ({"type": "array", "items": {"type": "integer"}}, [(True, [1, 2])]),
        "JME_1": ({"type": "object", "properties": {"a": {"pattern": "(?=x)"}}}, []),
    }
    for name, (schema, tests) in cases.items():
        body = {
            "description": "",
            "meta": {},
            "schema": schema,
            "tests": [{"description": "", "valid": v, "data": d} for v, d in tests],
        }
        (data / f"{name}.json").write_text(json.dumps(body), "utf-8")
    out = tmp_path / "out"
    connect = socket.socket.connect
    assert main(["--data", str(data), "--out", str(out)]) == 0
    assert socket.socket.connect is connect  # the network guard is lifted afterwards
    results = json.loads((out / "schemas.json").read_text("utf-8"))
    total = results["total"]
    assert (total["schemas"], total["compiled"], total["refused"]) == (3, 2, 1)
    assert total["exceptions"] == 0 and results["network_attempts"] == 0
    runs = 2 * len(SYNTAXES)  # 2 instances of each kind, every registered syntax
    assert total["valid_round_trips"] == runs and total["valid_exact"] == runs
    assert total["invalid_instances"] == runs and total["invalid_rejected"] == runs
    assert total["invalid_outcomes"] == {"rejected_unexpressible": runs}
    assert set(results["subsets"]) == {"Handwritten", "Synthesized", "JME"}
    assert "| **total** | 3 |" in (out / "schemas.md").read_text("utf-8")
