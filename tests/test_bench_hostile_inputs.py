"""``slotflight bench`` given hostile files and failing servers: a clear message and an
exit status, never a traceback, and a log that still resumes."""

from __future__ import annotations

import argparse
import json
import socket
from pathlib import Path
from typing import Any

import pytest

from slotflight.bench.cli import add_bench_arguments, run_bench
from slotflight.bench.models import load_tasks
from slotflight.bench.report import read_log
from slotflight.testing import AppServer, Reply, ScriptedServer
from tests.test_bench_runner import TRIAGE, TRIAGE_INPUT, TRIAGE_JSON


def _task(task_id: str, **extra: Any) -> dict[str, Any]:
    return {
        "id": task_id,
        "schema": "triage",
        "input": TRIAGE_INPUT,
        "instructions": "Triage.",
        "gold": {**TRIAGE, "action_items": []},
        **extra,
    }


def _tasks_file(folder: Path, *rows: dict[str, Any]) -> Path:
    folder.mkdir(exist_ok=True)
    path = folder / "tasks.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def _args(base_url: str, tmp_path: Path, *extra: str, model: bool = True) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_bench_arguments(parser)
    argv = [
        *("--base-url", base_url),
        *(("--model", "scripted") if model else ()),
        *("--modes", "json_schema", "--runs", "1"),
        *("--out", str(tmp_path / "out"), "--name", "b"),
        *extra,
    ]
    if "--tasks" not in extra:
        argv += ["--tasks", str(_tasks_file(tmp_path / "tasks", _task("t-1"), _task("t-2")))]
    return parser.parse_args(argv)


@pytest.fixture(autouse=True)
def _wide_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """Messages on one line each, however long the temporary paths in them are."""
    monkeypatch.setenv("COLUMNS", "10000")


def _err(capsys: pytest.CaptureFixture[str]) -> str:
    """What was written to stderr, its lines (wrapped to the terminal) joined again."""
    return " ".join(capsys.readouterr().err.split())


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


# --------------------------------------------------------------------------- task files


def test_a_task_line_nested_too_deeply_or_with_a_huge_integer_names_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    deep = tmp_path / "deep"
    deep.mkdir()
    (deep / "t.jsonl").write_text(
        json.dumps(_task("ok")) + "\n" + "[" * 100_000 + "]" * 100_000 + "\n", encoding="utf-8"
    )
    with pytest.raises(ValueError, match=r"t\.jsonl:2: .*nested too deeply"):
        load_tasks(deep)
    line = json.dumps(_task("big")).replace('"priority": 4', '"priority": ' + "9" * 5000)
    big = tmp_path / "big.jsonl"
    big.write_text(line + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"big\.jsonl:1: not JSON"):
        load_tasks(big)
    assert run_bench(_args("http://127.0.0.1:9/v1", tmp_path, "--tasks", str(deep))) == 2
    assert "t.jsonl:2:" in _err(capsys)


def test_a_task_file_that_cannot_be_read_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "tasks"
    (folder / "a.jsonl").mkdir(parents=True)  # named like a task file, but a folder
    with pytest.raises(ValueError, match="cannot read the task file"):
        load_tasks(folder)
    assert run_bench(_args("http://127.0.0.1:9/v1", tmp_path, "--tasks", str(folder))) == 2
    assert "cannot read the task file" in _err(capsys)


def test_a_task_id_that_looks_like_markup_is_shown_as_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _tasks_file(tmp_path / "tasks", _task("[/x]"), _task("[/x]"))
    assert run_bench(_args("http://127.0.0.1:9/v1", tmp_path, "--tasks", str(path))) == 2
    assert "duplicate task id '[/x]'" in _err(capsys)


# --------------------------------------------------------------------------- servers


def test_a_server_error_message_that_looks_like_markup_fails_only_its_run(
    tmp_path: Path,
) -> None:
    with ScriptedServer() as server:
        server.add(Reply(status=500, error_message="overloaded [/x]"), Reply(TRIAGE_JSON))
        assert run_bench(_args(server.base_url, tmp_path)) == 0
        assert len(server.requests) == 2
    runs = read_log(tmp_path / "out" / "b.jsonl")["runs"]
    assert [r["task"] for r in runs] == ["t-1", "t-2"]
    assert "[/x]" in runs[0]["error"] and runs[1]["final_valid"] is True


