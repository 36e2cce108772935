"""The local server against clients that misbehave on the wire: a client that stops
reading its stream, one whose body never arrives. Raw sockets on 127.0.0.1 against the
real SmolLM2 GGUF; every wait is bounded, nothing is timed."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.local_support import require_local_model

require_local_model()

from slotflight import SlotflightError  # noqa: E402
from slotflight.local import LocalEngine, LocalServer, start_local_server  # noqa: E402

pytestmark = pytest.mark.local_model

USER = [{"role": "user", "content": "Write a long story."}]
# Never complete: every generation under it runs to its max_tokens.
ENDLESS = "root ::= [a-z ] root"
# With logprobs a chunk is about 400 bytes: a few hundred tokens fill what the kernel
# and the server buffer for a connection that reads nothing.
STALLED_MAX_TOKENS = 600
# A bound on every wait for the server, far above what any answer here takes.
PATIENCE = 180.0
POLL = 0.1


@pytest.fixture(scope="module")
def server() -> Iterator[LocalServer]:
    """A server that waits for a stalled client as long as any test here waits."""
    with start_local_server(seed=7, send_timeout=PATIENCE) as running:
        yield running


@pytest.fixture(scope="module")
def impatient() -> Iterator[LocalServer]:
    """The same model behind a server that cuts a client taking nothing for 0.5 s."""
    with start_local_server(seed=7, send_timeout=0.5, body_timeout=0.5) as running:
        yield running


def _request(body: dict[str, Any]) -> bytes:
    data = json.dumps(body).encode()
    head = (
        "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
    )
    return head.encode() + data


def _stalled_client(server: LocalServer, body: dict[str, Any]) -> socket.socket:
    """A connection that sent ``body`` and reads nothing more: its receive buffer is
    tiny, and its segments small, which keeps the loopback's send buffer as small as a
    real network's (the kernel sizes it from the segment size; with loopback's 64 KiB
    segments it would hold megabytes)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG, 536)
    sock.settimeout(PATIENCE)
    sock.connect((server.host, server.port))
    sock.sendall(_request(body))
    return sock


def _wait_until(condition: Any, what: str) -> None:
    """Poll ``condition()`` until it holds; fail after PATIENCE (a bound, not a timing)."""
    for _ in range(int(PATIENCE / POLL)):
        if condition():
            return
        time.sleep(POLL)
    pytest.fail(f"{what} did not happen within {PATIENCE:g} s")


def _answer(server: LocalServer) -> dict[str, Any]:
    reply = httpx.post(
        f"{server.base_url}/chat/completions",
        json={"messages": [{"role": "user", "content": "Is water wet?"}], "max_tokens": 4},
        timeout=PATIENCE,
    )
    assert reply.status_code == 200, reply.text
    return dict(reply.json())


def _endless(max_tokens: int) -> dict[str, Any]:
    """A streamed request whose grammar never lets the text end before ``max_tokens``."""
    return {
        "messages": USER,
        "max_tokens": max_tokens,
        "stream": True,
        "logprobs": True,
        "grammar": ENDLESS,
    }


@pytest.mark.parametrize("reads_first", [0, 200], ids=["reads-nothing", "reads-the-head"])
def test_a_client_that_stops_reading_does_not_hold_the_model(
    server: LocalServer, reads_first: int
) -> None:
    # A generation an earlier test left may still be ending: it is not this one.
    before = {record.id for record in server.engine.recent} | {server.engine.running}
    with _stalled_client(server, _endless(STALLED_MAX_TOKENS)) as stalled:
        if reads_first:
            assert stalled.recv(reads_first).startswith(b"HTTP/1.1 200")
        _wait_until(
            lambda: (
                server.engine.running not in before
                or any(r.id not in before for r in server.engine.recent)
            ),
            "the stalled generation's start",
        )

        reply = _answer(server)

        finished = [r for r in server.engine.recent if r.id not in before and r.id != reply["id"]]
        assert len(finished) == 1
        # The whole answer was sampled though its client read none of it.
        assert finished[0].finish_reason == "length"
        assert finished[0].usage.completion_tokens == STALLED_MAX_TOKENS


def _read_to_end(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (bounded by the
    socket's timeout)."""
    parts: list[bytes] = []
    while part := sock.recv(65536):
        parts.append(part)
    return b"".join(parts)


def test_a_client_that_takes_nothing_is_cut_and_its_generation_cancelled(
    impatient: LocalServer,
) -> None:
    max_tokens = 3000
    before = {record.id for record in impatient.engine.recent} | {impatient.engine.running}
    with _stalled_client(impatient, _endless(max_tokens)) as stalled:

        def ended() -> list[Any]:
            return [r for r in impatient.engine.recent if r.id not in before]

        _wait_until(ended, "the end of the stalled generation")
        [cut] = ended()
        assert cut.finish_reason == "cancelled"
        assert cut.usage.completion_tokens < max_tokens
        assert cut.error is not None and "took nothing of its stream" in cut.error

        # Read now, the stream holds what was sent before the cut, then the
        # connection ends, without the events that end a whole stream.
        received = _read_to_end(stalled)
    assert received.startswith(b"HTTP/1.1 200")
    assert received.count(b"data: {") > 1
    assert b'finish_reason":"length' not in received
    assert b"data: [DONE]" not in received
    _answer(impatient)


def test_a_request_body_that_does_not_arrive_is_answered_408(impatient: LocalServer) -> None:
    with socket.create_connection((impatient.host, impatient.port), timeout=PATIENCE) as sock:
        request = _request({"messages": USER})
        sock.sendall(request[: request.index(b"\r\n\r\n") + 4 + 10])  # 10 bytes of the body
        received = _read_to_end(sock)
    assert received.startswith(b"HTTP/1.1 408")
    assert b'"code":"request_timeout"' in received
    _answer(impatient)


def test_stream_buffer_is_deprecated_and_ignored() -> None:
    with (
        pytest.warns(DeprecationWarning, match="stream_buffer"),
        pytest.raises(SlotflightError) as raised,
    ):
        LocalEngine(stream_buffer=64, quantization="q3_k")  # refused before anything starts
    assert raised.value.code == "invalid_quantization"
