"""What drafting tokens from the prompt (prompt lookup decoding) saves on the embedded model.

llama-cpp-python can decode speculatively: before each step a draft model proposes the
next tokens, one batch reads the sampled token and the proposals, and the sampler then
draws position by position from that batch's logits, keeping proposals while it draws
them. A draft that looks the last tokens up in the prompt and the text written so far
costs nothing to make, and answers copy much of their input (a title, a name, a list
item), so it could shorten the first field and the object. Two measurements, in one
process on the weights the embedded server loads (same threads):

- ``batch``: after a context of ``--context`` tokens, the median time to read ``k``
  tokens in one batch with the logits of each (what a step with ``k - 1`` drafted tokens
  costs), for ``k`` in :data:`BATCHES`;
- ``tasks``: ``--tasks`` tasks of the benchmark's set (spread over the schemas), each in
  slots mode (the plan's grammar in ``--syntax``, the slot prompt) and in ``json_schema``
  mode (the server's grammar for the schema), written once without and once with a
  draft (:class:`RecentLookup`: the latest earlier place of the last 4 or 3 tokens, up
  to 4 tokens after it), with the benchmark's temperature, seed 1 and the server's
  sampler (the grammar applied best first); per answer the time to its first field and to its end, the tokens
  written, the model's passes and whether both wrote the same text.

The draft is read with the logits of its batch only: llama-cpp-python asks for the
logits of every token once a draft model is set, the prompt's included, which costs
each request a second reading of its prompt's output layer (:class:`_BatchLogits`
keeps them to batches of at most :data:`MAX_LOGITS_BATCH` tokens).
Run with ``python -m benchmarks.prompt_lookup`` (``--tasks 10 --rounds 5``; ``--model
PATH`` for another GGUF file, ``--syntax v4-quoted`` for Qwen2.5-Coder's, ``--json
FILE`` writes the figures).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from benchmarks.context_cost import _text_tokens
from benchmarks.grammar_cost import _weights, chat_stream, write_figures
from slotflight import compile, grammar
from slotflight.bench.defaults import DEFAULT_TEMPERATURE
from slotflight.bench.models import Task, load_tasks
from slotflight.bench.runner import _messages, first_request_messages
from slotflight.local._best_first import BestFirstSampling
from slotflight.local._engine import _usable_cores
from slotflight.local._grammar import schema_to_grammar

BATCHES = (1, 2, 3, 4, 6, 8, 11, 16)
MAX_LOGITS_BATCH = 16
"""The longest batch whose every token's logits are read (a prompt reads its last)."""


class RecentLookup:
    """A draft from the text so far: the tokens after the latest earlier place where
    the last ``longest`` tokens (else ``shortest``..``longest - 1``) appear, at most
    ``size`` of them. Counts the tokens it proposed."""

    def __init__(self, longest: int = 4, shortest: int = 3, size: int = 4) -> None:
        self.longest, self.shortest, self.size = longest, shortest, size
        self.proposed = 0

    def __call__(self, input_ids: npt.NDArray[np.intc], /, **_: Any) -> npt.NDArray[np.intc]:
        ids = input_ids.tolist()
        end = len(ids)
        for n in range(min(self.longest, end - 1), self.shortest - 1, -1):
            tail = ids[-n:]
            for start in range(end - n - 1, -1, -1):
                if ids[start : start + n] == tail:
                    draft = ids[start + n : min(start + n + self.size, end)]
                    self.proposed += len(draft)
                    return np.array(draft, dtype=np.intc)
        return np.array([], dtype=np.intc)


class _BatchLogits(BestFirstSampling):
    """The server's sampler, counting its passes; with a draft model it reads every
    token's logits in batches of at most :data:`MAX_LOGITS_BATCH` tokens (a draft's),
    only the last one's in longer batches (a prompt's)."""

    passes = 0

    def eval(self, tokens: Sequence[int]) -> None:
        if self.draft_model is not None:
            self._logits_all = len(tokens) <= MAX_LOGITS_BATCH
        self.passes += 1
        super().eval(tokens)


def batch_costs(llm: Any, context: int, rounds: int) -> list[dict[str, Any]]:
    """Median milliseconds to read ``k`` tokens in one batch after ``context`` tokens."""
    text = _text_tokens(llm, context + max(BATCHES))
    llm.reset()
    llm.eval(text[:context])
    rows = []
    for k in BATCHES:
        times = []
        for _ in range(rounds):
            llm.n_tokens = context
            start = time.perf_counter()
            llm.eval(text[context : context + k])
            times.append(time.perf_counter() - start)
        rows.append({"batch": k, "ms": round(1000 * statistics.median(times), 2)})
    base = rows[0]["ms"]
    for row in rows:
        row["ratio"] = round(row["ms"] / base, 3)
    return rows


def first_field_end(text: str, mode: str) -> int | None:
    """Where the first field of ``text`` is complete: slots, the end of its first line;
    JSON, the ``,`` or ``}`` after the object's first value (None before that)."""
    if mode == "slots":
        line = text.find("\n")
        return line if line >= 0 else None
    depth, quoted, escaped = 0, False, False
    for i, char in enumerate(text):
        if escaped:
            escaped = False
        elif quoted:
            escaped, quoted = char == "\\", char != '"'
        elif char == '"':
            quoted = True
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
            if depth == 0:
                return i
        elif char == "," and depth == 1:
            return i
    return None


