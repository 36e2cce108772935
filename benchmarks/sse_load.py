"""The SSE gateway under realistic load, against a bare SSE pass-through proxy.

Every figure of ``docs/web.md`` ("Load") comes from this script. Processes (one clock:
``time.monotonic`` is system-wide on Linux):

- **upstream**: an OpenAI-compatible streaming server (raw asyncio, cheap per chunk).
  Each stream follows a spec in the user message: a schema (``triage``, ``article``,
  ``meeting``), 300-1,000 chunks, 20-50 chunks/s. Every chunk of string text is a
  marker ``" @"`` + the time it was written (base-36 microseconds of the monotonic
  clock), so a client can tell when each upstream chunk was written;
- **bare proxy**: Starlette + httpx on uvicorn, forwarding the upstream's SSE bytes
  untouched (no slot work): the baseline a Python gateway cannot beat;
- **gateway**: ``slotflight.web.create_app`` on uvicorn, default options (patch mode,
  50 ms coalescing), memory store; then **two gateway workers** sharing a
  ``redis-server`` (the client alternates between them);
- **client** (this process, raw asyncio HTTP): per-event latency is the time between
  a marker's writing upstream and the client first seeing it in a message.

Concurrency is ramped (after ``WARM_UP_S`` seconds of streams at the highest level, not
counted): at each level, that many client loops start streams back to back
for ``--duration`` seconds (each stream: a random schema, length and rate, seeded),
then the level waits for the streams in flight (at most until the last one started
could have finished at 20 chunks/s, plus 10 s: later ones are cut and counted as
failures). Per level: p50/p99 latency (markers received in the window), CPU per
upstream chunk of the server processes (``/proc/PID/stat``), RSS per live stream and
per finished stream kept for resume, and the machine's load (``/proc/stat``: busy
cores, ours and others').

**Gateway cost** (``gateway-cost``): the gateway and the bare proxy fed the same
streams at the same time, round after round (``--rounds``, ``--side-streams``), so
both see the same machine load; CPU per upstream chunk of each and their ratio per
round. On a shared machine this ratio is the figure to read, not the absolute times.

It also measures, without the load: SSE bytes per output byte through the gateway for
20 KB and 1 MB strings (default options and full mode), the sans-I/O core's time for
the events of a 1 MiB value including serialising each, and the bytes the memory store
keeps per finished stream (``tracemalloc``).

``python -m benchmarks.sse_load`` runs everything (about 20 minutes on an idle 2-core
machine; run it under ``nice``); ``--quick`` is a smoke run. Results:
``benchmarks/results/sse_load.json`` and ``sse_load.png``; ``--parts gateway-cost``
alone: a few minutes.

``python -m benchmarks.sse_load --workers 1,2,4 --redis --duration 15`` is the
scale-out comparison alone: the proxy, one gateway worker with its memory store, then
1, 2 and 4 workers sharing one ``redis-server``, at 25, 50 and 100 streams
(``--levels``), streams of 100-400 chunks; it prints its time bound first (at most
about 13 minutes with these options) and writes ``sse_load_workers.json`` and ``.png``.
It runs unchanged on a machine with more cores (raise ``--levels`` there).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import platform
import random
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
import tracemalloc
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterator
from contextlib import ExitStack, asynccontextmanager, contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

RESULTS = Path(__file__).parent / "results"
HOST = "127.0.0.1"
MARK = "\x00"  # in a script: a text chunk, stamped when written
MARKER = re.compile(rb"@([0-9a-z]{9})")
ERROR_CODE = re.compile(rb'"error":\{"code":"([a-z_]+)"')
SPEC = re.compile(r"bench-spec:(\{[^}]*\})")
TICKS = os.sysconf("SC_CLK_TCK")

# --------------------------------------------------------------------------- schemas

_TEXT = {"type": "string"}
SCHEMAS: dict[str, dict[str, Any]] = {
    "triage": {
        "type": "object",
        "properties": {
            "summary": _TEXT,
            "sentiment": {"enum": ["positive", "neutral", "negative"]},
            "priority": {"type": "integer", "minimum": 1, "maximum": 4},
            "tags": {"type": "array", "items": _TEXT, "maxItems": 5},
            "action_items": {
                "type": "array",
                "maxItems": 5,
                "items": {
                    "type": "object",
                    "properties": {
                        "task": _TEXT,
                        "owner": _TEXT,
                        "due": {"type": "string", "format": "date"},
                    },
                    "required": ["task", "owner", "due"],
                },
            },
        },
        "required": ["summary", "sentiment", "priority", "tags", "action_items"],
    },
    "article": {
        "type": "object",
        "properties": {
            "title": _TEXT,
            "abstract": _TEXT,
            "body": _TEXT,
            "tags": {"type": "array", "items": _TEXT},
            "reading_minutes": {"type": "integer", "minimum": 1},
        },
        "required": ["title", "abstract", "body", "tags", "reading_minutes"],
    },
    "meeting": {
        "type": "object",
        "properties": {
            "title": _TEXT,
            "attendees": {"type": "array", "items": _TEXT},
            "decisions": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"text": _TEXT, "owner": _TEXT, "final": {"type": "boolean"}},
                    "required": ["text", "owner", "final"],
                },
            },
            "notes": _TEXT,
        },
        "required": ["title", "attendees", "decisions", "notes"],
    },
}

#: Each schema's value; ``¶N¶`` marks text filled with markers, with these weights.
VALUES: dict[str, tuple[dict[str, Any], list[float]]] = {
    "triage": (
        {
            "summary": "¶0¶",
            "sentiment": "negative",
            "priority": 2,
            "tags": ["export", "timeout"],
            "action_items": [
                {"task": "¶1¶", "owner": "platform", "due": "2025-07-01"},
                {"task": "¶2¶", "owner": "support", "due": "2025-06-20"},
            ],
        },
        [0.6, 0.2, 0.2],
    ),
    "article": (
        {
            "title": "¶0¶",
            "abstract": "¶1¶",
            "body": "¶2¶",
            "tags": ["reliability", "exports"],
            "reading_minutes": 7,
        },
        [0.03, 0.17, 0.8],
    ),
    "meeting": (
        {
            "title": "¶0¶",
            "attendees": ["Ada", "Grace", "Linus"],
            "decisions": [
                {"text": "¶1¶", "owner": "Ada", "final": True},
                {"text": "¶2¶", "owner": "Grace", "final": False},
            ],
            "notes": "¶3¶",
        },
        [0.05, 0.25, 0.2, 0.5],
    ),
}


def script(schema: str, chunks: int) -> list[str]:
    """The content chunks of one stream: frame text (the default syntax, which the
    gateway reads) cut in pieces of at most six characters, and ``MARK`` for each text
    chunk, about ``chunks`` in all."""
    from slotflight.plan.compiler import compile as compile_schema
    from slotflight.syntax import DEFAULT_SYNTAX, render_frames

    value, weights = VALUES[schema]
    rendered = render_frames(compile_schema(SCHEMAS[schema]), value, DEFAULT_SYNTAX)
    parts = re.split(r"¶\d+¶", rendered)
    structure = [[part[i : i + 6] for i in range(0, len(part), 6)] for part in parts]
    room = max(chunks - sum(len(s) for s in structure), len(weights))
    pieces: list[str] = []
    for index, fixed in enumerate(structure):
        pieces += fixed
        if index < len(weights):
            pieces += [MARK] * max(1, round(room * weights[index]))
    return pieces


def stamp() -> str:
    """A marker: the monotonic clock in base-36 microseconds, nine characters."""
    value = int(time.monotonic() * 1e6)
    digits = ""
    while value:
        value, digit = divmod(value, 36)
        digits = "0123456789abcdefghijklmnopqrstuvwxyz"[digit] + digits
    return " @" + digits.rjust(9, "0")


def unstamp(marker: bytes) -> float:
    return int(marker, 36) / 1e6


@dataclass(frozen=True)
class Spec:
    """What one stream is: a schema and chunks at a rate, or a plain text (``size``)."""

    schema: str = "triage"
    chunks: int = 600
    rate: float = 35.0
    size: int = 0  # > 0: a one-string output of this many characters, in 4-char chunks

    def message(self) -> str:
        return "bench-spec:" + json.dumps(self.__dict__, separators=(",", ":"))

    def pieces(self) -> list[str]:
        if self not in _PIECES:
            _PIECES[self] = self._pieces()
        return _PIECES[self]

    def _pieces(self) -> list[str]:
        if self.size:
            from slotflight.plan.compiler import compile as compile_schema
            from slotflight.syntax import DEFAULT_SYNTAX, render_frames

            text = ("lorem ipsum dolor sit amet " * (self.size // 27 + 1))[: self.size].strip()
            rendered = render_frames(compile_schema(TEXT_SCHEMA), {"text": text}, DEFAULT_SYNTAX)
            return [rendered[i : i + 4] for i in range(0, len(rendered), 4)]
        return script(self.schema, self.chunks)

    def output_bytes(self) -> int:
        return sum(len(stamp()) if p == MARK else len(p.encode()) for p in self.pieces())


_PIECES: dict[Spec, list[str]] = {}


TEXT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"text": _TEXT},
    "required": ["text"],
}

# --------------------------------------------------------------------------- upstream


def _chunk_json(content: str | None, finish: str | None = None) -> bytes:
    delta = {} if content is None else {"content": content}
    body = {
        "id": "bench",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "bench",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    data = b"data: " + json.dumps(body, separators=(",", ":")).encode() + b"\n\n"
    return b"%x\r\n%s\r\n" % (len(data), data)


async def _upstream_stream(writer: asyncio.StreamWriter, spec: Spec) -> None:
    writer.write(
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
        b"transfer-encoding: chunked\r\ncache-control: no-store\r\n\r\n"
    )
    pieces = spec.pieces()
    interval = 1.0 / spec.rate if spec.rate > 0 else 0.0
    start = time.monotonic()
    for index, piece in enumerate(pieces):
        if interval:
            delay = start + index * interval - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
        writer.write(_chunk_json(stamp() if piece == MARK else piece))
        if interval or index % 64 == 0:
            await writer.drain()
    writer.write(_chunk_json(None, "stop"))
    writer.write(b"e\r\ndata: [DONE]\n\n\r\n0\r\n\r\n")
    await writer.drain()


async def _upstream_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            body = json.loads(await reader.readexactly(length)) if length else {}
            text = " ".join(str(m.get("content")) for m in body.get("messages", []))
            found = SPEC.search(text)
            spec = Spec(**json.loads(found.group(1))) if found else Spec()
            await _upstream_stream(writer, spec)
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def serve_upstream(port: int) -> None:
    server = await asyncio.start_server(_upstream_connection, HOST, port, backlog=4096)
    async with server:
        await server.serve_forever()


# --------------------------------------------------------------------------- proxy


def proxy_app(upstream: str, use_aiohttp: bool = False) -> Any:
    """A bare SSE pass-through: the request goes upstream, the bytes come back as they
    are. ``use_aiohttp``: read the upstream with aiohttp instead of httpx (the HTTP
    client the gateway reads it with)."""
    if use_aiohttp:
        return _aiohttp_proxy_app(upstream)
    import httpx
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import StreamingResponse
    from starlette.routing import Route

    client = httpx.AsyncClient(
        base_url=upstream, timeout=None, limits=httpx.Limits(max_connections=None)
    )

    async def forward(request: Request) -> StreamingResponse:
        body = await request.json()
        upstream_request = client.build_request(
            "POST",
            "/chat/completions",
            json={"model": body["model"], "messages": body["messages"], "stream": True},
        )
        response = await client.send(upstream_request, stream=True)

        async def relay() -> AsyncIterator[bytes]:
            try:
                async for chunk in response.aiter_raw():
                    yield chunk
            finally:
                await response.aclose()

        return StreamingResponse(relay(), media_type="text/event-stream")

    return Starlette(routes=[Route("/v1/slot-streams", forward, methods=["POST"])])


def _aiohttp_proxy_app(upstream: str) -> Any:
    import aiohttp
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import StreamingResponse
    from starlette.routing import Route

    sessions: list[aiohttp.ClientSession] = []  # made in the event loop, on first use

    async def forward(request: Request) -> StreamingResponse:
        body = await request.json()
        if not sessions:
            sessions.append(aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)))
        response = await sessions[0].post(
            upstream + "/chat/completions",
            json={"model": body["model"], "messages": body["messages"], "stream": True},
            auto_decompress=False,
        )

        async def relay() -> AsyncIterator[bytes]:
            try:
                async for chunk in response.content.iter_any():
                    yield chunk
            finally:
                response.release()

        return StreamingResponse(relay(), media_type="text/event-stream")

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        for session in sessions:
            await session.close()

    routes = [Route("/v1/slot-streams", forward, methods=["POST"])]
    return Starlette(routes=routes, lifespan=lifespan)


def gateway_app(
    upstream: str, redis_url: str | None, openai_models: bool = False, httpx2: bool = False
) -> Any:
    import openai

    from slotflight.web import MemoryEventStore, RedisEventStore, create_app

    if openai_models:  # the A/B of ``upstream_client``: chunks as openai's models again
        import slotflight.web._gateway as gateway

        vars(gateway)["LeanChunkClient"] = openai.AsyncOpenAI

    store = (
        RedisEventStore.from_url(redis_url)
        if redis_url
        else MemoryEventStore(max_streams=1_000_000)
    )
    # ``httpx2``: the A/B of ``upstream_client``: openai's default HTTP client again
    http_client = openai.DefaultAsyncHttpxClient() if httpx2 else None
    return create_app(upstream, store=store, max_active_streams=100_000, http_client=http_client)


def serve_app(app: Any, port: int) -> None:
    import uvicorn

    uvicorn.run(app, host=HOST, port=port, log_level="warning", access_log=False, backlog=4096)


# --------------------------------------------------------------------------- client


@dataclass
class StreamResult:
    ok: bool
    started: float
    latencies: list[tuple[float, float]] = field(default_factory=list)  # (received, latency)
    messages: int = 0
    wire_bytes: int = 0
    error: str = ""


async def read_stream(port: int, body: bytes, full_events: bool = False) -> StreamResult:
    """POST ``body`` and read the SSE answer (HTTP/1.1, chunked), timing markers."""
    result = StreamResult(False, time.monotonic())
    reader, writer = await asyncio.open_connection(HOST, port, limit=1 << 24)
    try:
        writer.write(
            b"POST /v1/slot-streams HTTP/1.1\r\nhost: bench\r\ncontent-type: application/json\r\n"
            b"content-length: %d\r\n\r\n%s" % (len(body), body)
        )
        head = await reader.readuntil(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 200"):
            result.error = head.split(b"\r\n", 1)[0].decode()
            return result
        seen: set[bytes] = set()
        buffer = b""
        last_event = b""
        while True:
            size = int((await reader.readuntil(b"\r\n")).strip(), 16)
            if size == 0:
                break
            chunk = (await reader.readexactly(size + 2))[:-2]
            now = time.monotonic()
            result.wire_bytes += size
            buffer += chunk.replace(b"\r", b"")
            *complete, buffer = buffer.split(b"\n\n")
            for message in complete:
                if not message or message.startswith(b":"):
                    continue
                result.messages += 1
                for marker in MARKER.findall(message):
                    if marker not in seen:
                        seen.add(marker)
                        result.latencies.append((now, now - unstamp(marker)))
                kind = message.find(b"event: ")
                if kind == 0 or (kind > 0 and message[kind - 1] == 10):  # a line of its own
                    end = message.find(b"\n", kind)
                    last_event = message[kind + 7 : end if end >= 0 else len(message)]
                    code = ERROR_CODE.search(message) if last_event == b"error" else None
                    if code is not None:  # name the failure: "error: <code>"
                        last_event = b"error: " + code[1]
                elif message.startswith(b"data: [DONE]"):
                    last_event = b"done"
        result.ok = last_event == b"done"
        if not result.ok:
            result.error = last_event.decode() or "no terminal message"
        return result
    except (ConnectionError, asyncio.IncompleteReadError, ValueError) as exc:
        result.error = repr(exc)
        return result
    finally:
        writer.close()


def request_body(spec: Spec, options: dict[str, Any] | None = None) -> bytes:
    schema = TEXT_SCHEMA if spec.size else SCHEMAS[spec.schema]
    body = {
        "model": "bench",
        "messages": [{"role": "user", "content": spec.message()}],
        "schema": schema,
        "options": {"max_attempts": 1, **(options or {})},
    }
    return json.dumps(body).encode()


# --------------------------------------------------------------------------- processes


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def machine_busy() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine so far."""
    with open("/proc/stat", encoding="ascii") as stat:
        values = [int(v) for v in stat.readline().split()[1:]]
    idle = values[3] + values[4]
    return (sum(values) - idle) / TICKS, sum(values) / TICKS


