"""Prompt and generation speed of a model's weight formats, on the local server.

The packaged SmolLM2-135M file stores its weights as Q4_1; the engine loads a Q8_0 copy
by default (``LocalEngine(quantization="auto")``). Three engines run side by side in this
process, as in :mod:`benchmarks.flash_attention` (whose cases and timing this uses): the
Q8_0 copy, a Q4_0 copy (smaller and faster again, but a second rounding of the 4-bit
weights) and the file as shipped. Each request generates up to ``--max-tokens`` tokens,
so the time per generated token is measured besides the time to the first.

``--model qwen2.5-coder-1.5b`` (a model of :mod:`slotflight.bench.split_models`, its
parts installed) compares that file as shipped (Q4_K_M) with a Q8_0 copy of it: the
question whether a larger model should be converted as SmolLM2 is.

Run with ``python -m benchmarks.weights`` (``--runs 8 --system-words 120,330``: about
180 and 480 prompt tokens; ``--json FILE`` writes the figures).
"""

from __future__ import annotations

import argparse
from typing import Any

from benchmarks.flash_attention import report, run
from benchmarks.prefix_cache import parse_args, write_json
from slotflight.bench.split_models import assembled_model, known_model

VARIANTS: dict[str, dict[str, Any]] = {
    "q8_0 copy (default)": {"quantization": "q8_0"},
    "q4_0 copy": {"quantization": "q4_0"},
    "as shipped (q4_1)": {"quantization": None},
}


def split_model_variants(name: str) -> dict[str, dict[str, Any]]:
    """The file of the split model ``name`` as shipped (the default for a file that is
    not the packaged one) against a Q8_0 copy of it."""
    path = str(assembled_model(known_model(name)))
    return {
        "as shipped (default)": {"model_path": path, "quantization": None},
        "q8_0 copy": {"model_path": path, "quantization": "q8_0"},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--system-words", default="120,330")
    parser.add_argument("--max-tokens", type=int, default=24)
    parser.add_argument("--model", help="a split model's name instead of the packaged SmolLM2")
    args = parse_args(parser)
    words = [int(w) for w in args.system_words.split(",")]
    variants = VARIANTS if args.model is None else split_model_variants(args.model)
    summary = run(args.runs, words, args.threads, variants, args.max_tokens)
    if args.model is not None:
        summary["model"] = args.model
    report(summary, list(variants))
    write_json(args.json, summary)


if __name__ == "__main__":
    main()
