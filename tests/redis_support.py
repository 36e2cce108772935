"""A real ``redis-server`` for the tests that need one (marked ``redis``).

``redis_url`` starts a throw-away server on a free port without persistence
(:func:`redis_server` one that a test may stop). Where
``redis-server`` is not installed the tests are skipped, except under CI
(``CI=true``), where its absence is an error.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pytest

from tests.web_support import free_port


def _wait_for_port(port: int, process: subprocess.Popen[bytes], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"redis-server exited with status {process.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2) as sock:
                sock.sendall(b"PING\r\n")
                if sock.recv(16).startswith(b"+PONG"):
                    return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"redis-server did not answer on port {port} within {timeout:g}s")


@dataclass
class RedisServer:
    """A running ``redis-server``: its URL; :meth:`stop` ends it (idempotent)."""

    url: str
    process: subprocess.Popen[bytes]

    def stop(self) -> None:
        if self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@contextmanager
def redis_server() -> Iterator[RedisServer]:
    """A throw-away ``redis-server`` on a free port, stopped on exit."""
    binary = shutil.which("redis-server")
    if binary is None:
        if os.environ.get("CI") == "true":
            pytest.fail("redis-server is not installed (CI=true: the Redis tests must run)")
        pytest.skip("redis-server is not installed (apt-get install redis-server)")
    port = free_port()
    process = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    server = RedisServer(f"redis://127.0.0.1:{port}/0", process)
    try:
        _wait_for_port(port, process)
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def redis_url() -> Iterator[str]:
    with redis_server() as server:
        yield server.url
