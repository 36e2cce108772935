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

VARIANTS = {"flash attention": True, "without": False}


def run(runs: int, words: list[int], threads: int | None) -> dict[str, Any]:
    systems = {n: system_text(TRIAGE, n) for n in words}
    samples: dict[tuple[str, int, str], list[dict[str, Any]]] = {}
    with ExitStack() as stack:
        targets = {}
        for name, flash in VARIANTS.items():
            engine = LocalEngine(seed=1, n_threads=threads, flash_attn=flash)
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
                        sample = first_token(client, model, system, ticket, cache)
                        samples.setdefault((name, n, case), []).append(sample)
    cases = [
        {
            "variant": name,
            "system_words": n,
            "case": case,
            "prompt_tokens": found[0]["prompt_tokens"],
            "cached_tokens": statistics.median(s["cached_tokens"] or 0 for s in found),
            **ttft_figures(found),
        }
        for (name, n, case), found in samples.items()
    ]
    return {"runs": runs, "threads": threads, "cases": cases}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--system-words", default="120,330")
    args = parse_args(parser)
    words = [int(w) for w in args.system_words.split(",")]
    summary = run(args.runs, words, args.threads)
    median = {
        (c["variant"], c["system_words"], c["case"]): c["ttft_median_s"] for c in summary["cases"]
    }
    for c in summary["cases"]:
        key = (c["system_words"], c["case"])
        ratio = median[("flash attention", *key)] / median[("without", *key)]
        print(
            f"{c['variant']:15} {c['case']:4} prompt {c['prompt_tokens']:4} tokens "
            f"(cached {c['cached_tokens']:4.0f}): {ttft_text(c)}; with/without {ratio:.2f}"
        )
    write_json(args.json, summary)


if __name__ == "__main__":
    main()