@contextmanager
def child(
    *args: str, port: int | None = None, tree: str | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """A child process of this benchmark; ``tree``: run it from another checkout (its
    own ``.venv`` when it has one), so that two versions run side by side."""
    python = sys.executable
    if tree is not None and Path(tree, ".venv", "bin", "python").exists():
        python = str(Path(tree, ".venv", "bin", "python"))
    command = [python, "-m", "benchmarks.sse_load", *args]
    process = subprocess.Popen(command, cwd=tree, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        if port is not None:
            wait_port(port, process)
        yield process
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def wait_port(port: int, process: subprocess.Popen[bytes] | None = None) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"{process.args!r} exited")
        try:
            with socket.create_connection((HOST, port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"nothing listens on port {port}")


@contextmanager
def redis_server() -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    binary = shutil.which("redis-server")
    if binary is None:
        raise RuntimeError("redis-server is not installed")
    port = free_port()
    process = subprocess.Popen(
        [binary, "--port", str(port), "--bind", HOST, "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
    )
    try:
        wait_port(port, process)
        yield f"redis://{HOST}:{port}/0", process
    finally:
        process.terminate()
        process.wait(10)


# --------------------------------------------------------------------------- load


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, math.ceil(share * len(ordered)) - 1)]


@dataclass
class Target:
    name: str
    ports: list[int]
    server_pids: list[int]
    options: dict[str, Any] = field(default_factory=dict)
    helper_pids: list[int] = field(default_factory=list)  # redis-server


async def run_level(
    target: Target,
    concurrency: int,
    duration: float,
    rng: random.Random,
    chunk_range: tuple[int, int],
) -> dict[str, Any]:
    specs = [
        Spec(rng.choice(list(SCHEMAS)), rng.randint(*chunk_range), rng.uniform(20, 50))
        for _ in range(concurrency * 8)
    ]
    results: list[StreamResult] = []
    chunks = 0
    output = 0
    counter = 0
    rss_live: list[int] = []
    begin = time.monotonic()
    window = (begin + min(3.0, duration / 4), begin + duration)
    pids = target.server_pids
    cpu_before = [cpu_seconds(p) for p in pids + target.helper_pids]
    rss_before = sum(rss_bytes(p) for p in pids)
    busy_before = machine_busy()
    own_before = _own_cpu(target)
    load_before = [cpu_seconds(p) for p in [os.getpid(), *_OWN_PIDS]]

    async def loop(worker: int) -> None:
        nonlocal chunks, output, counter
        await asyncio.sleep(worker / concurrency * 2.0)  # spread the starts over 2 s
        while time.monotonic() < window[1]:
            spec = specs[counter % len(specs)]
            counter += 1
            port = target.ports[counter % len(target.ports)]
            result = await read_stream(port, request_body(spec, target.options))
            results.append(result)
            chunks += len(spec.pieces()) + 2
            output += spec.output_bytes()

    async def sample() -> None:
        while time.monotonic() < window[1]:
            await asyncio.sleep(1.0)
            if window[0] < time.monotonic() < window[1]:
                rss_live.append(sum(rss_bytes(p) for p in pids))

    sampler = asyncio.create_task(sample())
    # A level ends at the latest when its last stream, started at the window's end,
    # had time to finish at the slowest rate (20 chunks/s) and 10 s more: streams
    # still running then are cut (counted as failures), so a run's time is bounded.
    limit = duration + chunk_range[1] / 20 + 10
    loops = [asyncio.ensure_future(loop(i)) for i in range(concurrency)]
    _, cut = await asyncio.wait(loops, timeout=limit)
    for task in cut:
        task.cancel()
    if cut:
        await asyncio.wait(cut)
        results += [StreamResult(False, begin, error="cut at the level's time limit")] * len(cut)
    await sampler
    elapsed = time.monotonic() - begin
    await asyncio.sleep(2.0)  # let the servers settle
    cpu_after = [cpu_seconds(p) for p in pids + target.helper_pids]
    busy_after = machine_busy()
    rss_after = sum(rss_bytes(p) for p in pids)
    server_cpu = sum(cpu_after[: len(pids)]) - sum(cpu_before[: len(pids)])
    helper_cpu = sum(cpu_after[len(pids) :]) - sum(cpu_before[len(pids) :])
    own = _own_cpu(target) - own_before
    client_cpu, upstream_cpu = (
        cpu_seconds(p) - before
        for p, before in zip([os.getpid(), *_OWN_PIDS], load_before, strict=False)
    )
    busy = busy_after[0] - busy_before[0]
    wall = busy_after[1] - busy_before[1]
    latencies = [lat for r in results for t, lat in r.latencies if window[0] <= t <= window[1]]
    ok = sum(r.ok for r in results)
    failures: dict[str, int] = {}
    for r in results:
        if not r.ok:
            failures[r.error[:80]] = failures.get(r.error[:80], 0) + 1
    cores = os.cpu_count() or 1
    return {
        "target": target.name,
        "concurrency": concurrency,
        "streams": len(results),
        "completed": ok,
        "failures": failures,
        "upstream_chunks": chunks,
        "output_bytes": output,
        "wire_bytes": sum(r.wire_bytes for r in results),
        "messages": sum(r.messages for r in results),
        "latency_samples": len(latencies),
        "latency_p50_ms": percentile(latencies, 0.5) * 1000,
        "latency_p99_ms": percentile(latencies, 0.99) * 1000,
        "latency_max_ms": max(latencies, default=float("nan")) * 1000,
        "server_cpu_s": server_cpu,
        "cpu_us_per_chunk": server_cpu / chunks * 1e6 if chunks else float("nan"),
        "redis_cpu_s": helper_cpu,
        "client_cpu_s": client_cpu,
        "upstream_cpu_s": upstream_cpu,
        "elapsed_s": elapsed,
        "rss_before_mib": rss_before / 2**20,
        "rss_live_per_stream_kib": (
            (statistics.median(rss_live) - rss_before) / concurrency / 1024 if rss_live else None
        ),
        "rss_after_per_finished_stream_kib": (rss_after - rss_before) / max(ok, 1) / 1024,
        "output_bytes_per_stream": output / max(len(results), 1),
        "machine_busy_cores": busy / wall * cores if wall else float("nan"),
        "ours_busy_cores": own / wall * cores if wall else float("nan"),
        "others_busy_cores": (busy - own) / wall * cores if wall else float("nan"),
    }


_OWN_PIDS: list[int] = []


def _own_cpu(target: Target) -> float:
    total = cpu_seconds(os.getpid())
    for pid in [*_OWN_PIDS, *target.server_pids, *target.helper_pids]:
        with suppress(OSError):
            total += cpu_seconds(pid)
    return total


def redis_workers(name: str) -> int:
    """How many gateway workers share Redis in target ``name`` (``gateway-N-redis``;
    0: not a Redis target)."""
    found = re.fullmatch(r"gateway-(\d+)-redis", name)
    return int(found[1]) if found else 0


@contextmanager
def start_target(name: str, upstream: str, redis_url: str | None = None) -> Iterator[Target]:
    if name == "proxy":
        port = free_port()
        with child("proxy", "--port", str(port), "--upstream", upstream, port=port) as process:
            yield Target(name, [port], [process.pid])
        return
    workers = redis_workers(name) or 1
    extra = ["--redis", redis_url] if redis_url and redis_workers(name) else []
    with ExitStack() as stack:
        ports, pids = [], []
        for _ in range(workers):
            port = free_port()
            arguments = ("gateway", "--port", str(port), "--upstream", upstream, *extra)
            pids.append(stack.enter_context(child(*arguments, port=port)).pid)
            ports.append(port)
        yield Target(name, ports, pids)


#: The warm-up before the first measured level: seconds of streams (of these lengths)
#: at the highest level, not counted. Without it the first target measured in a run
#: showed a p99 of 1.7-2.9 s at 100 streams where the same server measured next showed
#: 2 ms (the upstream and this client are fresh processes then).
WARM_UP_S: Final = 5.0
WARM_UP_CHUNKS: Final = (50, 100)


async def load(args: argparse.Namespace, upstream: str, log: Callable[[str], None]) -> list[Any]:
    rows: list[dict[str, Any]] = []
    levels = [int(v) for v in args.levels.split(",")]
    names = args.targets.split(",")
    redis_cm = redis_server() if any(redis_workers(n) for n in names) else None
    redis_url, redis_process = (None, None)
    if redis_cm is not None:
        redis_url, redis_process = redis_cm.__enter__()
    try:
        for index, name in enumerate(names):
            with start_target(name, upstream, redis_url) as target:
                if redis_process is not None and redis_workers(name):
                    target.helper_pids.append(redis_process.pid)
                await read_stream(target.ports[0], request_body(Spec(chunks=50, rate=0)))
                if index == 0:  # the run's first target: warm the upstream and client
                    rng = random.Random(0)
                    await run_level(target, max(levels), WARM_UP_S, rng, WARM_UP_CHUNKS)
                for level in levels:
                    rng = random.Random(level)
                    row = await run_level(target, level, args.duration, rng, args.chunk_range)
                    rows.append(row)
                    log(
                        f"{name:16s} c={level:4d} streams={row['completed']}/{row['streams']}"
                        f" p50={row['latency_p50_ms']:7.1f} p99={row['latency_p99_ms']:7.1f} ms"
                        f" cpu/chunk={row['cpu_us_per_chunk']:6.1f} µs"
                        f" busy={row['machine_busy_cores']:.2f} (others {row['others_busy_cores']:.2f})"
                    )
                    if row["latency_p99_ms"] > args.stop_p99_ms:
                        break
    finally:
        if redis_cm is not None:
            redis_cm.__exit__(None, None, None)
    return rows


# --------------------------------------------------------------------------- wire bytes


async def wire_bytes(upstream: str, log: Callable[[str], None], quick: bool) -> list[Any]:
    """SSE bytes per model output byte through one gateway, per case."""
    cases: list[tuple[str, Spec, dict[str, Any]]] = [
        ("20 KB, unpaced, default options", Spec(size=20_000, rate=0), {}),
        ("20 KB, 1000 chunks/s, default options", Spec(size=20_000, rate=1000), {}),
        ("4 KB, 40 chunks/s, default options", Spec(size=4_000, rate=40), {}),
        ("4 KB, 40 chunks/s, coalesce_ms=250", Spec(size=4_000, rate=40), {"coalesce_ms": 250}),
        (
            "20 KB, unpaced, full mode, no coalescing",
            Spec(size=20_000, rate=0),
            {"state_mode": "full", "coalesce_ms": 0},
        ),
        (
            "20 KB, unpaced, patch mode, no coalescing",
            Spec(size=20_000, rate=0),
            {"coalesce_ms": 0},
        ),
    ]
    if not quick:
        cases.insert(1, ("1 MB, unpaced, default options", Spec(size=1_000_000, rate=0), {}))
    rows = []
    with start_target("gateway", upstream) as target:
        for name, spec, options in cases:
            result = await read_stream(target.ports[0], request_body(spec, options))
            if not result.ok:  # the size of a failed stream measures nothing
                raise RuntimeError(f"{name}: the stream ended with {result.error!r}, not done")
            output = spec.output_bytes()
            rows.append(
                {
                    "case": name,
                    "ok": result.ok,
                    "output_bytes": output,
                    "sse_body_bytes": result.wire_bytes,
                    "messages": result.messages,
                    "ratio": result.wire_bytes / output,
                }
            )
            log(f"{name:45s} {result.wire_bytes:>12,d} B  {result.wire_bytes / output:8.2f}x")
    return rows


# --------------------------------------------------------------------------- side by side


async def side_by_side(
    servers: dict[str, tuple[str, ...]],
    streams: int,
    rounds: int,
    log: Callable[[str], None],
) -> dict[str, Any]:
    """CPU per upstream chunk of several server processes fed the same streams at the
    same time, round after round, so that all of them see the same machine load.

    ``servers`` maps a name to the child arguments that start it (the port is added;
    a first argument ``tree=DIR`` runs it from that checkout).
    Each round starts ``streams`` seeded streams to every server at once and reads the
    servers' CPU time (``/proc/PID/stat``) before and after; a ratio is taken within a
    round, against the first server."""
    ports = {name: free_port() for name in servers}
    with ExitStack() as stack:
        pids = {}
        for name, arguments in servers.items():
            port = ports[name]
            tree = arguments[0][5:] if arguments[0].startswith("tree=") else None
            arguments = arguments[1:] if tree else arguments
            process = child(*arguments, "--port", str(port), port=port, tree=tree)
            pids[name] = stack.enter_context(process).pid
        for port in ports.values():
            await read_stream(port, request_body(Spec(chunks=50, rate=0)))
        rows = []
        for index in range(rounds):
            rng = random.Random(index + 1)
            specs = [
                Spec(rng.choice(list(SCHEMAS)), rng.randint(300, 1000), rng.uniform(20, 50))
                for _ in range(streams)
            ]
            busy_before = machine_busy()
            before = {name: cpu_seconds(pid) for name, pid in pids.items()}
            results = await asyncio.gather(
                *(read_stream(port, request_body(s)) for s in specs for port in ports.values())
            )
            after = {name: cpu_seconds(pid) for name, pid in pids.items()}
            busy_after = machine_busy()
            chunks = sum(len(s.pieces()) + 2 for s in specs)
            cost = {name: (after[name] - before[name]) / chunks * 1e6 for name in pids}
            first = next(iter(cost))
            row = {
                "round": index + 1,
                "streams_each": streams,
                "chunks_each": chunks,
                "completed": sum(r.ok for r in results),
                "cpu_us_per_chunk": cost,
                "ratio_to_" + first: {name: cost[name] / cost[first] for name in cost},
                "machine_busy_cores": (busy_after[0] - busy_before[0])
                / (busy_after[1] - busy_before[1])
                * (os.cpu_count() or 1),
            }
            rows.append(row)
            log(
                f"round {index + 1}: "
                + ", ".join(f"{name} {value:.0f} µs" for name, value in cost.items())
                + " per chunk; ratios "
                + ", ".join(f"{value:.2f}" for value in row["ratio_to_" + first].values())
                + f"; machine busy {row['machine_busy_cores']:.2f} cores"
            )
    summary = {}
    for name in servers:
        ratios = [row["ratio_to_" + first][name] for row in rows]
        costs = [row["cpu_us_per_chunk"][name] for row in rows]
        summary[name] = {
            "cpu_us_per_chunk_median": statistics.median(costs),
            "cpu_us_per_chunk_range": [min(costs), max(costs)],
            "ratio_median": statistics.median(ratios),
            "ratio_range": [min(ratios), max(ratios)],
        }
    return {"rounds": rows, "summary": summary}


async def gateway_cost(
    upstream: str,
    log: Callable[[str], None],
    streams: int,
    rounds: int,
    baseline_tree: str | None = None,
) -> dict[str, Any]:
    """The gateway (one worker, memory store, default options) against the bare proxy,
    the same streams through all at the same time, and against the bare proxy reading
    the upstream with aiohttp as the gateway does; with ``baseline_tree``, the gateway
    of that checkout too (a change against the version before it)."""
    servers: dict[str, tuple[str, ...]] = {
        "proxy": ("proxy", "--upstream", upstream),
        "gateway": ("gateway", "--upstream", upstream),
        "proxy (aiohttp)": ("proxy", "--upstream", upstream, "--aiohttp"),
    }
    if baseline_tree:
        servers["baseline gateway"] = (f"tree={baseline_tree}", "gateway", "--upstream", upstream)
    result = await side_by_side(servers, streams, rounds, log)
    for name in servers.keys() - {"proxy"}:
        found = result["summary"][name]
        log(
            f"{name} / proxy CPU per chunk: median {found['ratio_median']:.2f}"
            f" (rounds {found['ratio_range'][0]:.2f}-{found['ratio_range'][1]:.2f})"
        )
    peers = {"gateway_to_aiohttp_proxy": "proxy (aiohttp)"}
    if baseline_tree:
        peers["gateway_to_baseline"] = "baseline gateway"
    for key, peer in peers.items():
        against = [
            row["cpu_us_per_chunk"]["gateway"] / row["cpu_us_per_chunk"][peer]
            for row in result["rounds"]
        ]
        result["summary"][key] = {
            "median": statistics.median(against),
            "range": [min(against), max(against)],
        }
        log(f"gateway / {peer}: {', '.join(f'{x:.3f}' for x in against)} per round")
    return result


async def upstream_client(
    upstream: str, log: Callable[[str], None], streams: int, rounds: int
) -> dict[str, Any]:
    """CPU per chunk of the gateway with its lean chunk client, with openai's chunk
    models, and with openai's default HTTP client (httpx2) instead of aiohttp, the same
    streams through all at the same time."""
    servers = {
        "lean chunks": ("gateway", "--upstream", upstream),
        "openai models": ("gateway", "--upstream", upstream, "--openai-models"),
        "httpx2 client": ("gateway", "--upstream", upstream, "--httpx2"),
    }
    return await side_by_side(servers, streams, rounds, log)


# --------------------------------------------------------------------------- layers

#: The gateway's work per upstream chunk, one layer more in each: the HTTP read alone
#: (with the gateway's HTTP client, aiohttp), ``openai``'s stream of chunk objects, the slot stream
#: (assembler, checks, deadlines), its wire messages (coalescing, patches, JSON), and
#: the event store with one reader (the gateway, less the SSE response).
LAYERS = ("http", "openai", "slots", "messages", "store")


async def layer_stream(layer: str, upstream: str, spec: Spec, clients: dict[str, Any]) -> Any:
    """Read one stream through ``layer``; the last thing read (bytes, chunk, event or
    message)."""
    from slotflight.client.async_stream import astream
    from slotflight.web._request import RequestLimits, parse_slot_stream_request

    messages = [{"role": "user", "content": spec.message()}]
    if layer == "http":
        body = {"model": "bench", "messages": messages, "stream": True}
        async with clients["http"].post(upstream + "/chat/completions", json=body) as r:
            return await _last(r.content.iter_any())
    if layer == "openai":
        chunks = await clients["openai"].chat.completions.create(
            model="bench", messages=messages, stream=True
        )
        return await _last(chunks)
    parsed = parse_slot_stream_request(request_body(spec), RequestLimits())
    options = parsed.request.options
    stream = astream(
        clients["openai"],
        model=parsed.request.model,
        messages=parsed.messages,
        output=parsed.plan,
        **parsed.params,
    )
    if layer == "slots":
        return await _last(stream)
    if layer == "messages":
        from slotflight.web import encode_events

        return await _last(encode_events(stream, coalesce_ms=options.coalesce_ms))
    stream_id = f"s{id(stream)}"
    await clients["hub"].start(stream_id, stream, coalesce_ms=options.coalesce_ms)
    return await _last(clients["hub"].follow(stream_id, 0))


async def _last(items: AsyncIterable[Any]) -> Any:
    last = None
    async for item in items:
        last = item
    return last


def layer_clients(upstream: str) -> dict[str, Any]:
    """What the layers read with: an aiohttp session, the gateway's ``openai`` client,
    and an event store with its hub (in the running event loop)."""
    import aiohttp

    from slotflight.web import MemoryEventStore
    from slotflight.web._hub import StreamHub
    from slotflight.web._upstream import LeanChunkClient, default_http_client

    return {
        "http": aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)),
        "openai": LeanChunkClient(
            base_url=upstream, api_key="unused", max_retries=0, http_client=default_http_client()
        ),
        "hub": StreamHub(MemoryEventStore(max_streams=1_000_000), max_active=1_000_000),
    }