def test_a_server_that_cannot_list_its_models_is_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    refused = f"http://127.0.0.1:{_closed_port()}/v1"
    assert run_bench(_args(refused, tmp_path, model=False)) == 1
    assert "did not list its models" in _err(capsys)

    async def listing(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        headers = [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b'{"data": 5}'})

    with AppServer(listing) as app:
        assert run_bench(_args(app.url + "/v1", tmp_path, model=False)) == 2
    assert "lists no model; pass --model" in _err(capsys)


# --------------------------------------------------------------------------- the log


def test_a_value_with_a_unicode_line_separator_keeps_the_log_readable(tmp_path: Path) -> None:
    """JSON written without ASCII escapes keeps U+2028 and U+0085 as they are; they are
    not line breaks of the log."""
    text = json.dumps({**TRIAGE, "summary": "Export\u2028fails\x85nightly."}, ensure_ascii=False)
    with ScriptedServer() as server:
        server.add(Reply(text), Reply(TRIAGE_JSON))
        assert run_bench(_args(server.base_url, tmp_path)) == 0
    runs = read_log(tmp_path / "out" / "b.jsonl")["runs"]
    assert runs[0]["final"]["summary"] == "Export\u2028fails\x85nightly."
    assert len(runs) == 2


def test_resume_drops_a_last_line_cut_inside_a_character(tmp_path: Path) -> None:
    text = json.dumps({**TRIAGE, "summary": "€ " * 40}, ensure_ascii=False)
    with ScriptedServer() as server:
        server.add(Reply(text), Reply(text))
        assert run_bench(_args(server.base_url, tmp_path)) == 0
    log = tmp_path / "out" / "b.jsonl"
    header, first, second = log.read_bytes().splitlines()
    cut = second.index("€".encode()) + 1  # inside the three bytes of the euro sign
    log.write_bytes(header + b"\n" + first + b"\n" + second[:cut])
    assert len(read_log(log)["runs"]) == 1
    with ScriptedServer() as server:
        server.add(Reply(text))
        assert run_bench(_args(server.base_url, tmp_path, "--resume")) == 0
        assert len(server.requests) == 1
    assert [r["task"] for r in read_log(log)["runs"]] == ["t-1", "t-2"]


def test_rescore_and_resume_refuse_an_older_format_or_malformed_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with ScriptedServer() as server:
        server.add(Reply(TRIAGE_JSON), Reply(TRIAGE_JSON))
        assert run_bench(_args(server.base_url, tmp_path)) == 0
    out = tmp_path / "out"
    doc = json.loads((out / "b.json").read_text(encoding="utf-8"))
    (out / "b.jsonl").unlink()
    older = {**doc, "format": "slotflight-bench/1"}
    older["runs"] = [{k: v for k, v in run.items() if k != "latency"} for run in doc["runs"]]
    broken: list[tuple[dict[str, Any], str]] = [
        (older, "results format 'slotflight-bench/1'"),
        ({**doc, "runs": "none"}, "not a benchmark results file"),
        ({**doc, "config": 5}, "not a benchmark results file"),
        ({**doc, "runs": [*doc["runs"][:1], 7]}, "run 2 lacks or mistypes the run itself"),
        ({**doc, "runs": [{**doc["runs"][0], "latency": None}]}, "run 1 lacks or mistypes"),
    ]
    for stored, message in broken:
        (out / "b.json").write_text(json.dumps(stored), encoding="utf-8")
        assert run_bench(_args("http://127.0.0.1:9/v1", tmp_path, "--rescore")) == 2
        assert message in _err(capsys)
    (out / "b.json").write_bytes(b"\xff{")
    assert run_bench(_args("http://127.0.0.1:9/v1", tmp_path, "--rescore")) == 2
    assert "b.json is not a benchmark results file: not JSON" in _err(capsys)
    # The same document as a log to resume: refused before any request.
    header = {k: v for k, v in older.items() if k not in ("runs", "summary")}
    (out / "b.jsonl").write_text(
        "".join(json.dumps(item) + "\n" for item in [header, *older["runs"]]), encoding="utf-8"
    )
    with ScriptedServer() as server:
        assert run_bench(_args(server.base_url, tmp_path, "--resume")) == 2
        assert not server.requests
    assert "slotflight-bench/1" in _err(capsys)
