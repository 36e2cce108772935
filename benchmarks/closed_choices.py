"""Closed choices read against a content-free answer: what calibrating them would give.

A small model writes the same few values of a closed field whatever the input says
(SmolLM2-135M answers ``integrations`` for a triage's product area in 19 of 30 runs).
Contextual calibration (Zhao et al. 2021, "Calibrate Before Use") divides the model's
probability of each option by the probability it gives that option when the input
holds nothing, and takes the best ratio. This measures, offline, what that choice
would make of the values a benchmark run wrote, on the weights the embedded server
loads:

- the **closed fields** of a schema are its top-level enums of strings, booleans and
  integers with at most :data:`MAX_RANGE` values (``minimum`` to ``maximum``); each
  option is written as a slot value is (``true``, ``3``, ``blender``);
- for each slots-mode run (of one or more of ``slotflight bench``'s JSON reports, their
  runs pooled) and each closed field
  found in the text of its first request (the named line ``name:``, first seen), the
  model reads the prompt as the embedded server renders it (the slot prompt and the
  task) and the run's text up to ``name:``, and gives each option a probability two
  ways: ``sequence``, the product of the probabilities of its tokens (the text
  re-tokenized as the tokenizer cuts it, which is most often how the model wrote it),
  normalised over the options; and ``first_token``, the probability of the tokens that
  begin only that option, out of the whole vocabulary (a grammar that allows only the
  options sees these), normalised over the options. ``top_20`` keeps of those only
  the tokens among the 20 likeliest: what a server's ``top_logprobs`` would give;
- the **prior** of each field is the same figure at the same field of a content-free
  answer: a run of ``slotflight bench --tasks benchmarks/content_free.jsonl --modes
  slots --runs 1`` (``N/A`` as instructions and input), its own text up to ``name:``;
- the choices compared: the value the run wrote, the likeliest option (``argmax``), and
  the calibrated one (the best probability over prior; an option the prior's figure
  does not hold is given the prior's smallest).

Reported per field and over all closed fields, and what each choice would make of each
run's field accuracy (the gold scores of its other fields kept, invalid objects 0),
paired per run against the value written, with a 95 % bootstrap interval. A choice
changes only the value itself: what the model wrote after it stays as it was, and a
field whose final value is not the one its first request wrote (a follow-up changed
it) keeps its score. Run with::

    python -m benchmarks.closed_choices benchmarks/results/RUN.json [RUN2.json …] \\
        --content-free benchmarks/results/content-free-MODEL.json [--model PATH] \\
        [--seeds 1,2,3] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import math
import random
import re
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from slotflight.bench.models import Task, load_tasks
from slotflight.bench.runner import first_request_messages
from slotflight.syntax.closed_choices import calibrated_choice as calibrated
from slotflight.syntax.closed_choices import normalised

__all__ = [
    "CHOICES",
    "MAX_RANGE",
    "ClosedField",
    "calibrated",
    "closed_fields",
    "main",
    "normalised",
]

#: The most values an integer field may take to count as a closed choice.
MAX_RANGE: Final = 10
CONTENT_FREE_TASKS: Final = Path(__file__).parent / "content_free.jsonl"
TOP_LOGPROBS: Final = 20
#: The figures compared, by name: which option probability, calibrated or not.
CHOICES: Final = (
    ("argmax, sequence", "sequence", False),
    ("calibrated, sequence", "sequence", True),
    ("calibrated, first token", "first_token", True),
    ("calibrated, top 20", "top_20", True),
)
RESAMPLES: Final = 2000


@dataclass(frozen=True)
class ClosedField:
    """A top-level field whose value is one of a few options, as a slot writes them."""

    name: str
    options: tuple[str, ...]


def _resolved(node: Mapping[str, Any], root: Mapping[str, Any]) -> Mapping[str, Any]:
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        found = root.get("$defs", {}).get(ref.rsplit("/", 1)[-1])
        if isinstance(found, Mapping):
            return found
    return node


def closed_fields(schema: Mapping[str, Any]) -> list[ClosedField]:
    """The closed fields of a JSON Schema's top-level properties, in schema order."""
    found: list[ClosedField] = []
    for name, raw in schema.get("properties", {}).items():
        node = _resolved(raw, schema)
        options: tuple[str, ...] = ()
        if isinstance(node.get("enum"), list) and all(isinstance(v, str) for v in node["enum"]):
            options = tuple(node["enum"])
        elif node.get("type") == "boolean":
            options = ("true", "false")
        elif node.get("type") == "integer":
            low, high = node.get("minimum"), node.get("maximum")
            if isinstance(low, int) and isinstance(high, int) and 0 < high - low + 1 <= MAX_RANGE:
                options = tuple(str(n) for n in range(low, high + 1))
        if len(options) > 1:
            found.append(ClosedField(name, options))
    return found