async def run_layer(layer: str, upstream: str, streams: int, seed: int) -> float:
    """CPU time of this process per upstream chunk, reading ``streams`` seeded streams
    through ``layer`` (see :data:`LAYERS`) at once."""
    clients = layer_clients(upstream)
    await layer_stream(layer, upstream, Spec(chunks=50, rate=0), clients)  # warm
    rng = random.Random(seed)
    specs = [
        Spec(rng.choice(list(SCHEMAS)), rng.randint(300, 1000), rng.uniform(20, 50))
        for _ in range(streams)
    ]
    started = time.process_time()
    await asyncio.gather(*(layer_stream(layer, upstream, s, clients) for s in specs))
    cost = (time.process_time() - started) / sum(len(s.pieces()) + 2 for s in specs) * 1e6
    await clients["http"].close()
    await clients["openai"].close()
    return cost


def layers(upstream: str, log: Callable[[str], None], streams: int, rounds: int) -> dict[str, Any]:
    """Each layer in a process of its own, all at the same time, round after round, so
    that each round's layers see the same machine load."""
    rows = []
    for index in range(rounds):
        processes = {
            layer: subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "benchmarks.sse_load",
                    "layer",
                    "--layer",
                    layer,
                    "--upstream",
                    upstream,
                    "--streams",
                    str(streams),
                    "--seed",
                    str(index + 1),
                ],
                stdout=subprocess.PIPE,
            )
            for layer in LAYERS
        }
        row = {layer: float(process.communicate()[0]) for layer, process in processes.items()}
        rows.append(row)
        log(f"layers, round {index + 1}: " + ", ".join(f"{k} {v:.0f} µs" for k, v in row.items()))
    steps = {
        layer: [row[layer] - row[LAYERS[i - 1]] if i else row[layer] for row in rows]
        for i, layer in enumerate(LAYERS)
    }
    summary = {
        layer: {"added_us_median": statistics.median(v), "added_us_range": [min(v), max(v)]}
        for layer, v in steps.items()
    }
    log(
        "layers, added per chunk (median): "
        + ", ".join(f"{k} {v['added_us_median']:+.0f} µs" for k, v in summary.items())
    )
    return {"rounds": rows, "summary": summary}


