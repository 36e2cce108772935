"""Time to first token with and without prompt prefix reuse, on the local server.

Every request has the same long system prompt (a triage instruction, about
``--system-words`` words) and its own short user message, as slotflight sends a plan's
prompt before the user's input. Three cases, each ``--runs`` times, interleaved:

- ``cold``: ``cache_prompt: false``, the whole prompt is evaluated;
- ``warm``: the same system prompt was the previous request's (the cold one);
- ``warm after other``: a request with another long system prompt came in between,
  so the prefix comes back from the saved states, not from the live context.

Time to first token is measured from sending the request to the first content chunk
of the stream (``max_tokens=1``), with the real ``openai`` client over HTTP. It prints
median and range per case, and ``cached_tokens`` as the server reported it.

Run with ``python -m benchmarks.prefix_cache`` (``--runs 5 --system-words 400``;
``--threads 1`` on a machine whose cores other work keeps busy: llama.cpp's threads
wait for each other, and two threads on two shared cores are slower than one).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

from openai import OpenAI

from slotflight.local import LocalEngine, start_local_server

TRIAGE = (
    "You triage support tickets for a software company. Read the ticket, then name the "
    "product area (billing, export, login or other), the urgency from 1 to 5, and the "
    "customer's name when the ticket gives one. "
)
OTHER = "You write short poems about the sea, in four lines, without rhyme. "
TICKETS = [
    "Ada here: the CSV export times out on big files.",
    "Login fails since Monday. Bob.",
    "I was charged twice for March, please fix. Carol",
    "The app crashes when I open settings.",
    "Dave: where is my invoice for April?",
    "Export to PDF gives an empty page.",
]


def system_text(base: str, words: int) -> str:
    repeats = max(1, words // len(base.split()))
    return " ".join([base] * repeats)


def first_token(
    client: OpenAI, model: str, system: str, user: str, cache: bool, max_tokens: int = 1
) -> dict[str, Any]:
    """Seconds to the first content chunk and to the end, and the usage the server reported."""
    started = time.perf_counter()
    stream = client.chat.completions.create(
        model=model,
        messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
        max_tokens=max_tokens,
        temperature=0,
        seed=1,
        stream=True,
        stream_options={"include_usage": True},
        extra_body={"cache_prompt": cache},
    )
    ttft: float | None = None
    usage: Any = None
    for chunk in stream:
        if ttft is None and chunk.choices and chunk.choices[0].delta.content:
            ttft = time.perf_counter() - started
        if chunk.usage is not None:
            usage = chunk.usage
    total = time.perf_counter() - started
    details = usage.prompt_tokens_details if usage is not None else None
    return {
        "ttft_s": ttft if ttft is not None else total,
        "total_s": total,
        "prompt_tokens": usage.prompt_tokens if usage is not None else None,
        "completion_tokens": usage.completion_tokens if usage is not None else None,
        "cached_tokens": details.cached_tokens if details is not None else None,
    }


def run(runs: int, system_words: int, threads: int | None) -> dict[str, Any]:
    triage = system_text(TRIAGE, system_words)
    other = system_text(OTHER, system_words)
    engine = LocalEngine(seed=1, n_threads=threads)
    cases: dict[str, list[dict[str, Any]]] = {"cold": [], "warm": [], "warm after other": []}
    try:
        with start_local_server(engine=engine) as server:
            client = OpenAI(base_url=server.base_url, api_key="local", max_retries=0, timeout=600)
            first_token(client, server.model, triage, TICKETS[0], cache=True)  # load, warm up
            for index in range(runs):
                # Every user message is new: only the system prompt can be reused.
                ticket = [f"#{index}-{n}: {TICKETS[(index + n) % len(TICKETS)]}" for n in range(4)]
                cases["cold"].append(first_token(client, server.model, triage, ticket[0], False))
                cases["warm"].append(first_token(client, server.model, triage, ticket[1], True))
                first_token(client, server.model, other, ticket[2], cache=True)
                cases["warm after other"].append(
                    first_token(client, server.model, triage, ticket[3], True)
                )
    finally:
        engine.close()
    summary: dict[str, Any] = {
        "runs": runs,
        "system_words": system_words,
        "threads": threads,
        "cases": {},
    }
    for name, samples in cases.items():
        summary["cases"][name] = {
            **ttft_figures(samples),
            "prompt_tokens": samples[0]["prompt_tokens"],
            "cached_tokens": [s["cached_tokens"] for s in samples],
        }
    return summary


def ttft_figures(samples: list[dict[str, Any]]) -> dict[str, float]:
    """Median, minimum and maximum time to first token of :func:`first_token` samples."""
    times = [s["ttft_s"] for s in samples]
    return {
        "ttft_median_s": statistics.median(times),
        "ttft_min_s": min(times),
        "ttft_max_s": max(times),
    }


def ttft_text(case: dict[str, Any]) -> str:
    """:func:`ttft_figures` as one line's part."""
    return (
        f"ttft median {case['ttft_median_s']:5.2f} s "
        f"(min {case['ttft_min_s']:.2f}, max {case['ttft_max_s']:.2f})"
    )


def parse_args(parser: argparse.ArgumentParser) -> argparse.Namespace:
    """Add the options every local-server benchmark has (threads, JSON output), parse."""
    parser.add_argument("--threads", type=int, help="llama.cpp threads (default: every core)")
    parser.add_argument("--json", help="also write the figures to this file")
    return parser.parse_args()


def write_json(path: str | None, summary: dict[str, Any]) -> None:
    if path:
        with open(path, "w", encoding="utf-8") as out:
            json.dump(summary, out, indent=2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--system-words", type=int, default=400)
    args = parse_args(parser)
    summary = run(args.runs, args.system_words, args.threads)
    for name, case in summary["cases"].items():
        print(
            f"{name:17} {ttft_text(case)}; "
            f"prompt {case['prompt_tokens']} tokens, cached {case['cached_tokens']}"
        )
    write_json(args.json, summary)


if __name__ == "__main__":
    main()
