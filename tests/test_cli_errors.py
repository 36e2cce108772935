"""The ``slotflight`` command, run as a process, on bad options and broken surroundings.

Each case is what a user types or meets: an option value that is not a number, a port
out of range, a results folder that cannot be written, a log of another model given to
``--resume``, Ctrl-C before the first run. The command must answer with one clear line
(and what to do) and the documented exit status, never a traceback, and write nothing
it cannot finish.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from slotflight.bench.split_models import KNOWN_MODELS
from slotflight.testing import Reply, ScriptedServer
from tests.web_support import free_port

TASK = {
    "id": "t-1",
    "schema": "triage",
    "input": "The nightly export fails for files over 2 GB.",
    "instructions": "Triage.",
}


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env["COLUMNS"] = "200"  # keep rich from wrapping the messages
    return env


def _interruptible() -> None:
    """In the child before it runs: Ctrl-C's default, which a runner started in the
    background (SIGINT ignored, and inherited) would otherwise pass on."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start(tmp_path: Path, *argv: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "slotflight.cli", *argv],
        cwd=tmp_path,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_interruptible,
    )


def _cli(tmp_path: Path, *argv: str) -> tuple[int, str, str]:
    process = _start(tmp_path, *argv)
    out, err = process.communicate(timeout=300)
    assert "Traceback" not in err, err
    return process.returncode, out, " ".join(err.split())


def _task_file(tmp_path: Path) -> Path:
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps(TASK) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--temperature", "nan"),
        ("--temperature", "inf"),
        ("--frequency-penalty", "nan"),
        ("--presence-penalty", "-inf"),
    ],
)
def test_a_sampling_option_that_is_not_a_finite_number_is_refused(
    tmp_path: Path, option: str, value: str
) -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    argv = ["bench", "--base-url", url, "--model", "m", "--tasks", str(_task_file(tmp_path))]
    status, _out, err = _cli(tmp_path, *argv, "--out", "out", f"{option}={value}")
    assert status == 2
    assert f"argument {option}: expected a finite number, got {value!r}" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("port", ["70000", "-1"])
def test_a_port_out_of_range_is_refused(tmp_path: Path, port: str) -> None:
    status, _out, err = _cli(tmp_path, "local-server", "--port", port)
    assert status == 2
    assert f"argument --port: expected a port number from 0 to 65535, got {port!r}" in err


@pytest.mark.parametrize("obstacle", ["folder is a file", "log is a folder"])
def test_a_results_folder_that_cannot_be_written_is_refused_before_any_run(
    tmp_path: Path, obstacle: str
) -> None:
    out = tmp_path / "out"
    if obstacle == "folder is a file":
        out.write_text("not a folder", encoding="utf-8")
        where = str(out)
    else:
        (out / "r.jsonl").mkdir(parents=True)
        where = str(out / "r.jsonl")
    with ScriptedServer() as server:
        argv = ["bench", "--base-url", server.base_url, "--model", "m"]
        argv += ["--tasks", str(_task_file(tmp_path)), "--modes", "json_schema"]
        status, _out, err = _cli(tmp_path, *argv, "--out", str(out), "--name", "r")
        assert server.requests == []  # nothing was run
    assert status == 2
    assert f"slotflight bench: cannot write the results at {where}" in err
    assert "what to do: pass --out a folder you can write to" in err
    if obstacle == "log is a folder":
        assert sorted(p.name for p in out.iterdir()) == ["r.jsonl"]


def test_resume_refuses_a_log_made_on_another_model(tmp_path: Path) -> None:
    tasks = str(_task_file(tmp_path))
    answer = '{"summary": "Export fails."}'
    with ScriptedServer([Reply(answer), Reply(answer)]) as server:
        argv = ["bench", "--base-url", server.base_url, "--tasks", tasks, "--modes", "json_schema"]
        argv += ["--out", "out", "--name", "r"]
        assert _cli(tmp_path, *argv, "--model", "model-a", "--runs", "1")[0] == 0
        log = tmp_path / "out" / "r.jsonl"
        before = log.read_bytes()
        # more runs may be added to a log, but not runs of another model
        argv += ["--model", "model-b", "--runs", "2", "--resume"]
        status, _out, err = _cli(tmp_path, *argv)
        assert len(server.requests) == 1  # nothing more was run
    assert status == 2
    assert (
        f"slotflight bench: {Path('out') / 'r.jsonl'} was made on the model model-a"
        " (remote server), not model-b (remote server); pass the same --model and"
        " --base-url, or another --name"
    ) in err
    assert log.read_bytes() == before


def test_ctrl_c_before_the_first_run_says_nothing_was_written(tmp_path: Path) -> None:
    with socket.socket() as listener:  # accepts, never answers
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
        argv = ["bench", "--base-url", url, "--tasks", str(_task_file(tmp_path)), "--out", "out"]
        process = _start(tmp_path, *argv)
        connection, _ = listener.accept()  # the command asks which models it serves
        with connection:
            process.send_signal(signal.SIGINT)
            _out, err = process.communicate(timeout=120)
    assert process.returncode == 130
    assert "Traceback" not in err
    err = " ".join(err.split())
    assert "slotflight bench: interrupted before the first run finished; nothing was written" in err
    assert "--resume" not in err
    assert not (tmp_path / "out" / "bench.jsonl").exists()


def test_the_demo_on_a_server_asks_for_a_model_name(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    status, out, err = _cli(tmp_path, "demo", "--base-url", url)
    assert status == 2
    assert (
        "slotflight demo: --model is required with a server (--base-url or OPENAI_BASE_URL)" in err
    )
    assert "what to do: name the model the server serves, e.g. --model NAME" in err
    assert out == ""


def test_the_demo_refuses_an_unknown_embedded_model_before_starting_one(tmp_path: Path) -> None:
    status, out, err = _cli(tmp_path, "demo", "--model", "no-such-model")
    assert status == 2
    assert "slotflight demo: unknown model 'no-such-model'" in err
    assert f"what to do: without a server, --model is one of {', '.join(KNOWN_MODELS)}" in err
    assert "Starting the embedded model" not in out


def test_help_shows_plain_text(tmp_path: Path) -> None:
    status, out, _err = _cli(tmp_path, "--help")
    assert status == 0
    assert "``" not in out
    assert "demo, compile, local-server, bench, serve" in " ".join(out.split())