def argmax(probability: Mapping[str, float]) -> str | None:
    """The likeliest option, ``None`` when none has a probability."""
    return max(probability, key=lambda option: probability[option]) if probability else None


class _Reader:
    """The model reading prompts and texts, its cache kept between reads that share a
    beginning (the fields of one run)."""

    def __init__(self, model: Path, threads: int | None) -> None:
        import llama_cpp

        from slotflight.local._engine import _usable_cores
        from slotflight.local._prompt import PromptTokenizer

        cores = threads or _usable_cores()
        self.llm: Any = llama_cpp.Llama(
            model_path=str(model),
            n_ctx=4096,
            n_threads=cores,
            n_threads_batch=cores,
            logits_all=True,
            verbose=False,
        )
        self.prompts = PromptTokenizer(self.llm._model)
        self.pieces = [
            self.llm.detokenize([t]).decode("utf-8", "replace") for t in range(self.llm.n_vocab())
        ]

    def _logprobs_after(self, tokens: Sequence[int]) -> Any:
        """Log probabilities of the next token after ``tokens`` (the cache reused for
        their longest beginning already read)."""
        import numpy as np

        llm = self.llm
        same = 0
        for have, want in zip(llm.input_ids[: llm.n_tokens], tokens, strict=False):
            if have != want:
                break
            same += 1
        # At least the last token is read again: its logits are the ones wanted.
        # ``eval`` drops the cache from ``n_tokens`` on before it reads.
        same = min(same, len(tokens) - 1)
        llm.n_tokens = same
        llm.eval(list(tokens[same:]))
        logits = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float64)
        logits -= logits.max()
        return logits - math.log(float(np.exp(logits).sum()))

    def options(
        self, messages: Sequence[Mapping[str, Any]], before: str, field: ClosedField
    ) -> dict[str, dict[str, float]]:
        """The option figures (``sequence``, ``first_token``, ``top_20``) after the
        prompt of ``messages`` and the text ``before`` (which ends with ``name:``)."""
        import numpy as np

        prompt, _stops = self.prompts(messages)
        prefix = list(prompt) + self.llm.tokenize(before.encode(), add_bos=False)
        # The value follows ": "; a tokenizer that cuts the blank alone reads it first.
        blank = self.llm.tokenize(b" ", add_bos=False)
        lead = " "
        if len(blank) == 1 and self.pieces[blank[0]] == " ":
            first = self.llm.tokenize(f" {field.options[0]}".encode(), add_bos=False)
            if first and first[0] == blank[0]:
                prefix.append(blank[0])
                lead = ""
        logprobs = self._logprobs_after(prefix)
        first_token: dict[str, float] = defaultdict(float)
        top: dict[str, float] = defaultdict(float)
        for rank, token in enumerate(np.argsort(-logprobs)):
            piece = self.pieces[int(token)]
            if not piece.startswith(lead) or len(piece) == len(lead):
                continue
            begins = [o for o in field.options if o.startswith(piece[len(lead) :])]
            if len(begins) == 1:
                first_token[begins[0]] += math.exp(float(logprobs[token]))
                if rank < TOP_LOGPROBS:
                    top[begins[0]] += math.exp(float(logprobs[token]))
        sequence: dict[str, float] = {}
        for option in field.options:
            tokens = self.llm.tokenize(f"{lead}{option}".encode(), add_bos=False)
            if lead == "" and tokens and tokens[0] == blank[0]:
                tokens = tokens[1:]
            total = 0.0
            for at, token in enumerate(tokens):
                step = logprobs if at == 0 else self._logprobs_after(prefix + tokens[:at])
                total += float(step[token])
            sequence[option] = total
        best = max(sequence.values())
        sequence = normalised({o: math.exp(v - best) for o, v in sequence.items()})
        return {
            "sequence": sequence,
            "first_token": normalised(first_token),
            "top_20": normalised(top),
        }


