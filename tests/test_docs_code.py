"""Every code block of README.md and docs/*.md runs, as a user would run it.

Python blocks run as programs in a fresh interpreter; shell blocks run in bash with
this virtualenv's commands first on ``PATH``. Model calls go over real HTTP to a
scripted OpenAI-compatible server answering what the block's ``model answers`` comment
says (``OPENAI_BASE_URL`` and ``OPENAI_API_KEY`` point at it); blocks that start the
embedded model run it. The addresses the docs use stand for servers the test starts:
``127.0.0.1:8080`` for the model server, ``127.0.0.1:8000`` for a gateway in front of it.
A block that cannot run says why in a ``not run`` comment right before it; other
languages (text, JSON, HTML) are not programs, and the JavaScript blocks are checked by
the JavaScript client's own tests. See ``tests/docs_support.py`` for the comments.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from slotflight.testing import AppServer, Reply, ScriptedServer
from tests.docs_support import (
    CHECKED_ELSEWHERE,
    PYTHON,
    ROOT,
    RUNNER,
    SHELL,
    Block,
    all_blocks,
)
from tests.local_support import require_local_model

BLOCKS = all_blocks()
RUNNABLE = [b for b in BLOCKS if b.lang in PYTHON | SHELL and b.not_run is None]
#: A block's programs are small; the bound only stops a hang (the embedded model's
#: blocks load it first).
TIMEOUT_S = 300
#: Replies queued per block: every request of a block (regenerations, continued blocks)
#: gets the same answer.
REPLIES = 50


def test_every_block_is_run_or_says_why_not() -> None:
    for block in BLOCKS:
        reason = block.not_run
        if reason is not None:
            assert reason, f"{block.name}: a `not run` comment needs its reason"
            assert block.lang not in CHECKED_ELSEWHERE, f"{block.name}: checked elsewhere"
    skipped = [b for b in BLOCKS if b.not_run is not None]
    assert len(skipped) <= len(RUNNABLE) // 2, "most blocks run; keep the exceptions few"
    assert any(b.path.name == "README.md" and b.lang in PYTHON for b in RUNNABLE)


@contextlib.contextmanager
def _servers(block: Block) -> Iterator[dict[str, str]]:
    """The model server (and the gateway the block talks to, if any), as addresses."""
    answer = block.answers()
    with contextlib.ExitStack() as stack:
        addresses: dict[str, str] = {}
        if answer is not None:
            server = stack.enter_context(ScriptedServer([Reply(answer)] * REPLIES))
            addresses["127.0.0.1:8080"] = f"127.0.0.1:{server.port}"
            addresses["OPENAI_BASE_URL"] = server.base_url
            if "127.0.0.1:8000" in block.code:
                from slotflight.web import create_app

                gateway = stack.enter_context(AppServer(create_app(server.base_url)))
                addresses["127.0.0.1:8000"] = f"127.0.0.1:{gateway.port}"
            yield addresses
            assert server.requests, f"{block.name}: the model was never asked"
        else:
            yield addresses


def _workspace(tmp_path: Path) -> Path:
    """An empty folder to run in, where ``benchmarks/`` and ``examples/`` are at hand
    as in a checkout."""
    for name in ("benchmarks", "examples"):
        (tmp_path / name).symlink_to(ROOT / name)
    return tmp_path


@pytest.mark.parametrize("block", RUNNABLE, ids=[b.name for b in RUNNABLE])
def test_block_runs(block: Block, tmp_path: Path) -> None:
    program = block.program()
    if "start_local_server" in program or "slotflight.local" in program:
        require_local_model()
    cwd = _workspace(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "SLOTFLIGHT_"))}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = str(ROOT)
    if os.environ.get("SLOTFLIGHT_CACHE_DIR"):  # converted weights: this session's cache
        env["SLOTFLIGHT_CACHE_DIR"] = os.environ["SLOTFLIGHT_CACHE_DIR"]
    with _servers(block) as addresses:
        for placeholder, address in addresses.items():
            if placeholder.startswith("127.0.0.1:"):
                program = program.replace(placeholder, address)
        if "OPENAI_BASE_URL" in addresses:
            env["OPENAI_BASE_URL"] = addresses["OPENAI_BASE_URL"]
            env["OPENAI_API_KEY"] = "test-key"
        request = block.directive("request")
        if request:
            env["SLOTFLIGHT_DOC_REQUEST"] = request
        command = _command(block, program, cwd)
        done = subprocess.run(
            command, cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT_S
        )
    shown = f"{block.name}\n--- stdout\n{done.stdout[-4000:]}\n--- stderr\n{done.stderr[-4000:]}"
    assert done.returncode == 0, shown
    if "slot-streams" in program or request:  # an SSE stream: it must end with `done`
        assert "event: done" in done.stdout, shown
        assert "event: error" not in done.stdout, shown


def _command(block: Block, program: str, cwd: Path) -> list[str]:
    if block.lang in SHELL:
        lines = program.splitlines()
        if block.lang == "console":  # commands are the lines after a prompt
            lines = [line[2:] for line in lines if line.startswith("$ ")]
        script = cwd / "block.sh"
        script.write_text("set -euo pipefail\n" + "\n".join(lines) + "\n", encoding="utf-8")
        return ["bash", str(script)]
    source = cwd / "block.py"
    source.write_text(program, encoding="utf-8")
    if "def test_" in program:  # a test module: pytest runs it
        test_file = cwd / "test_block.py"
        source.rename(test_file)
        return [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(test_file)]
    runner = cwd / "run_block.py"
    runner.write_text(RUNNER, encoding="utf-8")
    return [sys.executable, str(runner), str(source)]
