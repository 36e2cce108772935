"""What the context before a request's new part costs the first field, on the embedded model.

A warm request reuses its cached prefix (the mode's system message, for slots the slot
prompt), so the model still reads the new part (the task's user message) and then
writes token by token; both attend to everything before them. This measures that
cost alone, in one process on the weights the embedded server loads (same threads,
flash attention as the server), with the text of the task set's user messages:

- for each context length in ``--contexts`` (tokens already in the KV cache: a warm
  request of the benchmark reuses 26 prompt tokens in ``json_schema`` mode, the chat
  template's start, and 292 in slots mode, the slot prompt, at the median on SmolLM2;
  Qwen2.5-Coder 26 and 293), ``--input`` tokens are read in one batch (the user
  message: 158 at the median on SmolLM2, 144 on Qwen), then ``--tokens`` tokens are
  decoded one at a time;
- the read time and the median time per decoded token are recorded, rounds
  alternating over the lengths; the medians over ``--rounds`` are printed with their
  ratio to the first length.

No sampling or grammar: the tokens decoded are the text's next ones, so the figures
are the model's attention and weights alone (``benchmarks.grammar_cost`` measures
the grammar). Run with ``python -m benchmarks.context_cost`` (``--rounds 5
--contexts 26,292``, ``--sweep`` for every 64 tokens up to 1,024; ``--model PATH``
for another GGUF file, ``--json FILE`` writes the figures).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.grammar_cost import _weights, write_figures
from slotflight.bench.models import load_tasks
from slotflight.bench.runner import _user_text
from slotflight.local._engine import _usable_cores

CONTEXTS = (26, 292)
SWEEP = tuple(range(64, 1025, 64))


def _text_tokens(llm: Any, needed: int) -> list[int]:
    """Tokens of the task set's user messages, one after another, at least ``needed``."""
    tokens: list[int] = []
    for task in load_tasks():
        tokens += llm.tokenize(_user_text(task).encode("utf-8"), add_bos=False)
        if len(tokens) >= needed:
            return tokens
    raise ValueError(f"the task set holds fewer than {needed} tokens of text")


def measure(
    model: Path,
    contexts: Sequence[int],
    *,
    rounds: int,
    input_tokens: int = 158,
    tokens: int = 20,
    threads: int | None = None,
) -> list[dict[str, Any]]:
    """Per context length, the median read time of ``input_tokens`` and the median
    time per decoded token over ``rounds`` rounds, and their ratios to the first length."""
    import llama_cpp

    cores = threads or _usable_cores()
    longest = max(contexts) + input_tokens + tokens
    llm: Any = llama_cpp.Llama(
        model_path=str(model),
        n_ctx=longest + 64,
        n_batch=max(512, input_tokens),
        n_threads=cores,
        n_threads_batch=cores,
        flash_attn=True,
        verbose=False,
    )
    text = _text_tokens(llm, longest)
    reads: dict[int, list[float]] = {n: [] for n in contexts}
    steps: dict[int, list[float]] = {n: [] for n in contexts}
    for _ in range(rounds):
        for n in contexts:
            llm.reset()
            if n:
                llm.eval(text[:n])
            start = time.perf_counter()
            llm.eval(text[n : n + input_tokens])
            reads[n].append(time.perf_counter() - start)
            gaps: list[float] = []
            for position in range(n + input_tokens, n + input_tokens + tokens):
                start = time.perf_counter()
                llm.eval([text[position]])
                gaps.append(time.perf_counter() - start)
            steps[n].append(statistics.median(gaps))
    first = contexts[0]
    base_read, base_step = statistics.median(reads[first]), statistics.median(steps[first])
    rows = []
    for n in contexts:
        read, step = statistics.median(reads[n]), statistics.median(steps[n])
        rows.append(
            {
                "context": n,
                "read_ms": round(1000 * read, 2),
                "ms_per_token": round(1000 * step, 2),
                "read_ratio": round(read / base_read, 3),
                "token_ratio": round(step / base_step, 3),
            }
        )
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--contexts", default=",".join(map(str, CONTEXTS)), help="comma-separated lengths"
    )
    parser.add_argument("--sweep", action="store_true", help="every 64 tokens up to 1,024")
    parser.add_argument("--input", type=int, default=158, help="tokens read in one batch")
    parser.add_argument("--tokens", type=int, default=20, help="tokens decoded one by one")
    parser.add_argument("--threads", type=int, help="llama.cpp threads (default: every core)")
    parser.add_argument("--model", help="a GGUF file (default: what the embedded server loads)")
    parser.add_argument("--json", type=Path, help="write the figures to this file")
    args = parser.parse_args(argv)
    contexts = SWEEP if args.sweep else tuple(int(n) for n in args.contexts.split(","))
    model = _weights(args.model)
    threads = args.threads or _usable_cores()
    rows = measure(
        model,
        contexts,
        rounds=args.rounds,
        input_tokens=args.input,
        tokens=args.tokens,
        threads=threads,
    )
    for row in rows:
        print(
            f"context {row['context']:5}  read {args.input} tokens {row['read_ms']:7.1f} ms "
            f"({row['read_ratio']:.2f}x)  decode {row['ms_per_token']:5.2f} ms/token "
            f"({row['token_ratio']:.2f}x)",
            flush=True,
        )
    write_figures(args, model, rows, threads)


if __name__ == "__main__":
    main()