def _named_line(text: str, name: str) -> re.Match[str] | None:
    return re.search(rf"(?:^|\n){re.escape(name)}:", text)


def _figures_of(
    reader: _Reader, task: Task, text: str, syntax: str
) -> dict[str, tuple[str, dict[str, dict[str, float]]]]:
    """Per closed field found in ``text``: the value written and the option figures."""
    messages = first_request_messages(task, syntax)
    found: dict[str, tuple[str, dict[str, dict[str, float]]]] = {}
    for field in closed_fields(task.model.model_json_schema()):
        line = _named_line(text, field.name)
        if line is None:
            continue
        written = text[line.end() :].split("\n", 1)[0].strip()
        found[field.name] = (written, reader.options(messages, text[: line.end()], field))
    return found


def _written_as_slot(value: Any) -> str:
    return json.dumps(value) if isinstance(value, bool) else str(value)


def _run_accuracy(run: Mapping[str, Any], replaced: Mapping[str, float]) -> float:
    """The run's field accuracy with the scores of ``replaced`` fields (by path)."""
    accuracy = run.get("accuracy")
    if not run.get("final_valid") or not isinstance(accuracy, dict):
        return 0.0
    scores = [replaced.get(f["path"], f["score"]) for f in accuracy["fields"]]
    return sum(scores) / len(scores) if scores else 0.0


def _interval(differences: Sequence[float], seed: int = 0) -> tuple[float, float]:
    if not differences:
        return (0.0, 0.0)
    draw = random.Random(seed)
    means = sorted(
        statistics.fmean(draw.choice(differences) for _ in differences) for _ in range(RESAMPLES)
    )
    return means[int(0.025 * RESAMPLES)], means[int(0.975 * RESAMPLES) - 1]


def measure(
    runs: Iterable[Mapping[str, Any]],
    content_free: Iterable[Mapping[str, Any]],
    tasks: Mapping[str, Task],
    free_tasks: Mapping[str, Task],
    reader: _Reader,
    *,
    seeds: set[int] | None = None,
) -> dict[str, Any]:
    """Every closed field of the slots runs, its figures and the choices, and the
    per-run accuracy each choice gives (see the module's docstring)."""
    priors: dict[tuple[str, str], dict[str, dict[str, float]]] = {}
    for run in content_free:
        task = free_tasks[run["task"]]
        for name, (_, figures) in _figures_of(reader, task, run["text"], run["syntax"]).items():
            priors[(task.schema, name)] = figures
    fields: list[dict[str, Any]] = []
    per_run: list[dict[str, Any]] = []
    for run in runs:
        if run.get("mode") != "slots" or (seeds is not None and run.get("seed") not in seeds):
            continue
        task = tasks[run["task"]]
        final: Mapping[str, Any] = run["final"] if isinstance(run.get("final"), dict) else {}
        changed: dict[str, dict[str, float]] = {label: {} for label, _, _ in CHOICES}
        for name, (written, figures) in _figures_of(
            reader, task, run["text"], run["syntax"]
        ).items():
            gold = _written_as_slot(task.gold[name]) if task.gold else None
            prior = priors.get((task.schema, name), {})
            row: dict[str, Any] = {
                "task": run["task"],
                "seed": run.get("seed"),
                "field": name,
                "gold": gold,
                "written": written,
                "final": _written_as_slot(final.get(name)),
                "figures": figures,
                "prior": prior,
                "choices": {},
            }
            for label, figure, calibrate in CHOICES:
                choice = (
                    calibrated(figures[figure], prior.get(figure, {}))
                    if calibrate
                    else argmax(figures[figure])
                ) or written
                row["choices"][label] = choice
                if row["final"] == written and gold is not None:
                    changed[label][name] = float(choice == gold)
            fields.append(row)
        base = _run_accuracy(run, {})
        per_run.append(
            {
                "task": run["task"],
                "seed": run.get("seed"),
                "written": base,
                **{label: _run_accuracy(run, changed[label]) for label, _, _ in CHOICES},
            }
        )
    return {"fields": fields, "runs": per_run}


