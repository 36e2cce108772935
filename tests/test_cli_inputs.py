"""The ``slotflight`` command on hostile inputs: schema files that are not files or are
too large, a module that fails on import, option values out of bounds, and an output
pipe whose reader went away. Each gets one clear message and an exit status, never a
traceback, and nothing is read or started past the bound."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from slotflight.cli import MAX_SCHEMA_FILE_BYTES, build_parser, main

#: Wide enough that its slot plan is far larger than a pipe's buffer.
WIDE_SCHEMA = {
    "type": "object",
    "properties": {f"field_{i}": {"type": "string"} for i in range(300)},
}


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    status = main(list(argv))
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return status, " ".join(captured.err.split())


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}


def test_a_schema_file_over_the_bound_is_refused_unread(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "schema.json"
    text = json.dumps({"type": "object", "description": "x" * MAX_SCHEMA_FILE_BYTES})
    path.write_text(text, encoding="utf-8")
    status, err = _run(capsys, "compile", str(path))
    assert status == 2
    assert f"slotflight compile: {path} is larger than {MAX_SCHEMA_FILE_BYTES} bytes" in err


def test_a_folder_named_like_a_schema_file_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "schema.json"
    path.mkdir()
    status, err = _run(capsys, "compile", str(path))
    assert status == 2
    assert f"slotflight compile: {path} is not a regular file" in err


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")
def test_a_named_pipe_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    path = tmp_path / "schema.json"
    os.mkfifo(path)
    done = subprocess.run(
        [sys.executable, "-m", "slotflight.cli", "compile", str(path)],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert f"slotflight compile: {path} is not a regular file" in " ".join(done.stderr.split())


@pytest.mark.parametrize(
    ("source", "raised"),
    [
        ("x = (\n", "SyntaxError: '(' was never closed"),
        ("raise RuntimeError('no database here')\n", "RuntimeError: no database here"),
    ],
)
def test_a_module_that_fails_on_import_is_named_with_its_error(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    source: str,
    raised: str,
) -> None:
    name = f"failing_models_{abs(hash(source))}"
    (tmp_path / f"{name}.py").write_text(source, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    status, err = _run(capsys, "compile", f"{name}:Model")
    assert status == 2
    assert f"slotflight compile: importing {name} raised {raised}" in err
    assert f"what to do: fix {name} so that `python -c 'import {name}'` runs" in err


@pytest.mark.parametrize(
    ("option", "value", "expected"),
    [
        ("--port", "70000", "a port number from 0 to 65535"),
        ("--port", "-1", "a port number from 0 to 65535"),
        ("--drain-s", "nan", "a number of seconds >= 0"),
        ("--drain-s", "-1", "a number of seconds >= 0"),
        ("--header-timeout", "0", "a number of seconds > 0"),
        ("--body-timeout", "inf", "a number of seconds > 0"),
        ("--max-body-bytes", "0", "a number of bytes >= 1"),
        ("--redis-url", "localhost:6379", "a redis://, rediss:// or unix:// URL"),
    ],
)
def test_serve_refuses_option_values_out_of_bounds_before_starting(
    capsys: pytest.CaptureFixture[str], option: str, value: str, expected: str
) -> None:
    argv = ["serve", "--upstream-base-url", "http://127.0.0.1:9/v1", f"{option}={value}"]
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(argv)
    assert exited.value.code == 2
    err = " ".join(capsys.readouterr().err.split())
    assert f"argument {option}: expected {expected}, got {value!r}" in err


def test_serve_still_takes_values_within_bounds() -> None:
    argv = ["serve", "--upstream-base-url", "http://127.0.0.1:9/v1", "--port", "0"]
    argv += ["--drain-s", "0", "--header-timeout", "2.5", "--max-body-bytes", "1"]
    args = build_parser().parse_args([*argv, "--redis-url", "redis://127.0.0.1:6379/0"])
    assert (args.port, args.drain_s, args.header_timeout) == (0, 0.0, 2.5)
    assert (args.max_body_bytes, args.redis_url) == (1, "redis://127.0.0.1:6379/0")


@pytest.mark.parametrize("show", ["slots", "grammar"])
def test_output_whose_reader_went_away_ends_quietly(tmp_path: Path, show: str) -> None:
    path = tmp_path / "schema.json"
    path.write_text(json.dumps(WIDE_SCHEMA), encoding="utf-8")
    process = subprocess.Popen(
        [sys.executable, "-m", "slotflight.cli", "compile", str(path), "--show", show],
        cwd=tmp_path,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()  # as `| head` does once it has read enough
    err = process.stderr.read().decode()
    assert process.wait(timeout=120) == 1
    assert err == ""
