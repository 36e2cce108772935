"""``slotflight bench``: slots against native JSON streaming, same tasks, same server.

The tasks ship in the wheel (``slotflight/bench/tasks``); ``--tasks`` reads others.
The runner and report need the ``bench`` extra (and the ``local`` extra for the
embedded model). See ``docs/bench.md``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..syntax import DEFAULT_SYNTAX

if TYPE_CHECKING:
    from .runner import RunRecord, RunSpec

__all__ = ["add_bench_arguments", "run_bench"]


def _names(text: str) -> tuple[str, ...]:
    names = tuple(part.strip() for part in text.split(",") if part.strip())
    if not names:
        raise argparse.ArgumentTypeError("expected a comma-separated list")
    return names


def add_bench_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``slotflight bench``."""
    server = parser.add_argument_group("server (default: the embedded local model)")
    server.add_argument("--base-url", help="an OpenAI-compatible server instead")
    server.add_argument("--model", help="model name on --base-url (default: the first listed)")
    server.add_argument("--api-key", help="API key for --base-url (default: $OPENAI_API_KEY)")

    work = parser.add_argument_group("what to run")
    work.add_argument(
        "--tasks",
        type=Path,
        help="task .jsonl file or folder (default: the tasks shipped with slotflight)",
    )
    work.add_argument("--schemas", type=_names, help="only these schemas, e.g. triage,product")
    work.add_argument(
        "--limit",
        type=int,
        help="first N tasks, schemas interleaved (8 = two tasks of each of four schemas)",
    )
    work.add_argument("--runs", type=int, default=1, help="repetitions of every run (default 1)")
    work.add_argument(
        "--seed", type=int, help="sampling seed sent to the server (run i uses seed + i)"
    )
    work.add_argument(
        "--modes",
        type=_names,
        default=("slots", "json_schema"),
        help="comma-separated: slots, json_schema, json_prompt (default slots,json_schema)",
    )
    work.add_argument(
        "--syntax",
        type=_names,
        default=(DEFAULT_SYNTAX,),
        help="frame syntaxes of slots mode, comma-separated (default: the SDK default)",
    )
    work.add_argument(
        "--grammar",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="send the plan's GBNF grammar in slots mode (default: on for the embedded server)",
    )
    work.add_argument(
        "--grammar-max-string-chars",
        type=int,
        metavar="N",
        help="compact grammar for small models: string values on one line of at most N chars",
    )
    work.add_argument("--max-tokens", type=int, default=400, help="per request (default 400)")
    work.add_argument(
        "--max-attempts", type=int, default=3, help="slots mode requests per run (default 3)"
    )
    work.add_argument("--temperature", type=float, help="sampling temperature (server default)")

    out = parser.add_argument_group("output")
    out.add_argument("--out", type=Path, help="results folder (default: ./benchmarks/results)")
    out.add_argument("--name", default="bench", help="file name stem: NAME.json, NAME.png")


class _Progress:
    """Draws the progress bar and one line per finished run."""

    def __init__(self, progress: Any, total: int) -> None:
        self._progress = progress
        self._task = progress.add_task("starting", total=total)

    def run_started(self, spec: RunSpec) -> None:
        self._progress.update(self._task, description=spec.label)

    def run_finished(self, record: RunRecord) -> None:
        verdict = "[green]valid[/]" if record.metrics.final_valid else "[red]invalid[/]"
        tokens = sum(u.completion for u in record.usage if u is not None)
        line = (
            f"{record.spec.label}: {verdict}, {tokens} completion tokens, "
            f"{record.requests} request(s), {record.wall_s:.1f} s"
        )
        if record.error:
            line += f" [yellow]({record.error})[/]"
        self._progress.console.print(line)
        self._progress.advance(self._task)


def run_bench(args: argparse.Namespace) -> int:
    """Run ``slotflight bench`` with parsed ``args``; the exit status."""
    try:
        from rich.console import Console
    except ImportError:
        print(
            "slotflight bench: install the 'bench' extra (pip install 'slotflight[bench]')",
            file=sys.stderr,
        )
        return 2
    err = Console(stderr=True)
    try:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

        from . import report, runner
        from .models import TASKS_DIR
    except ImportError as exc:
        err.print(f"slotflight bench: a dependency is missing ({exc}); install the 'bench' extra")
        return 2

    try:
        config = runner.BenchConfig(
            tasks=args.tasks if args.tasks is not None else TASKS_DIR,
            runs=args.runs,
            seed=args.seed,
            modes=args.modes,
            syntaxes=args.syntax,
            grammar=args.grammar,
            grammar_max_string_chars=args.grammar_max_string_chars,
            limit=args.limit,
            schemas=args.schemas,
            max_tokens=args.max_tokens,
            max_attempts=args.max_attempts,
            temperature=args.temperature,
            base_url=args.base_url,
            model=args.model,
            api_key=args.api_key,
        )
        tasks = runner.select_tasks(runner.read_tasks(config.tasks, config.schemas), config.limit)
    except ValueError as exc:
        err.print(f"slotflight bench: {exc}")
        return 2
    if not tasks:
        err.print("slotflight bench: no task to run")
        return 2
    specs = runner.plan_runs(config, tasks)
    out_dir = args.out if args.out is not None else Path("benchmarks") / "results"

    try:
        with runner.open_target(config) as target:
            err.print(
                f"{len(tasks)} tasks × {len(runner.variants(config))} variants × "
                f"{config.runs} runs on {target.model} ({target.kind} server)"
            )
            columns = (*Progress.get_default_columns()[:1], BarColumn(), MofNCompleteColumn())
            with Progress(*columns, TimeElapsedColumn(), console=err) as progress:
                results = runner.run_benchmark(
                    config, target, specs, observer=_Progress(progress, len(specs))
                )
    except ImportError as exc:
        err.print(
            f"slotflight bench: the embedded server needs the 'local' extra ({exc}); "
            "or pass --base-url"
        )
        return 2

    doc = results.to_json()
    json_path = out_dir / f"{args.name}.json"
    png_path = out_dir / f"{args.name}.png"
    report.write_results(doc, json_path)
    report.write_plot(doc, png_path)
    Console().print(
        report.summary_table(report.summarize(doc), title=f"slotflight bench: {target.model}")
    )
    err.print(f"wrote {json_path} and {png_path}")
    if all(record.error and not record.chunks for record in results.runs):
        err.print("slotflight bench: every run failed before receiving any output")
        return 1
    return 0
