"""The ``slotflight`` command, run as a process, with nowhere to write its errors: stderr
closed before it starts (``2>&-``) or a pipe whose reader went away. The command still
ends with the status of its error, prints nothing, and never writes the error to stdout."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}


def _close_stderr() -> None:
    """In the child before it runs: ``2>&-``."""
    os.close(2)


def _compile(
    tmp_path: Path, *, stderr: int | None, preexec_fn: Callable[[], None] | None = None
) -> subprocess.CompletedProcess[str]:
    schema = tmp_path / "schema.json"
    schema.write_text('{"type": "object"', encoding="utf-8")  # not JSON: status 2
    return subprocess.run(
        [sys.executable, "-m", "slotflight.cli", "compile", str(schema)],
        cwd=tmp_path,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=stderr,
        preexec_fn=preexec_fn,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.skipif(os.name != "posix", reason="closing a child's stderr is POSIX")
def test_an_error_with_stderr_closed_exits_with_its_status_and_prints_nothing(
    tmp_path: Path,
) -> None:
    done = _compile(tmp_path, stderr=None, preexec_fn=_close_stderr)
    assert done.returncode == 2
    assert done.stdout == ""


@pytest.mark.skipif(os.name != "posix", reason="a pipe whose reader went away is POSIX")
def test_an_error_with_stderr_a_broken_pipe_exits_with_its_status(tmp_path: Path) -> None:
    reader, writer = os.pipe()
    os.close(reader)
    try:
        done = _compile(tmp_path, stderr=writer)
    finally:
        os.close(writer)
    assert done.returncode == 2
    assert done.stdout == ""


def test_an_error_with_a_readable_stderr_is_still_reported(tmp_path: Path) -> None:
    done = _compile(tmp_path, stderr=subprocess.PIPE)
    assert done.returncode == 2
    assert done.stdout == ""
    assert "slotflight compile:" in done.stderr
    assert "is not JSON" in done.stderr
    assert "Traceback" not in done.stderr