def _answer(
    llm: _BatchLogits, mode: str, messages: list[dict[str, Any]], gbnf: str, max_tokens: int
) -> dict[str, Any]:
    llm.passes = 0
    text, first = "", None
    start = time.perf_counter()
    stream = chat_stream(llm, messages, gbnf, max_tokens, DEFAULT_TEMPERATURE)
    for chunk in stream:
        text += chunk["choices"][0]["delta"].get("content") or ""
        if first is None and first_field_end(text, mode) is not None:
            first = time.perf_counter() - start
    whole = time.perf_counter() - start
    tokens = len(llm.tokenize(text.encode("utf-8"), add_bos=False, special=False))
    return {
        "first_s": first,
        "whole_s": whole,
        "tokens": tokens,
        "passes": llm.passes,
        "text": text,
    }


def _spread(tasks: Sequence[Task], count: int) -> list[Task]:
    """``count`` tasks, every schema's in turn."""
    by_schema: dict[str, list[Task]] = {}
    for task in tasks:
        by_schema.setdefault(task.schema, []).append(task)
    picked: list[Task] = []
    while len(picked) < min(count, len(tasks)):
        for group in by_schema.values():
            if group and len(picked) < count:
                picked.append(group.pop(0))
    return picked


def answers(
    model: Path, syntax: str, count: int, threads: int, max_tokens: int
) -> list[dict[str, Any]]:
    """Each task's answer in each mode, without a draft and with one."""
    settings = {"n_ctx": 4096, "n_threads": threads, "n_threads_batch": threads}
    plain = _BatchLogits(model_path=str(model), verbose=False, **settings)
    draft = RecentLookup()
    drafted = _BatchLogits(
        model_path=str(model), verbose=False, draft_model=draft, logits_all=True, **settings
    )
    rows = []
    for task in _spread(load_tasks(), count):
        for mode in ("slots", "json_schema"):
            if mode == "slots":
                messages = first_request_messages(task, syntax)
                gbnf = grammar(compile(task.model), syntax)
            else:
                messages = _messages(task, "json_schema")
                gbnf = schema_to_grammar(task.model.model_json_schema(), param="/schema")
            without = _answer(plain, mode, messages, gbnf, max_tokens)
            draft.proposed = 0
            with_draft = _answer(drafted, mode, messages, gbnf, max_tokens)
            row = {
                "task": task.id,
                "mode": mode,
                "without": {k: v for k, v in without.items() if k != "text"},
                "with_draft": {k: v for k, v in with_draft.items() if k != "text"},
                "proposed": draft.proposed,
                "same_text": without["text"] == with_draft["text"],
            }
            rows.append(row)
            print(
                f"{task.id:12} {mode:11} whole {without['whole_s']:6.2f} -> "
                f"{with_draft['whole_s']:6.2f} s  passes {without['passes']:4} -> "
                f"{with_draft['passes']:4}  same text {row['same_text']}",
                flush=True,
            )
    return rows


def ratios(
    rows: Sequence[dict[str, Any]], mode: str, key: str, per_token: bool = False
) -> float | None:
    """The median over answers of ``key`` with a draft over ``key`` without; with
    ``per_token``, of ``key`` per token written (the two texts may differ in length)."""

    def value(side: dict[str, Any]) -> float | None:
        figure = side[key]
        if not figure:
            return None
        return float(figure / side["tokens"]) if per_token else float(figure)

    values = []
    for row in rows:
        if row["mode"] != mode:
            continue
        drafted, plain = value(row["with_draft"]), value(row["without"])
        if drafted is not None and plain:
            values.append(drafted / plain)
    return round(statistics.median(values), 3) if values else None


def summarize(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per mode, the medians of the ratios with a draft against without, and how many
    answers wrote the same text both ways."""
    return {
        mode: {
            "first_field": ratios(rows, mode, "first_s"),
            "whole": ratios(rows, mode, "whole_s"),
            "whole_per_token": ratios(rows, mode, "whole_s", per_token=True),
            "passes": ratios(rows, mode, "passes"),
            "passes_per_token": ratios(rows, mode, "passes", per_token=True),
            "same_text": sum(r["same_text"] for r in rows if r["mode"] == mode),
            "answers": sum(r["mode"] == mode for r in rows),
        }
        for mode in ("slots", "json_schema")
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--tasks", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=5, help="rounds of each batch read")
    parser.add_argument("--context", type=int, default=450, help="tokens before a batch")
    parser.add_argument("--syntax", default="v4", help="the slot syntax")
    parser.add_argument("--max-tokens", type=int, default=400)
    parser.add_argument("--threads", type=int, help="llama.cpp threads (default: every core)")
    parser.add_argument("--model", help="a GGUF file (default: what the embedded server loads)")
    parser.add_argument("--json", type=Path, help="write the figures to this file")
    args = parser.parse_args(argv)
    model = _weights(args.model)
    threads = args.threads or _usable_cores()
    reader = _BatchLogits(
        model_path=str(model),
        n_ctx=args.context + 64,
        n_threads=threads,
        n_threads_batch=threads,
        logits_all=True,
        verbose=False,
    )
    batches = batch_costs(reader, args.context, args.rounds)
    del reader
    for row in batches:
        print(f"batch {row['batch']:3}  {row['ms']:7.1f} ms  ({row['ratio']:.2f}x)", flush=True)
    rows = answers(model, args.syntax, args.tasks, threads, args.max_tokens)
    summary = summarize(rows)
    for mode, figures in summary.items():
        print(f"{mode}: with a draft against without, medians: {figures}", flush=True)
    write_figures(args, model, [{"batches": batches, "answers": rows, "summary": summary}], threads)


if __name__ == "__main__":
    main()
