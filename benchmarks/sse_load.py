"""Load check of the gateway: many concurrent slot streams on one uvicorn worker.

The gateway (``slotflight serve`` code, in-memory store) runs in a child process with
one worker; a scripted OpenAI-compatible upstream and the SSE clients run here. It
reports:

- completed streams (ending with ``done``) out of those started, at the concurrency;
- time to first event (client POST → first SSE message), p50 / p99;
- event latency: the upstream writing its last chunk → the client receiving ``done``,
  p50 / p99 (one monotonic clock: upstream and clients share this process);
- the gateway's resident memory (RSS) before the run and after every stream finished.

Run with ``python -m benchmarks.sse_load`` (``--concurrency 200 --streams 1000``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

import httpx
from httpx_sse import aconnect_sse

from slotflight.testing import Reply, ScriptedServer
from tests.web_support import TRIAGE_SCHEMA, free_port, triage_frames

_SERVER = (
    "import sys; from slotflight.web import serve; "
    "serve(sys.argv[1], port=int(sys.argv[2]), log_level='warning', max_active_streams=100000)"
)


@dataclass
class Outcome:
    index: int
    ok: bool
    first_event: float
    done_at: float
    failure: str = ""


def rss_kib(pid: int) -> int:
    """Resident set size of process ``pid`` in KiB (Linux ``/proc``)."""
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("VmRSS not found")


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


async def one_stream(client: httpx.AsyncClient, index: int) -> Outcome:
    body: dict[str, Any] = {
        "model": "scripted",
        "messages": [{"role": "user", "content": f"ticket {index}"}],
        "schema": TRIAGE_SCHEMA,
        "options": {"max_attempts": 1},
    }
    started = time.monotonic()
    first = float("nan")
    last_event, last_data = "", ""
    async with aconnect_sse(client, "POST", "/v1/slot-streams", json=body) as source:
        if source.response.status_code != 200:
            await source.response.aread()
            return Outcome(index, False, first, time.monotonic(), source.response.text)
        async for message in source.aiter_sse():
            if first != first:  # NaN: the first message
                first = time.monotonic() - started
            last_event, last_data = message.event, message.data
    ok = last_event == "done"
    return Outcome(index, ok, first, time.monotonic(), "" if ok else last_data)


async def run_batch(url: str, start: int, count: int, concurrency: int) -> list[Outcome]:
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as client:
        gate = asyncio.Semaphore(concurrency)

        async def guarded(index: int) -> Outcome:
            async with gate:
                try:
                    return await one_stream(client, index)
                except httpx.HTTPError as exc:
                    return Outcome(index, False, float("nan"), time.monotonic(), repr(exc))

        return await asyncio.gather(*(guarded(i) for i in range(start, start + count)))


def wait_ready(url: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError("the gateway exited")
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            time.sleep(0.1)
    raise RuntimeError("the gateway did not start")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, default=200)
    parser.add_argument("--streams", type=int, default=1000)
    parser.add_argument("--chunk-delay", type=float, default=0.01, help="upstream s per chunk")
    args = parser.parse_args()

    text = triage_frames()
    replies = [Reply(text, chunks=8, chunk_delay=args.chunk_delay)] * (args.streams + 20)
    with ScriptedServer(replies, max_recorded=args.streams + 100) as upstream:
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        gateway = subprocess.Popen(
            [sys.executable, "-c", _SERVER, upstream.base_url, str(port)],
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        try:
            wait_ready(url, gateway)
            asyncio.run(run_batch(url, 0, 20, 20))  # warm-up: imports, pools
            rss_before = rss_kib(gateway.pid)
            began = time.monotonic()
            outcomes: list[Outcome] = []
            for start in range(0, args.streams, args.concurrency):
                count = min(args.concurrency, args.streams - start)
                outcomes += asyncio.run(run_batch(url, 20 + start, count, args.concurrency))
            elapsed = time.monotonic() - began
            time.sleep(0.5)
            rss_after = rss_kib(gateway.pid)
            finished = {r.body["messages"][-1]["content"]: r.finished_at for r in upstream.requests}
        finally:
            gateway.terminate()
            gateway.wait(15)

    latencies = []
    for outcome in outcomes:
        upstream_end = finished.get(f"ticket {outcome.index}")
        if outcome.ok and upstream_end is not None:
            latencies.append(outcome.done_at - upstream_end)
    firsts = [o.first_event for o in outcomes if o.ok]
    done = sum(o.ok for o in outcomes)
    rows = [
        ("streams completed", f"{done} / {len(outcomes)}"),
        ("concurrency", str(args.concurrency)),
        ("wall time", f"{elapsed:.1f} s"),
        (
            "first event p50 / p99",
            f"{percentile(firsts, 0.5) * 1000:.0f} / {percentile(firsts, 0.99) * 1000:.0f} ms",
        ),
        (
            "event latency p50 / p99",
            f"{percentile(latencies, 0.5) * 1000:.1f} / {percentile(latencies, 0.99) * 1000:.1f} ms",
        ),
        ("gateway RSS before", f"{rss_before / 1024:.1f} MiB"),
        (f"gateway RSS after {len(outcomes)} streams", f"{rss_after / 1024:.1f} MiB"),
    ]
    failures = Counter(o.failure[:160] for o in outcomes if not o.ok)
    rows += [(f"failed ({n}x)", reason) for reason, n in failures.most_common(3)]
    width = max(len(name) for name, _ in rows)
    print(f"{'metric':<{width}}  value")
    print(f"{'-' * width}  {'-' * 20}")
    for name, value in rows:
        print(f"{name:<{width}}  {value}")


if __name__ == "__main__":
    main()
