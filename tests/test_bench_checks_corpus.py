"""``python -m benchmarks.checks_corpus`` on a small corpus written here (the real one is
not part of the project), and its clean skip when the corpus is absent."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from benchmarks.checks_corpus import main


def _write(folder: Path, name: str, schema: Any, valid: list[Any]) -> None:
    tests = [{"description": "", "data": v, "valid": True} for v in valid]
    body = {"description": "", "meta": {}, "schema": schema, "tests": tests}
    (folder / f"{name}.json").write_text(json.dumps(body), "utf-8")


def test_an_absent_corpus_is_skipped_with_a_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out.json"
    assert main(["--data", str(tmp_path / "absent"), "--out", str(out)]) == 0
    assert "not found" in capsys.readouterr().err
    assert not out.exists()


def test_flagged_values_are_counted_by_code_and_kept_when_written_again(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    address = {"type": "string"}
    _write(
        data,
        "Handwritten---addresses",
        {
            "type": "object",
            "properties": {"billing": address, "shipping": address, "note": {"type": "string"}},
            "required": ["billing", "shipping"],
        },
        [
            {"billing": "12 Rue Oberkampf, Paris", "shipping": "12 Rue Oberkampf, Paris"},
            {"billing": "12 Rue Oberkampf, Paris", "shipping": "3 Via Roma, Torino"},
        ],
    )
    _write(
        data,
        "Snowplow---tags",
        {"type": "object", "properties": {"tags": {"type": "array", "items": {"type": "string"}}}},
        [{"tags": ["[5]"]}],
    )
    commands = {"type": "array", "items": {"type": "string"}}
    _write(
        data,
        "Kubernetes---probes",
        {"type": "object", "properties": {"liveness": commands, "readiness": commands}},
        [{"liveness": ["echo Hello World"], "readiness": ["echo Hello World"]}],
    )
    out = tmp_path / "checks.json"
    assert main(["--data", str(data), "--out", str(out)]) == 0
    results = json.loads(out.read_text("utf-8"))
    assert results["instances"] == 4
    assert results["values"] == 7  # 2 + 2 + the one tag (the note is absent) + 2 commands
    assert results["by_code"] == {"repeat": 2, "placeholder": 1}
    assert results["by_subset"] == {"Handwritten": 1, "Kubernetes": 1, "Snowplow": 1}
    assert results["flagged_instances"] == 3
    # the address written again is accepted; the repeated command is kept, flagged; a
    # dropped list item is not asked for again
    assert results["kept_instances"] == 2