# --------------------------------------------------------------------------- sans-I/O


def sans_io(log: Callable[[str], None]) -> list[Any]:
    """Events of a 1 MiB string, fed in 4- and 16-character chunks, each event
    serialised as the gateway does (``to_json`` + ``wire_json``)."""
    from slotflight.assemble.assembler import Assembler
    from slotflight.plan.compiler import compile as compile_schema
    from slotflight.syntax import DEFAULT_SYNTAX, render_frames
    from slotflight.web._encode import wire_json

    plan = compile_schema(TEXT_SCHEMA)
    value = ("lorem ipsum dolor sit amet " * 40_000)[: 1 << 20].strip() + "."
    rows = []
    for syntax in (DEFAULT_SYNTAX, "v1"):
        text = render_frames(plan, {"text": value}, syntax)
        for size in (4, 16, 64):
            pieces = [text[i : i + size] for i in range(0, len(text), size)]
            best: dict[str, float] = {}
            for serialise in (False, True):
                times = []
                for _ in range(3):
                    started = time.perf_counter()
                    assembler = Assembler(plan, syntax=syntax)
                    events = 0
                    for piece in pieces:
                        for event in assembler.feed(piece):
                            events += 1
                            if serialise:
                                wire_json(event.to_json())
                    assembler.close()
                    times.append(time.perf_counter() - started)
                best["with" if serialise else "without"] = min(times)
            rows.append(
                {
                    "syntax": syntax,
                    "chunk_chars": size,
                    "events": events,
                    "feed_s": best["without"],
                    "feed_and_serialise_s": best["with"],
                }
            )
            log(
                f"sans-I/O {syntax} {size:3d}-char chunks: {events:7,d} events,"
                f" {best['without']:.3f} s, with serialising {best['with']:.3f} s"
            )
    return rows


