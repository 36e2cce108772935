"""Latency of a short, ordinary request through the local server.

The same small request (one user message, ``max_tokens=8``, greedy, seeded) is sent
``--requests`` times in a row, non-streamed and streamed, with the real ``openai``
client over HTTP; it prints the median and 90th percentile of the whole request and,
for the stream, of the time to the first content chunk. The prompt is the same every
time, so its evaluation is reused and the figures show the server's own cost per
request plus eight sampled tokens.

It uses only the public API of :mod:`slotflight.local`, so the same file measures any
version of the server (point ``PYTHONPATH`` at another checkout and run the file by
path). Run with ``python -m benchmarks.local_latency`` (``--requests 20``).
"""

from __future__ import annotations

import argparse
import statistics
import time

from openai import OpenAI

from slotflight.local import LocalEngine, start_local_server

MESSAGES = [{"role": "user", "content": "Is water wet? Answer in one word."}]


def _quantiles(values: list[float]) -> str:
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]
    return f"median {statistics.median(ordered) * 1000:7.1f} ms, p90 {p90 * 1000:7.1f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--threads", type=int, help="llama.cpp threads (default: every core)")
    args = parser.parse_args()
    engine = LocalEngine(seed=1, n_threads=args.threads)
    with start_local_server(engine=engine) as server:
        client = OpenAI(base_url=server.base_url, api_key="local", max_retries=0, timeout=600)
        options = {"model": server.model, "messages": MESSAGES, "max_tokens": 8, "temperature": 0}
        client.chat.completions.create(**options)  # warm up: the prompt is now evaluated
        whole: list[float] = []
        for _ in range(args.requests):
            started = time.perf_counter()
            client.chat.completions.create(**options)
            whole.append(time.perf_counter() - started)
        streamed: list[float] = []
        first: list[float] = []
        for _ in range(args.requests):
            started = time.perf_counter()
            seen: float | None = None
            for chunk in client.chat.completions.create(**options, stream=True):
                if seen is None and chunk.choices and chunk.choices[0].delta.content:
                    seen = time.perf_counter() - started
            streamed.append(time.perf_counter() - started)
            first.append(seen if seen is not None else streamed[-1])
    engine.close()
    print(f"non-streamed request      {_quantiles(whole)}")
    print(f"streamed request          {_quantiles(streamed)}")
    print(f"streamed, first content   {_quantiles(first)}")


if __name__ == "__main__":
    main()