def summary(result: Mapping[str, Any]) -> dict[str, Any]:
    """Accuracy of each choice per field and over all, and the runs' accuracy with
    each, paired against the value written."""
    labels = ["written", *(label for label, _, _ in CHOICES)]
    by_field: dict[str, dict[str, list[bool]]] = defaultdict(lambda: defaultdict(list))
    for row in result["fields"]:
        if row["gold"] is None:
            continue
        for label in labels:
            value = row["written"] if label == "written" else row["choices"][label]
            by_field[row["field"]][label].append(value == row["gold"])
            by_field["all closed fields"][label].append(value == row["gold"])
    fields = {
        name: {"n": len(rows["written"]), **{k: 100 * statistics.fmean(v) for k, v in rows.items()}}
        for name, rows in by_field.items()
    }
    runs = result["runs"]
    whole: dict[str, Any] = {"runs": len(runs)}
    if runs:
        whole["written"] = 100 * statistics.fmean(r["written"] for r in runs)
        for label, _, _ in CHOICES:
            differences = [100 * (r[label] - r["written"]) for r in runs]
            low, high = _interval(differences)
            whole[label] = {
                "accuracy": 100 * statistics.fmean(r[label] for r in runs),
                "paired": statistics.fmean(differences),
                "interval": [low, high],
            }
    return {"fields": fields, "whole": whole}


def _table(figures: Mapping[str, Any]) -> str:
    labels = ["written", *(label for label, _, _ in CHOICES)]
    lines = [
        "| field | n | " + " | ".join(labels) + " |",
        "| --- | ---: |" + " ---: |" * len(labels),
    ]
    for name, row in sorted(figures["fields"].items(), key=lambda kv: kv[0] == "all closed fields"):
        cells = " | ".join(f"{row[label]:.1f}" for label in labels)
        lines.append(f"| {name} | {row['n']} | {cells} |")
    whole = figures["whole"]
    if whole["runs"]:
        lines.append("")
        lines.append(f"field accuracy of {whole['runs']} runs, written: {whole['written']:.1f} %")
        for label, _, _ in CHOICES:
            item = whole[label]
            low, high = item["interval"]
            lines.append(
                f"  {label}: {item['accuracy']:.1f} %, paired {item['paired']:+.2f}"
                f" ({low:+.2f} to {high:+.2f})"
            )
    return "\n".join(lines)


def _by_id(tasks: Iterable[Task]) -> dict[str, Task]:
    return {task.id: task for task in tasks}


def main(argv: Sequence[str] | None = None) -> None:
    from benchmarks.grammar_cost import _weights

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reports", type=Path, nargs="+", help="slotflight bench JSON reports")
    parser.add_argument("--content-free", type=Path, required=True)
    parser.add_argument("--content-free-tasks", type=Path, default=CONTENT_FREE_TASKS)
    parser.add_argument("--tasks", type=Path, default=None, help="the run's tasks")
    parser.add_argument("--model", default=None, help="GGUF file (default: SmolLM2's)")
    parser.add_argument("--seeds", default=None, help="comma-separated, default all")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    runs = [
        run for path in args.reports for run in json.loads(path.read_text(encoding="utf-8"))["runs"]
    ]
    free = json.loads(args.content_free.read_text(encoding="utf-8"))
    seeds = None if args.seeds is None else {int(s) for s in args.seeds.split(",")}
    reader = _Reader(_weights(args.model), args.threads)
    result = measure(
        runs,
        free["runs"],
        _by_id(load_tasks(args.tasks)),
        _by_id(load_tasks(args.content_free_tasks)),
        reader,
        seeds=seeds,
    )
    figures = summary(result)
    print(_table(figures))
    if args.json is not None:
        document = {
            "reports": [path.name for path in args.reports],
            "content_free": args.content_free.name,
            "model": Path(reader.llm.model_path).name,
            "seeds": sorted(seeds) if seeds else None,
            "summary": figures,
            **result,
        }
        args.json.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
