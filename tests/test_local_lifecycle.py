"""The local server's life around its requests: stopping while they run, a model file
gone while it serves, a kept weight copy damaged on disk. Real HTTP, the real model."""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import files_in
from tests.local_support import require_local_model

require_local_model()

from slotflight import SlotflightError  # noqa: E402
from slotflight.local import (  # noqa: E402
    LocalEngine,
    default_model_path,
    serve_local,
    start_local_server,
)

pytestmark = pytest.mark.local_model

# Hundreds of tokens: the generation still runs when the server stops.
LONG: dict[str, Any] = {
    "messages": [{"role": "user", "content": "Tell a story."}],
    "max_tokens": 400,
    "grammar": "root ::= [a-z ]{600,}",
}
SHUTTING_DOWN = "the server is shutting down"


def _wait_until(condition: Any, polls: int = 600) -> None:
    for _ in range(polls):
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError("the condition did not hold")


def test_stopping_the_server_ends_the_requests_in_progress_with_503() -> None:
    server = start_local_server(seed=7)
    engine = server.engine
    url = f"{server.base_url}/chat/completions"
    answers: dict[str, Any] = {}

    def plain() -> None:
        try:
            response = httpx.post(url, json=LONG, timeout=60)
            answers["plain"] = (response.status_code, response.json())
        except httpx.HTTPError as exc:
            answers["plain"] = exc

    try:
        thread = threading.Thread(target=plain)
        thread.start()
        _wait_until(lambda: engine.running is not None)  # the model is on the plain one
        running = engine.running
        with httpx.stream("POST", url, json={**LONG, "stream": True}, timeout=60) as queued:
            events = queued.iter_lines()
            first = next(events)  # the role chunk: queued behind the plain request
            assert first.startswith("data: ")
            server.close()
            rest = [line for line in events if line]
        thread.join(60)
    finally:
        server.close()

    assert rest[-1] == (
        'data: {"error":{"message":"the server is shutting down","type":"server_error",'
        '"param":null,"code":"server_shutting_down"}}'
    )
    status, body = answers["plain"]
    assert status == 503
    assert body["error"]["code"] == "server_shutting_down"
    assert body["error"]["type"] == "server_error"
    ended = [r for r in engine.recent if r.id == running]
    assert len(ended) == 1 and ended[0].finish_reason == "cancelled"
    assert ended[0].error == SHUTTING_DOWN
    queued_id = first.split('"id":"', 1)[1].split('"', 1)[0]
    skipped = [r for r in engine.recent if r.id == queued_id]
    assert len(skipped) == 1 and skipped[0].usage.completion_tokens == 0
    # The engine goes on serving other servers.
    with start_local_server(engine=engine) as again:
        reply = httpx.post(
            f"{again.base_url}/chat/completions",
            json={"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2},
            timeout=60,
        )
    assert reply.status_code == 200


def test_models_answers_once_the_model_file_is_gone(tmp_path: Path) -> None:
    model = tmp_path / "model.gguf"
    shutil.copy(default_model_path(), model)
    engine = LocalEngine(model, quantization=None)
    try:
        with start_local_server(engine=engine) as server:
            before = httpx.get(f"{server.base_url}/models", timeout=10)
            model.unlink()  # an upgrade replaced the package that held it
            after = httpx.get(f"{server.base_url}/models", timeout=10)
    finally:
        engine.close()
    assert before.status_code == after.status_code == 200
    assert after.json() == before.json()
    assert after.json()["data"][0]["id"] == "model"


def test_a_kept_copy_damaged_on_disk_is_written_again(cache: Path) -> None:
    first = LocalEngine(seed=1)
    first.close()
    copy = first.weights_path
    assert first.converted is True and copy.parent == cache
    with copy.open("r+b") as file:  # what a crash before its bytes reached the disk leaves
        file.truncate(copy.stat().st_size // 2)

    second = LocalEngine(seed=1)
    try:
        assert second.weights_path == copy
        assert second.converted is True  # written again, not loaded as it was
        assert files_in(cache) == [copy.name, f"{copy.name}.source"]
    finally:
        second.close()


def _first_bytes(sock: socket.socket) -> bytes:
    """What the server sends before it closes the connection (bounded wait)."""
    sock.settimeout(30)
    received = b""
    while part := sock.recv(4096):
        received += part
    return received


def test_a_connection_that_sends_no_whole_request_is_closed() -> None:
    with start_local_server(seed=7, header_timeout=0.5) as server:
        with socket.create_connection((server.host, server.port)) as slow:
            slow.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: local\r\n")
            answer = _first_bytes(slow)
        assert answer.startswith(b"HTTP/1.1 408 ")
        assert b'"code":"header_timeout"' in answer
        with socket.create_connection((server.host, server.port)) as idle:
            assert _first_bytes(idle) == b""
        assert httpx.get(f"{server.url}/health", timeout=10).status_code == 200


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_the_foreground_server_ends_its_streams_when_interrupted() -> None:
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "slotflight.cli", "local-server", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"

    def healthy() -> bool:
        try:
            return httpx.get(f"{base}/health", timeout=5).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        _wait_until(healthy, polls=2400)
        body = {**LONG, "stream": True}
        with httpx.stream("POST", f"{base}/v1/chat/completions", json=body, timeout=60) as stream:
            events = stream.iter_lines()
            for line in events:
                if '"content":"' in line and '"content":""' not in line:
                    break  # the model is writing
            process.send_signal(signal.SIGINT)
            rest = [line for line in events if line]
        assert process.wait(60) == 0
    finally:
        process.kill()
        process.wait()
    assert '"code":"server_shutting_down"' in rest[-1]


def test_the_foreground_server_says_when_its_address_is_taken() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        with pytest.raises(SlotflightError) as failed:
            serve_local(port=taken.getsockname()[1], log_level="critical")
    assert failed.value.code == "server_start_failed"