async def retained_memory(log: Callable[[str], None], streams: int) -> dict[str, Any]:
    """Bytes the memory store keeps per finished stream (``tracemalloc``): realistic
    streams paced at their rates through ``encode_events`` with default options."""
    from slotflight.assemble.assembler import Assembler
    from slotflight.plan.compiler import compile as compile_schema
    from slotflight.syntax import DEFAULT_SYNTAX
    from slotflight.web import DEFAULT_COALESCE_MS, MemoryEventStore, StoredEvent
    from slotflight.web._encode import encode_events

    rng = random.Random(7)
    specs = [
        Spec(rng.choice(list(SCHEMAS)), rng.randint(300, 1000), rng.uniform(20, 50))
        for _ in range(streams)
    ]
    plans = {name: compile_schema(schema) for name, schema in SCHEMAS.items()}
    store = MemoryEventStore(max_streams=streams + 10)
    output = sum(s.output_bytes() for s in specs)  # also builds the scripts before measuring

    async def events(spec: Spec) -> AsyncIterator[Any]:
        assembler = Assembler(plans[spec.schema], syntax=DEFAULT_SYNTAX)
        start = time.monotonic()
        for index, piece in enumerate(spec.pieces()):
            delay = start + index / spec.rate - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            for event in assembler.feed(stamp() if piece == MARK else piece):
                yield event
        for event in assembler.close():
            yield event

    async def produce(index: int, spec: Spec) -> int:
        await store.create(f"s{index}")
        sequence = 0
        async for wire in encode_events(events(spec), coalesce_ms=DEFAULT_COALESCE_MS):
            sequence += 1
            await store.append(f"s{index}", StoredEvent(sequence, wire.event, wire.data))
        return sequence

    # A first batch fills the caches that every later stream shares (validators …).
    warm = [Spec(s.schema, 300, 200.0) for s in specs[:6]]
    await asyncio.gather(*(produce(-1 - i, s) for i, s in enumerate(warm)))
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    counts = await asyncio.gather(*(produce(i, s) for i, s in enumerate(specs)))
    kept = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    row = {
        "streams": streams,
        "messages_per_stream": sum(counts) / streams,
        "output_bytes_per_stream": output / streams,
        "kept_bytes_per_stream": kept / streams,
        "ratio": kept / output,
    }
    log(
        f"memory store keeps {row['kept_bytes_per_stream'] / 1024:.1f} KiB per finished stream"
        f" of {row['output_bytes_per_stream'] / 1024:.1f} KiB output ({row['ratio']:.2f}x)"
    )
    return row


