"""Prompt and generation speed of the embedded model's weight formats, on the local server.

The packaged SmolLM2-135M file stores its weights as Q4_1; the engine loads a Q8_0 copy
by default (``LocalEngine(quantization="auto")``). Three engines run side by side in this
process, as in :mod:`benchmarks.flash_attention` (whose cases and timing this uses): the
Q8_0 copy, a Q4_0 copy (smaller and faster again, but a second rounding of the 4-bit
weights) and the file as shipped. Each request generates up to ``--max-tokens`` tokens,
so the time per generated token is measured besides the time to the first.

Run with ``python -m benchmarks.weights`` (``--runs 8 --system-words 120,330``: about
180 and 480 prompt tokens; ``--json FILE`` writes the figures).
"""

from __future__ import annotations

import argparse

from benchmarks.flash_attention import report, run
from benchmarks.prefix_cache import parse_args, write_json

VARIANTS = {
    "q8_0 copy (default)": {"quantization": "q8_0"},
    "q4_0 copy": {"quantization": "q4_0"},
    "as shipped (q4_1)": {"quantization": None},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--system-words", default="120,330")
    parser.add_argument("--max-tokens", type=int, default=24)
    args = parse_args(parser)
    words = [int(w) for w in args.system_words.split(",")]
    summary = run(args.runs, words, args.threads, VARIANTS, args.max_tokens)
    report(summary, list(VARIANTS))
    write_json(args.json, summary)


if __name__ == "__main__":
    main()
