"""What a grammar costs per generated token on the embedded model.

llama-cpp-python applies a GBNF grammar to every candidate token of the vocabulary before
each token is sampled. This measures what that costs: for each schema of the benchmark's
task set, the first task's user message is answered (``--tokens`` tokens, seed 1, at
``--temperature``) five ways, in one process, on the weights the embedded server loads,
alternating per round:

- ``none``: no grammar;
- ``slots``: the plan's grammar in the default frame syntax (what slots mode sends);
- ``json_schema``: the grammar the server makes from the schema for
  ``response_format: json_schema``;

each grammar twice: applied to every token of the vocabulary before each draw
(llama-cpp-python's chain, ``whole``) and to the likeliest tokens first (what the
embedded server does, ``best first``: :mod:`slotflight.local._best_first`), which draw
the same tokens.

The prompt is the same for all (the user message alone), so the difference is
the grammar's, not the prompt's length. It prints, per schema and variant, the median
time between two streamed tokens and its ratio to ``none``.

Run with ``python -m benchmarks.grammar_cost`` (``--rounds 3 --tokens 64
--temperature 0.3``, the benchmark's temperature; ``--model PATH`` for another GGUF file;
``--json FILE`` writes the figures).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from slotflight import compile, grammar
from slotflight.bench.defaults import DEFAULT_TEMPERATURE
from slotflight.bench.models import SCHEMAS, TASKS_DIR, load_tasks
from slotflight.bench.runner import _user_text
from slotflight.local import default_model_path
from slotflight.local._best_first import BestFirstSampling
from slotflight.local._grammar import schema_to_grammar
from slotflight.local._model import is_packaged_model
from slotflight.local._weights import AUTO, resolve_quantization, weights_to_load


def _weights(path: str | None) -> Path:
    """The file the embedded server loads by default (the model it finds, converted as
    the engine converts it), or ``path``."""
    if path is not None:
        return Path(path)
    source = default_model_path()
    quantization = resolve_quantization(AUTO, packaged=is_packaged_model(source))
    return weights_to_load(source, quantization, os.cpu_count() or 1)[0]


def chat_stream(
    llm: BestFirstSampling,
    messages: list[dict[str, Any]],
    gbnf: str | None,
    max_tokens: int,
    temperature: float,
) -> Iterator[Any]:
    """The streamed chunks of ``llm``'s answer to ``messages`` under the grammar
    ``gbnf`` (``None``: none), seed 1."""
    from llama_cpp.llama_grammar import LlamaGrammar

    constraint = None if gbnf is None else LlamaGrammar.from_string(gbnf, verbose=False)
    stream: Iterator[Any] = llm.create_chat_completion(
        messages=messages,
        grammar=constraint,
        max_tokens=max_tokens,
        temperature=temperature,
        seed=1,
        stream=True,
    )
    return stream


def _per_token_ms(
    llm: BestFirstSampling, text: str, gbnf: str | None, tokens: int, temperature: float
) -> float:
    gaps: list[float] = []
    last: float | None = None
    stream = chat_stream(llm, [{"role": "user", "content": text}], gbnf, tokens, temperature)
    for _ in stream:
        now = time.perf_counter()
        if last is not None:
            gaps.append(now - last)
        last = now
    return 1000 * statistics.median(gaps) if gaps else float("nan")


def measure(model: Path, rounds: int, tokens: int, temperature: float) -> list[dict[str, Any]]:
    llm = BestFirstSampling(
        model_path=str(model), n_ctx=2048, n_threads=os.cpu_count(), flash_attn=True, verbose=False
    )
    tasks = {task.schema: task for task in reversed(load_tasks(TASKS_DIR))}
    rows: list[dict[str, Any]] = []
    for name, output in SCHEMAS.items():
        task = tasks[name]
        text = _user_text(task)
        texts = {
            "slots": grammar(compile(output)),
            "json_schema": schema_to_grammar(output.model_json_schema(), param="/schema"),
        }
        variants: dict[str, tuple[str | None, bool]] = {"none": (None, False)}
        for kind, gbnf in texts.items():
            variants[f"{kind} whole"] = (gbnf, False)
            variants[f"{kind} best first"] = (gbnf, True)
        times: dict[str, list[float]] = {variant: [] for variant in variants}
        for _ in range(rounds):
            for variant, (gbnf, best_first) in variants.items():
                llm.best_first = best_first
                times[variant].append(_per_token_ms(llm, text, gbnf, tokens, temperature))
        base = statistics.median(times["none"])
        for variant, values in times.items():
            ms = statistics.median(values)
            rows.append(
                {"schema": name, "variant": variant, "ms_per_token": ms, "ratio": ms / base}
            )
            print(f"{name:8} {variant:22} {ms:6.1f} ms/token  {ms / base:4.2f}x", flush=True)
    return rows


def write_figures(
    args: argparse.Namespace, model: Path, rows: list[dict[str, Any]], threads: int | None
) -> None:
    """Write the model's name, the command's settings (its arguments but ``--json`` and
    ``--model``), the threads and the rows to ``args.json`` (nothing without it)."""
    if args.json is not None:
        settings = {k: v for k, v in vars(args).items() if k not in ("json", "model")}
        figures = {"model": model.name, **settings, "threads": threads, "rows": rows}
        args.json.write_text(json.dumps(figures, indent=1) + "\n", encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--temperature", type=float, default=DEFAULT_TEMPERATURE)
    parser.add_argument("--model", help="a GGUF file (default: what the embedded server loads)")
    parser.add_argument("--json", type=Path, help="write the figures to this file")
    args = parser.parse_args()
    model = _weights(args.model)
    rows = measure(model, args.rounds, args.tokens, args.temperature)
    write_figures(args, model, rows, os.cpu_count())


if __name__ == "__main__":
    main()