# --------------------------------------------------------------------------- report


def plot(load_rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (latency, cpu) = plt.subplots(1, 2, figsize=(12, 4.5))
    for name in dict.fromkeys(r["target"] for r in load_rows):
        rows = [r for r in load_rows if r["target"] == name]
        x = [r["concurrency"] for r in rows]
        (line,) = latency.plot(
            x, [r["latency_p99_ms"] for r in rows], marker="o", label=f"{name} p99"
        )
        latency.plot(
            x,
            [r["latency_p50_ms"] for r in rows],
            marker=".",
            linestyle="--",
            color=line.get_color(),
            label=f"{name} p50",
        )
        cpu.plot(x, [r["cpu_us_per_chunk"] for r in rows], marker="o", label=name)
    latency.set_yscale("log")
    latency.set_xlabel("concurrent streams")
    latency.set_ylabel("upstream chunk written → client has it (ms)")
    latency.axhline(100, color="grey", linewidth=0.5)
    latency.axhline(200, color="grey", linewidth=0.5)
    latency.legend(fontsize=7)
    latency.set_title("per-event latency")
    cpu.set_xlabel("concurrent streams")
    cpu.set_ylabel("server CPU per upstream chunk (µs)")
    cpu.legend(fontsize=8)
    cpu.set_title("CPU per upstream chunk")
    figure.suptitle(f"slotflight gateway vs a bare SSE proxy ({os.cpu_count()} shared cores)")
    figure.tight_layout()
    figure.savefig(path, dpi=110)


PARTS = ("sans-io", "memory", "bytes", "gateway-cost", "upstream-client", "layers", "load")


def configure(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    """Fill in the defaults that depend on the mode: a full run, ``--quick``, or the
    scale-out comparison (``--workers``)."""
    args.chunk_range = (300, 1000)
    levels, output = "10,25,50,100,150", "sse_load.json"
    if args.workers:
        workers = [int(n) for n in args.workers.split(",")]
        if not args.redis and workers != [1]:
            parser.error("--workers with more than one worker needs --redis")
        # One worker with its memory store (the default) first, then N sharing Redis.
        gateways = ["gateway"] if 1 in workers else []
        gateways += [f"gateway-{n}-redis" for n in workers if args.redis]
        args.targets = ",".join(["proxy", *gateways])
        args.parts = args.parts or "load"
        levels, output = "25,50,100", "sse_load_workers.json"
        args.chunk_range = (100, 400)  # streams of 2-20 s: each level ends soon after
    if args.quick:
        levels, args.duration, args.chunk_range = "5,10", 6.0, (100, 200)
        args.side_streams, args.rounds = 4, 1
    args.levels = args.levels or levels
    args.parts = args.parts or ",".join(PARTS)
    args.output = args.output or str(RESULTS / output)
    if "load" in args.parts.split(","):
        steps = len(args.targets.split(",")) * len(args.levels.split(","))
        bound = steps * (args.duration + args.chunk_range[1] / 20 + 15)
        bound += WARM_UP_S + WARM_UP_CHUNKS[1] / 20 + 15
        print(f"load: {steps} levels, at most {bound / 60:.0f} minutes", flush=True)


def build_parser() -> argparse.ArgumentParser:
    """The command line: a run's options, or a child process (``upstream``, ``proxy``,
    ``gateway``)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command")
    for name in ("upstream", "proxy", "gateway"):
        part = sub.add_parser(name)
        part.add_argument("--port", type=int, required=True)
        part.add_argument("--upstream", default="")
        part.add_argument("--redis", default=None)
        part.add_argument("--openai-models", action="store_true")
        part.add_argument("--httpx2", action="store_true", help="gateway: openai's httpx2 client")
        part.add_argument("--aiohttp", action="store_true", help="proxy: read with aiohttp")
    layer = sub.add_parser("layer")
    layer.add_argument("--layer", choices=LAYERS, required=True)
    layer.add_argument("--upstream", required=True)
    layer.add_argument("--streams", type=int, default=15)
    layer.add_argument("--seed", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help="a smoke run: small and short")
    parser.add_argument("--levels", default=None, help="streams at once, per level")
    parser.add_argument("--duration", type=float, default=20.0, help="seconds per level")
    parser.add_argument("--targets", default="proxy,gateway,gateway-2-redis")
    parser.add_argument(
        "--workers",
        default=None,
        help="the scale-out comparison alone: e.g. 1,2,4 gateway workers sharing Redis"
        " (with --redis), against the proxy; bounded run time",
    )
    parser.add_argument("--redis", action="store_true", help="gateway workers share Redis")
    parser.add_argument("--stop-p99-ms", type=float, default=2000.0, help="end a ramp beyond")
    parser.add_argument("--parts", default=None, help=f"default: {','.join(PARTS)}")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of gateway-cost and layers")
    parser.add_argument("--side-streams", type=int, default=25, help="streams per round")
    parser.add_argument(
        "--baseline-tree",
        default=None,
        help="gateway-cost: also run the gateway of this checkout (e.g. a git worktree"
        " of the commit before a change) side by side",
    )
    parser.add_argument("--output", default=None)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)

    if args.command == "upstream":
        with suppress(KeyboardInterrupt):
            asyncio.run(serve_upstream(args.port))
        return 0
    if args.command == "proxy":
        serve_app(proxy_app(args.upstream, args.aiohttp), args.port)
        return 0
    if args.command == "gateway":
        app = gateway_app(args.upstream, args.redis, args.openai_models, args.httpx2)
        serve_app(app, args.port)
        return 0
    if args.command == "layer":
        print(asyncio.run(run_layer(args.layer, args.upstream, args.streams, args.seed)))
        return 0
    configure(args, parser)

    def log(line: str) -> None:
        print(line, flush=True)

    parts = args.parts.split(",")
    result: dict[str, Any] = {
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "loadavg_before": os.getloadavg(),
        },
        "options": vars(args),
    }
    if "sans-io" in parts:
        result["sans_io"] = sans_io(log)
    if "memory" in parts:
        result["retained_memory"] = asyncio.run(retained_memory(log, 10 if args.quick else 40))
    port = free_port()
    with child("upstream", "--port", str(port), port=port) as upstream_process:
        _OWN_PIDS.append(upstream_process.pid)
        upstream = f"http://{HOST}:{port}/v1"
        if "bytes" in parts:
            result["wire_bytes"] = asyncio.run(wire_bytes(upstream, log, args.quick))
        if "gateway-cost" in parts:
            result["gateway_cost"] = asyncio.run(
                gateway_cost(upstream, log, args.side_streams, args.rounds, args.baseline_tree)
            )
        if "upstream-client" in parts:
            streams = 4 if args.quick else 12
            result["upstream_client"] = asyncio.run(
                upstream_client(upstream, log, streams, args.rounds)
            )
        if "layers" in parts:
            streams = 4 if args.quick else 15
            result["layers"] = layers(upstream, log, streams, args.rounds)
        if "load" in parts:
            result["load"] = asyncio.run(load(args, upstream, log))
    result["machine"]["loadavg_after"] = os.getloadavg()
    output = Path(args.output)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    if result.get("load"):
        plot(result["load"], output.with_suffix(".png"))
    log(f"results in {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
