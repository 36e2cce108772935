"""Every example runs against the embedded model and prints an object with no
degenerate value (the detectors of the benchmark: slot ids or example values written
as values, one value repeated across fields).

``python -m examples.stream_sync`` and ``examples.stream_async`` run as a user runs them, starting the
embedded model themselves; ``any_server.py`` runs against ``slotflight local-server``
in a subprocess; ``fastapi_app.py`` is served by uvicorn against that same server.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from httpx_sse import aconnect_sse
from pydantic import BaseModel

from slotflight.testing import AppServer, ScriptedServer
from tests.local_support import assert_sensible, require_local_model
from tests.web_support import free_port

require_local_model()

ROOT = Path(__file__).resolve().parent.parent
#: A run of the small model on 2 cores takes seconds; the bound only stops a hang.
TIMEOUT_S = 600


def _environment(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "SLOTFLIGHT_"))}
    return {**env, "PYTHONPATH": str(ROOT), **extra}


def _model(script: str, name: str) -> type[BaseModel]:
    module = importlib.import_module(f"examples.{script}")
    model = getattr(module, name)
    assert isinstance(model, type) and issubclass(model, BaseModel)
    return model


def _last_json_line(stdout: str) -> dict[str, Any]:
    last = stdout.strip().splitlines()[-1]
    value = json.loads(last)
    assert isinstance(value, dict), last
    return value


def _python(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``python *args`` in the repository root with ``env``, its output captured."""
    return subprocess.run(
        [sys.executable, *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )


def _run(script: str, env: dict[str, str]) -> dict[str, Any]:
    done = _python(["-m", f"examples.{script}"], env)
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-2000:])
    return _last_json_line(done.stdout)


@pytest.fixture(scope="module")
def local_server() -> Iterator[str]:
    """``slotflight local-server`` in a subprocess; yields its ``/v1`` base URL."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "slotflight.cli", "local-server", "--port", str(port)],
        env=_environment(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(1200):
            try:
                if httpx.get(f"{base}/v1/models", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                if process.poll() is not None:
                    raise AssertionError(process.stderr.read() if process.stderr else "") from None
                time.sleep(0.05)
        else:
            raise AssertionError("the local server did not come up")
        yield f"{base}/v1"
    finally:
        process.terminate()
        process.wait(timeout=30)


@pytest.mark.parametrize("script", ["stream_sync", "stream_async"])
def test_streaming_examples_start_the_embedded_model_and_print_sensible_values(
    script: str,
) -> None:
    obj = _run(script, _environment())
    assert_sensible(_model(script, "Triage"), obj)


def _served_model(base_url: str) -> str:
    models = httpx.get(f"{base_url}/models", timeout=30).json()["data"]
    return str(models[0]["id"])


def test_any_server_example_prints_a_sensible_incident(local_server: str) -> None:
    env = _environment(
        OPENAI_BASE_URL=local_server,
        OPENAI_API_KEY="local",
        SLOTFLIGHT_MODEL=_served_model(local_server),
        SLOTFLIGHT_GRAMMAR="llama.cpp",
    )
    obj = _run("any_server", env)
    note = importlib.import_module("examples.any_server").NOTE
    assert_sensible(_model("any_server", "Incident"), obj, input_text=note)


async def test_fastapi_example_streams_a_sensible_triage(
    local_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", local_server)
    monkeypatch.setenv("SLOTFLIGHT_MODEL", _served_model(local_server))
    monkeypatch.setenv("SLOTFLIGHT_GRAMMAR", "llama.cpp")
    example = importlib.reload(importlib.import_module("examples.fastapi_app"))
    ticket = importlib.import_module("examples.stream_sync").TICKET
    async with (
        AppServer(example.app) as server,
        httpx.AsyncClient(base_url=server.url, timeout=TIMEOUT_S) as client,
        aconnect_sse(client, "POST", "/triage", json={"ticket": ticket}) as source,
    ):
        # A keep-alive comment after the first id reads as an empty message in httpx-sse.
        data = [json.loads(m.data) async for m in source.aiter_sse() if m.data]
    assert data[-1]["type"] == "done", data[-1]
    assert_sensible(example.Triage, data[-1]["state"])


@pytest.mark.parametrize("script", ["stream_sync", "stream_async", "any_server", "fastapi_app"])
def test_an_unknown_grammar_setting_is_refused_in_one_line(script: str) -> None:
    with ScriptedServer() as server:
        env = _environment(
            OPENAI_BASE_URL=server.base_url, SLOTFLIGHT_MODEL="m", SLOTFLIGHT_GRAMMAR="llamacpp"
        )
        run = ["-c", "import examples.fastapi_app"] if script == "fastapi_app" else []
        done = _python(run or ["-m", f"examples.{script}"], env)
        assert server.requests == []
    assert done.returncode != 0
    assert done.stderr.strip() == "SLOTFLIGHT_GRAMMAR must be llama.cpp, vllm or vllm-guided"
