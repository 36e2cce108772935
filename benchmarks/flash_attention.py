"""Time to first token with and without llama.cpp's flash attention, on the local server.

Two engines run side by side in this process, one with ``flash_attn=True`` (the
default) and one without; each gets the same requests, alternating between them. Per
round and engine, for each system prompt length in ``--system-words``:

- ``cold``: ``cache_prompt: false``, the whole prompt is evaluated (as the first
  request with a plan's prompt);
- ``warm``: the system prompt was the previous request's, only the user message is new.

Time to first token is measured as in :mod:`benchmarks.prefix_cache` (the real
``openai`` client over HTTP, ``max_tokens=1``). It prints the median and range per case,
and the ratio of the medians (with / without).

Run with ``python -m benchmarks.flash_attention`` (``--runs 10 --system-words 120,330``:
about 180 and 480 prompt tokens, the sizes of a JSON-mode request and of a slot request
of the benchmark's tasks; ``--json FILE`` writes the figures).
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from typing import Any

from openai import OpenAI

from benchmarks.prefix_cache import (
    TICKETS,
    TRIAGE,
    first_token,
    parse_args,
    system_text,
    ttft_figures,
    ttft_text,
    write_json,
)
from slotflight.local import LocalEngine, start_local_server

VARIANTS: dict[str, dict[str, Any]] = {
    "flash attention": {"flash_attn": True},
    "without": {"flash_attn": False},
}


def run(
    runs: int,
    words: list[int],
    threads: int | None,
    variants: Mapping[str, Mapping[str, Any]] = VARIANTS,
    max_tokens: int = 1,
) -> dict[str, Any]:
    """Each variant (``LocalEngine`` keyword arguments by name) served side by side, the
    same requests alternating between them; ``max_tokens > 1`` also times generation."""
    systems = {n: system_text(TRIAGE, n) for n in words}
    samples: dict[tuple[str, int, str], list[dict[str, Any]]] = {}
    with ExitStack() as stack:
        targets = {}
        for name, options in variants.items():
            engine = LocalEngine(seed=1, n_threads=threads, **options)
            stack.callback(engine.close)
            server = stack.enter_context(start_local_server(engine=engine))
            client = OpenAI(base_url=server.base_url, api_key="local", max_retries=0, timeout=600)
            first_token(client, server.model, systems[words[0]], TICKETS[0], cache=True)
            targets[name] = (client, server.model)
        for index in range(runs):
            for n, system in systems.items():
                for name, (client, model) in targets.items():
                    # Every user message is new: only the system prompt can be reused.
                    cold, warm = (
                        f"#{index}-{k}: {TICKETS[(index + k) % len(TICKETS)]}" for k in (0, 1)
                    )
                    for case, ticket, cache in (("cold", cold, False), ("warm", warm, True)):
                        sample = first_token(client, model, system, ticket, cache, max_tokens)
                        samples.setdefault((name, n, case), []).append(sample)
    cases = [
        {
            "variant": name,
            "system_words": n,
            "case": case,
            "prompt_tokens": found[0]["prompt_tokens"],
            "cached_tokens": statistics.median(s["cached_tokens"] or 0 for s in found),
            **ttft_figures(found),
            **decode_figures(found),
        }
        for (name, n, case), found in samples.items()
    ]
    return {"runs": runs, "threads": threads, "max_tokens": max_tokens, "cases": cases}


def decode_figures(samples: list[dict[str, Any]]) -> dict[str, float]:
    """Median seconds per generated token after the first (when more than one was)."""
    rates = [
        (s["total_s"] - s["ttft_s"]) / (s["completion_tokens"] - 1)
        for s in samples
        if (s["completion_tokens"] or 0) > 1
    ]
    return {"decode_s_per_token": statistics.median(rates)} if rates else {}


def report(summary: dict[str, Any], variants: Sequence[str]) -> None:
    """One line per case, with the ratio of its median to the last variant's."""
    median = {
        (c["variant"], c["system_words"], c["case"]): c["ttft_median_s"] for c in summary["cases"]
    }
    decode = {
        (c["variant"], c["system_words"], c["case"]): c.get("decode_s_per_token")
        for c in summary["cases"]
    }
    last = variants[-1]
    for c in summary["cases"]:
        key = (c["system_words"], c["case"])
        ratio = median[(c["variant"], *key)] / median[(last, *key)]
        line = (
            f"{c['variant']:20} {c['case']:4} prompt {c['prompt_tokens']:4} tokens "
            f"(cached {c['cached_tokens']:4.0f}): {ttft_text(c)}; /{last} {ratio:.2f}"
        )
        per_token, baseline = decode[(c["variant"], *key)], decode[(last, *key)]
        if per_token is not None and baseline:
            line += f"; {1000 * per_token:.1f} ms/token, /{last} {per_token / baseline:.2f}"
        print(line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--system-words", default="120,330")
    args = parse_args(parser)
    words = [int(w) for w in args.system_words.split(",")]
    summary = run(args.runs, words, args.threads)
    report(summary, list(VARIANTS))
    write_json(args.json, summary)


if __name__ == "__main__":
    main()
