"""Reporting a benchmark: the results files, the summary with its spread, the tables and
the PNG plot.

Everything here reads the results document (a header and one object per run, see
:func:`read_log`), so a report can be redrawn from a file without running anything again.

**Files.** While a benchmark runs, :class:`ResultsLog` appends each run to
``STEM.jsonl`` (line 1: the header; then one run per line), so an interrupted run loses
at most the run in progress and can be resumed. At the end :func:`write_results` writes
``STEM.json`` (header, runs and summary), :func:`write_markdown` ``STEM.md`` and
:func:`write_plot` ``STEM.png``.

**Figures** (per variant, e.g. ``slots v2`` or ``json_schema``; see :data:`FIGURES`):

- ``accuracy``: share of the gold fields answered right, pooled over every field of
  every run, a run whose object did not validate counting 0 on each field (the
  headline); ``accuracy_valid``: the same over the runs whose object validated only.
  Per field kind and per schema the same with invalid runs as 0.
  ``accuracy_gain``: this variant's accuracy minus ``json_schema``'s on the same task
  and seed, over the runs whose object validated in both (a paired difference, in
  points; shown when ``json_schema`` ran).
- ``final_valid``: share of runs whose object validated; ``stopped``: share of runs
  whose reading stopped early because the text could not be a JSON object, and
  ``fenced``: share whose object came in a Markdown code fence (``json_prompt``).
- ``degenerate``: share of the fields of produced objects (valid or not) flagged by a
  detector, and per detector.
- latency, median over runs: ``first_field`` (time to the first validated or settled
  field) and ``object`` (time to the whole validated object; valid runs only), each for
  cold and warm runs; ``first_field_after_first_piece``: a warm run's first field less
  the time of its first streamed piece (runs that logged their chunks), the part the
  output's format decides (before it the server read the prompt and drew a token in
  every mode).
- tokens, means per object: prompt and completion tokens of all requests, ``retries``
  (requests after the first) and ``retry_tokens`` (their completion tokens), over runs
  whose requests all reported usage.
- ``stream_valid`` / ``unsafe_partial``: means of the per-run shares; SSE bytes per
  state mode (slots mode).

**Spread.** Each figure is given over all runs, with the minimum and maximum of the
figure computed per seed (the run's ``seed``; its repetition when it has none), and a
95 % percentile-bootstrap interval over tasks: :data:`RESAMPLES` resamples of the tasks
with replacement, each task bringing all its runs (every seed), with a fixed random
seed so a report is reproducible.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Final, Literal, TypeAlias

from matplotlib.figure import Figure
from rich.table import Table

from .accuracy import DETECTORS, FIELD_KINDS
from .defaults import MODES, RESULTS_FORMAT
from .metrics import percentile

__all__ = [
    "FIGURES",
    "RESAMPLES",
    "FigureSpec",
    "ResultsLog",
    "Spread",
    "Summary",
    "load_results",
    "read_log",
    "rewrite_header",
    "rewrite_log",
    "spread",
    "summarize",
    "summary_markdown",
    "summary_tables",
    "write_markdown",
    "write_plot",
    "write_results",
]

#: Bootstrap resamples per figure.
RESAMPLES: Final = 1000
_BOOTSTRAP_SEED: Final = 20250101
_COLORS: Final = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b")

Run: TypeAlias = Mapping[str, Any]
Part: TypeAlias = tuple[float, float] | None
Unit: TypeAlias = Literal["share", "seconds", "count"]


# --------------------------------------------------------------------------- figures


@dataclass(frozen=True)
class FigureSpec:
    """One figure: ``ratio`` figures sum each run's ``(numerator, denominator)`` and
    divide (a mean when the denominator is 1); ``median`` figures take the median of
    each run's numerator. ``part`` returns ``None`` for runs that do not count."""

    name: str
    label: str
    unit: Unit
    part: Callable[[Run], Part]
    median: bool = False


def _fields(run: Run, keep: Callable[[Mapping[str, Any]], bool] = lambda f: True) -> Part:
    accuracy = run.get("accuracy")
    if not accuracy:
        return None
    fields = [f for f in accuracy["fields"] if keep(f)]
    if not fields:
        return None
    return (sum(f["score"] for f in fields), float(len(fields)))


def _valid_fields(run: Run) -> Part:
    return _fields(run) if run["final_valid"] else None


def _no_part(run: Run) -> Part:
    return None


#: The variant every other is compared with, run by run.
REFERENCE: Final = "json_schema"


def _seed(run: Run) -> tuple[str, Any]:
    """Which seed a run drew: its ``seed``, else (runs without one) its repetition.

    The repetition index alone is not enough: it restarts at 0 in every log, so runs of
    several logs read as one document (one seed each, ``--seed N --runs 1``) would all be
    repetition 0."""
    seed = run.get("seed")
    return ("seed", seed) if seed is not None else ("repeat", run.get("repeat"))


def _gain_over(reference: Sequence[Run]) -> Callable[[Run], Part]:
    """A run's field accuracy minus that of the reference run of the same task and
    seed (:func:`_seed`), when both validated."""
    valid = {(r["task"], _seed(r)): r for r in reference if r["final_valid"]}

    def part(run: Run) -> Part:
        other = valid.get((run["task"], _seed(run)))
        if not run["final_valid"] or other is None or other is run:
            return None
        mine, theirs = _fields(run), _fields(other)
        if mine is None or theirs is None:
            return None
        return (mine[0] / mine[1] - theirs[0] / theirs[1], 1.0)

    return part


def _degenerate(detector: str | None) -> Callable[[Run], Part]:
    def part(run: Run) -> Part:
        found = run.get("degenerate")
        if not found or not found["fields"]:
            return None
        if detector is not None and detector not in found["flags"]:
            return None  # scored before this detector existed: not counted as 0
        flagged = found["any"] if detector is None else found["flags"][detector]
        return (float(len(flagged)), float(found["fields"]))

    return part


def _latency(key: str, cold: bool) -> Callable[[Run], Part]:
    def part(run: Run) -> Part:
        value = run["latency"][key]
        return None if value is None or run["cold"] != cold else (value, 1.0)

    return part


def _after_first_piece(run: Run) -> Part:
    """A warm run's first field after its first streamed piece: the time the output's
    format decides. Before that piece the server read the prompt's new part and drew
    the first token, the same work in every mode."""
    first = run["latency"]["first_field_s"]
    pieces = run.get("chunk_log")
    if first is None or run["cold"] or not pieces:
        return None
    return (first - pieces[0][0], 1.0)


def _tokens(key: str) -> Callable[[Run], Part]:
    def part(run: Run) -> Part:
        tokens = run["tokens"]
        return (float(tokens[key]), 1.0) if tokens["reported"] else None

    return part


def _share(key: str) -> Callable[[Run], Part]:
    def part(run: Run) -> Part:
        value = run[key]["share"]
        return None if value is None else (value, 1.0)

    return part


def _prompted(flag: str) -> Callable[[Run], Part]:
    """The share of ``json_prompt`` runs with ``flag`` set (older records lack it)."""

    def part(run: Run) -> Part:
        return (float(run[flag]), 1.0) if run["mode"] == "json_prompt" and flag in run else None

    return part


def _sse(mode: str) -> Callable[[Run], Part]:
    def part(run: Run) -> Part:
        sizes = run.get("sse_bytes")
        return (float(sizes[mode]), 1.0) if sizes else None

    return part


FIGURES: Final[tuple[FigureSpec, ...]] = (
    FigureSpec("accuracy", "field accuracy (invalid = 0)", "share", _fields),
    FigureSpec("accuracy_valid", "field accuracy, valid outputs", "share", _valid_fields),
    # its part is bound by summarize(): it depends on the reference variant's runs
    FigureSpec("accuracy_gain", f"accuracy minus {REFERENCE}'s, both valid", "share", _no_part),
    FigureSpec("final_valid", "final valid", "share", lambda r: (float(r["final_valid"]), 1.0)),
    FigureSpec("stopped", "stopped early (not JSON)", "share", _prompted("stopped")),
    FigureSpec("fenced", "object in a code fence (read without it)", "share", _prompted("fenced")),
    FigureSpec(
        "flagged",
        "flagged values per object (kept, failing checks)",
        "count",
        lambda r: (
            (float(len(r["flagged"])), 1.0)
            if r["mode"] == "slots" and r.get("flagged") is not None
            else None
        ),
    ),
    FigureSpec("degenerate", "degenerate fields", "share", _degenerate(None)),
    *(
        FigureSpec(f"degenerate_{name}", f"· {name.replace('_', ' ')}", "share", _degenerate(name))
        for name in DETECTORS
    ),
    FigureSpec(
        "first_field_cold",
        "first field p50, cold",
        "seconds",
        _latency("first_field_s", True),
        True,
    ),
    FigureSpec(
        "first_field_warm",
        "first field p50, warm",
        "seconds",
        _latency("first_field_s", False),
        True,
    ),
    FigureSpec(
        "first_field_after_first_piece",
        "· after the first streamed piece",
        "seconds",
        _after_first_piece,
        True,
    ),
    FigureSpec(
        "object_cold", "whole object p50, cold", "seconds", _latency("object_s", True), True
    ),
    FigureSpec(
        "object_warm", "whole object p50, warm", "seconds", _latency("object_s", False), True
    ),
    FigureSpec("prompt_tokens", "prompt tokens", "count", _tokens("prompt")),
    FigureSpec("completion_tokens", "completion tokens", "count", _tokens("completion")),
    FigureSpec("retries", "retries per object", "count", lambda r: (float(r["requests"] - 1), 1.0)),
    FigureSpec("retry_tokens", "retry completion tokens", "count", _tokens("retry_completion")),
    FigureSpec("stream_valid", "stream valid", "share", _share("stream_valid")),
    FigureSpec("unsafe_partial", "unsafe partial", "share", _share("unsafe_partial")),
    FigureSpec("sse_full", "SSE bytes, full state", "count", _sse("full")),
    FigureSpec("sse_patch", "SSE bytes, patches", "count", _sse("patch")),
)


def _kind_figure(kind: str) -> FigureSpec:
    return FigureSpec(
        f"kind_{kind}",
        kind.replace("_", " "),
        "share",
        lambda r: _fields(r, lambda f: f["kind"] == kind),
    )


def _schema_figure(schema: str) -> FigureSpec:
    return FigureSpec(
        f"schema_{schema}", schema, "share", lambda r: _fields(r) if r["schema"] == schema else None
    )


# --------------------------------------------------------------------------- spread


@dataclass(frozen=True)
class Spread:
    """A figure over all runs, the min and max of its per-seed values, and its 95 %
    bootstrap interval over tasks; ``None`` where no run counts."""

    value: float | None
    seed_min: float | None = None
    seed_max: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None

    def to_json(self) -> dict[str, float | None]:
        return {
            "value": self.value,
            "seed_min": self.seed_min,
            "seed_max": self.seed_max,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
        }


def _combine(parts: Iterable[Part], median: bool) -> float | None:
    present = [p for p in parts if p is not None]
    if not present:
        return None
    if median:
        return percentile((p[0] for p in present), 50)
    total = sum(p[1] for p in present)
    return sum(p[0] for p in present) / total if total else None


def spread(runs: Sequence[Run], figure: FigureSpec, *, resamples: int = RESAMPLES) -> Spread:
    """``figure`` over ``runs`` with its spread (see the module docs).

    O(resamples · runs) for medians; ratio figures are summed per task first, so
    O(runs + resamples · tasks).
    """
    parts = [(run, figure.part(run)) for run in runs]
    value = _combine((p for _, p in parts), figure.median)
    if value is None:
        return Spread(None)
    per_seed: dict[Any, list[Part]] = {}
    per_task: dict[str, list[Part]] = {}
    for run, part in parts:
        per_seed.setdefault(_seed(run), []).append(part)
        per_task.setdefault(run["task"], []).append(part)
    seeds = [v for v in (_combine(p, figure.median) for p in per_seed.values()) if v is not None]
    groups: list[list[Part]] = list(per_task.values())
    if not figure.median:  # a task's runs add up to one (numerator, denominator)
        summed: list[list[Part]] = []
        for group in groups:
            present = [p for p in group if p is not None]
            summed.append(
                [(sum(p[0] for p in present), sum(p[1] for p in present))] if present else []
            )
        groups = summed
    rng = random.Random(_BOOTSTRAP_SEED)
    samples: list[float] = []
    for _ in range(resamples):
        picked = rng.choices(groups, k=len(groups))
        sample = _combine((p for group in picked for p in group), figure.median)
        if sample is not None:
            samples.append(sample)
    low = high = None
    if len(samples) >= resamples // 2:
        low, high = percentile(samples, 2.5), percentile(samples, 97.5)
    return Spread(value, min(seeds, default=None), max(seeds, default=None), low, high)


@dataclass(frozen=True)
class Summary:
    """One variant's figures: :data:`FIGURES` by name, accuracy per field kind and per
    schema (invalid = 0), each with its spread."""

    variant: str
    runs: int
    seeds: int
    figures: Mapping[str, Spread]
    kinds: Mapping[str, Spread]
    schemas: Mapping[str, Spread]

    def to_json(self) -> dict[str, Any]:
        return {
            "variant": self.variant,
            "runs": self.runs,
            "seeds": self.seeds,
            "figures": {k: v.to_json() for k, v in self.figures.items()},
            "accuracy_by_kind": {k: v.to_json() for k, v in self.kinds.items()},
            "accuracy_by_schema": {k: v.to_json() for k, v in self.schemas.items()},
        }


def _by_variant(doc: Mapping[str, Any]) -> dict[str, list[Run]]:
    """The runs of each variant: slots variants first, then the JSON modes in
    :data:`MODES` order; variants of one mode in the order they first ran."""
    groups: dict[str, list[Run]] = {}
    for run in doc["runs"]:
        groups.setdefault(run["variant"], []).append(run)
    rank: dict[str, int] = {mode: i for i, mode in enumerate(MODES)}
    ordered = sorted(
        groups.items(), key=lambda item: rank.get(str(item[1][0].get("mode")), len(rank))
    )
    return dict(ordered)


def summarize(doc: Mapping[str, Any], *, resamples: int = RESAMPLES) -> list[Summary]:
    """One summary per variant, slots variants first (:func:`_by_variant`). Field kinds and
    schemas are those present in the runs."""
    kinds = [
        k
        for k in FIELD_KINDS
        if any(
            f["kind"] == k
            for r in doc["runs"]
            if r.get("accuracy")
            for f in r["accuracy"]["fields"]
        )
    ]
    schemas = list(dict.fromkeys(r["schema"] for r in doc["runs"]))
    by_variant = _by_variant(doc)
    gain = _gain_over(by_variant.get(REFERENCE, ()))
    figures = [
        dataclasses.replace(f, part=gain) if f.name == "accuracy_gain" else f for f in FIGURES
    ]
    out: list[Summary] = []
    for variant, runs in by_variant.items():
        out.append(
            Summary(
                variant=variant,
                runs=len(runs),
                seeds=len({_seed(r) for r in runs}),
                figures={f.name: spread(runs, f, resamples=resamples) for f in figures},
                kinds={k: spread(runs, _kind_figure(k), resamples=resamples) for k in kinds},
                schemas={s: spread(runs, _schema_figure(s), resamples=resamples) for s in schemas},
            )
        )
    return out


# --------------------------------------------------------------------------- tables

#: How the cells read, said in every table.
LEGEND: Final = (
    "Cells: value over all runs [min–max of the per-seed values] "
    "(95 % bootstrap interval over tasks). Accuracy counts invalid outputs as 0 "
    "unless the row says otherwise."
)


def _number(value: float, unit: Unit) -> str:
    if unit == "share":
        return f"{value:.1%}"
    if unit == "seconds":
        return f"{value:.2f}"
    return f"{value:.0f}" if abs(value) >= 10 else f"{value:.2f}"


def _cell(item: Spread, unit: Unit) -> str:
    if item.value is None:
        return "–"
    text = _number(item.value, unit) + (" s" if unit == "seconds" else "")
    if item.seed_min is not None and item.seed_max is not None:
        text += f" [{_number(item.seed_min, unit)}–{_number(item.seed_max, unit)}]"
    if item.ci_low is not None and item.ci_high is not None:
        text += f" ({_number(item.ci_low, unit)}–{_number(item.ci_high, unit)})"
    return text


_Rows: TypeAlias = list[tuple[str, list[str]]]


def _main_rows(summaries: Sequence[Summary]) -> _Rows:
    rows: _Rows = [("runs (seeds)", [f"{s.runs} ({s.seeds})" for s in summaries])]
    for figure in FIGURES:
        cells = [_cell(s.figures[figure.name], figure.unit) for s in summaries]
        if any(c != "–" for c in cells):
            rows.append((figure.label, cells))
    return rows


def _grouped_rows(summaries: Sequence[Summary], attr: str) -> _Rows:
    names = list(dict.fromkeys(k for s in summaries for k in getattr(s, attr)))
    return [
        (
            name.replace("_", " "),
            [_cell(getattr(s, attr).get(name, Spread(None)), "share") for s in summaries],
        )
        for name in names
    ]


def _tables(summaries: Sequence[Summary]) -> list[tuple[str, _Rows]]:
    return [
        ("slotflight bench", _main_rows(summaries)),
        ("field accuracy by field kind (invalid = 0)", _grouped_rows(summaries, "kinds")),
        ("field accuracy by schema (invalid = 0)", _grouped_rows(summaries, "schemas")),
    ]


def summary_tables(summaries: Sequence[Summary], *, title: str | None = None) -> list[Table]:
    """The summary as rich tables: the figures, accuracy per field kind, per schema."""
    out: list[Table] = []
    for index, (name, rows) in enumerate(_tables(summaries)):
        table = Table(
            title=(title or name) if index == 0 else name,
            caption=LEGEND if index == 0 else None,
        )
        table.add_column("metric", style="bold")
        for summary in summaries:
            table.add_column(summary.variant, justify="right")
        for label, cells in rows:
            table.add_row(label, *cells)
        out.append(table)
    return out


def summary_markdown(summaries: Sequence[Summary]) -> str:
    """The same tables as GitHub Markdown, with the legend."""
    parts = [LEGEND, ""]
    for name, rows in _tables(summaries):
        header = [name, *(s.variant for s in summaries)]
        parts.append("| " + " | ".join(header) + " |")
        parts.append("| --- |" + " ---: |" * len(summaries))
        parts.extend("| " + " | ".join([label, *cells]) + " |" for label, cells in rows)
        parts.append("")
    return "\n".join(parts)


# --------------------------------------------------------------------------- files


class ResultsLog:
    """The results of a running benchmark, one JSON line per run: line 1 is the header,
    each later line one run, written and flushed as soon as the run ends."""

    def __init__(self, path: Path, header: Mapping[str, Any] | None = None) -> None:
        """Start ``path`` with ``header``, or with ``header=None`` append to it, after
        cutting off a last line that an interruption left unfinished."""
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        if header is None:
            data = path.read_bytes()
            if not data.endswith(b"\n"):
                with path.open("r+b") as handle:
                    handle.truncate(data.rfind(b"\n") + 1)
        self._file: IO[str] = path.open("w" if header is not None else "a", encoding="utf-8")
        if header is not None:
            self._write(header)

    def _write(self, item: Mapping[str, Any]) -> None:
        self._file.write(json.dumps(item, ensure_ascii=False) + "\n")
        self._file.flush()

    def append(self, run: Mapping[str, Any]) -> None:
        self._write(run)

    def close(self) -> None:
        self._file.close()


#: What every reader of a stored run relies on (the summary, ``--resume``,
#: ``--rescore``): its fields and their JSON types.
_RUN_FIELDS: Final[Mapping[str, type | tuple[type, ...]]] = {
    "task": str,
    "schema": str,
    "variant": str,
    "mode": str,
    "repeat": int,
    "final_valid": bool,
    "stream_valid": dict,
    "unsafe_partial": dict,
    "fields": dict,
    "cold": bool,
    "latency": dict,
    "tokens": dict,
    "requests": int,
}


def check_results(doc: Any, where: Path) -> dict[str, Any]:
    """``doc`` when it is a results document of :data:`RESULTS_FORMAT` whose runs hold
    what the readers rely on (:data:`_RUN_FIELDS`); else :class:`ValueError` saying
    what ``where`` lacks."""
    if not isinstance(doc, dict) or not isinstance(doc.get("config"), dict):
        raise ValueError(f"{where} is not a benchmark results file")
    if not isinstance(doc.get("format"), str):
        raise ValueError(f"{where} is not a benchmark results file: it names no format")
    if doc["format"] != RESULTS_FORMAT:
        raise ValueError(
            f"{where} is in the results format {doc['format']!r}; this version reads"
            f" {RESULTS_FORMAT!r} only: run that benchmark again"
        )
    if not isinstance(doc.get("environment", {}), dict) or not isinstance(doc.get("runs"), list):
        raise ValueError(f"{where} is not a benchmark results file")
    for number, run in enumerate(doc["runs"], start=1):
        wrong = (
            sorted(k for k, kind in _RUN_FIELDS.items() if not isinstance(run.get(k), kind))
            if isinstance(run, dict)
            else ["the run itself"]
        )
        if wrong:
            raise ValueError(f"{where}: run {number} lacks or mistypes {', '.join(wrong)}")
    return doc


def read_log(path: Path) -> dict[str, Any]:
    """The results document of a :class:`ResultsLog` file: its header with ``runs``.

    A last line cut short by an interruption (not JSON, or cut inside a UTF-8
    character) is dropped. Raises :class:`ValueError` when the file has no header of
    this format (:func:`check_results`), another line is not JSON, or a run lacks what
    the readers rely on.
    """
    lines = path.read_bytes().splitlines()
    items: list[Any] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            items.append(json.loads(line.decode("utf-8")))
        except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
            if number == len(lines) and items:
                break
            raise ValueError(f"{path}:{number}: not JSON") from None
    if not items or not isinstance(items[0], dict):
        raise ValueError(f"{path} is not a benchmark results log")
    return check_results({**items[0], "runs": items[1:]}, path)


def _replace(path: Path, data: bytes) -> None:
    """Write ``path`` whole: an interruption leaves the old file or the new one."""
    partial = path.with_name(path.name + ".partial")
    partial.write_bytes(data)
    os.replace(partial, path)


def rewrite_header(path: Path, header: Mapping[str, Any]) -> None:
    """Replace the header line of the :class:`ResultsLog` file ``path`` with ``header``,
    keeping every run line; the file is replaced whole."""
    data = path.read_bytes()
    end = data.find(b"\n")
    rest = data[end + 1 :] if end >= 0 else b""
    _replace(path, json.dumps(header, ensure_ascii=False).encode("utf-8") + b"\n" + rest)


def rewrite_log(path: Path, doc: Mapping[str, Any]) -> None:
    """Write the results document ``doc`` (a header with ``runs``) as the
    :class:`ResultsLog` file ``path``, replacing it whole."""
    items = [{k: v for k, v in doc.items() if k != "runs"}, *doc["runs"]]
    lines = "".join(json.dumps(item, ensure_ascii=False) + "\n" for item in items)
    _replace(path, lines.encode("utf-8"))


def write_results(doc: Mapping[str, Any], path: Path, summaries: Sequence[Summary]) -> None:
    """Write the results document, with ``summaries`` added, as JSON."""
    out = dict(doc)
    out["summary"] = [s.to_json() for s in summaries]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


def write_markdown(doc: Mapping[str, Any], path: Path, summaries: Sequence[Summary]) -> None:
    """Write the Markdown tables, headed by the model and the configuration."""
    config = doc.get("config", {})
    model = doc.get("environment", {}).get("model", "")
    shown = {**config}
    if "grammar" in shown and shown["grammar"] is None:
        shown["grammar"] = "in slots mode on the embedded server"
    settings = ", ".join(
        f"{key} {shown[key]}"
        for key in ("temperature", "max_tokens", "seed", "runs", "max_attempts", "grammar")
        if key in shown
    )
    text = f"# slotflight bench: {model}\n\n{settings}\n\n{summary_markdown(summaries)}"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def load_results(path: Path) -> dict[str, Any]:
    """A results document written by :func:`write_results`. Raises :class:`ValueError`
    when it is not JSON, or not of this format (:func:`check_results`)."""
    try:
        doc = json.loads(path.read_bytes().decode("utf-8"))
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError
        raise ValueError(f"{path} is not a benchmark results file: not JSON") from None
    return check_results(doc, path)


# --------------------------------------------------------------------------- plot


def _timeline(ax: Any, groups: Mapping[str, Sequence[Run]]) -> None:
    for color, (variant, runs) in zip(_COLORS * 4, groups.items(), strict=False):
        labelled = False
        for run in runs:
            times = sorted(run["fields"]["per_field"].values())
            if not times:
                continue
            shares = [(i + 1) / len(times) for i in range(len(times))]
            ax.step(
                [0.0, *times],
                [0.0, *shares],
                where="post",
                color=color,
                alpha=0.35,
                linewidth=1.0,
                label=None if labelled else variant,
            )
            labelled = True
    ax.set_title("Field completion over time (one line per run)")
    ax.set_xscale("symlog", linthresh=1.0)  # linear below 1 s, logarithmic above
    ax.set_xlabel("seconds since the request (log scale above 1 s)")
    ax.set_ylabel("share of the run's settled fields")
    ax.set_ylim(0, 1.05)
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="lower right")


def _bars(
    ax: Any,
    summaries: Sequence[Summary],
    groups: Sequence[tuple[str, Callable[[Summary], Spread]]],
    title: str,
    unit: Unit = "share",
) -> None:
    width = 0.8 / max(len(summaries), 1)
    for offset, (color, summary) in enumerate(zip(_COLORS * 4, summaries, strict=False)):
        xs = [i + offset * width for i in range(len(groups))]
        items = [get(summary) for _, get in groups]
        values = [item.value or 0.0 for item in items]
        errors = [
            [
                max(v - (i.ci_low if i.ci_low is not None else v), 0.0)
                for v, i in zip(values, items, strict=True)
            ],
            [
                max((i.ci_high if i.ci_high is not None else v) - v, 0.0)
                for v, i in zip(values, items, strict=True)
            ],
        ]
        bars = ax.bar(
            xs, values, width=width, color=color, label=summary.variant, yerr=errors, capsize=2
        )
        labels = ["–" if i.value is None else _number(i.value, unit) for i in items]
        ax.bar_label(
            bars, labels=labels, fontsize=6, padding=2, rotation=90 if len(groups) > 4 else 0
        )
    ax.set_xticks([i + width * (len(summaries) - 1) / 2 for i in range(len(groups))])
    ax.set_xticklabels([name for name, _ in groups], fontsize=8)
    ax.set_title(title)
    ax.grid(axis="y", alpha=0.3)
    if unit == "share":
        ax.set_ylim(0, 1.15)
    ax.legend(loc="upper right", fontsize=7)


def _kind_of(name: str) -> Callable[[Summary], Spread]:
    return lambda summary: summary.kinds.get(name, Spread(None))


def _named(*labels: tuple[str, str]) -> list[tuple[str, Callable[[Summary], Spread]]]:
    """Bar groups of :data:`FIGURES` by (label, figure name)."""
    return [(label, _figure_of(name)) for label, name in labels]


def _figure_of(name: str) -> Callable[[Summary], Spread]:
    return lambda summary: summary.figures[name]


def write_plot(doc: Mapping[str, Any], path: Path, summaries: Sequence[Summary]) -> None:
    """A PNG with accuracy and validity per variant, accuracy per field kind, latency
    cold and warm, and the field-completion timelines; error bars are the 95 %
    bootstrap intervals over tasks."""
    figure = Figure(figsize=(15, 10), layout="constrained")
    (quality, kinds), (latency, timeline) = figure.subplots(2, 2)
    _bars(
        quality,
        summaries,
        _named(
            ("accuracy\n(invalid = 0)", "accuracy"),
            ("accuracy\n(valid only)", "accuracy_valid"),
            ("final valid", "final_valid"),
            ("degenerate\nfields", "degenerate"),
        ),
        "Answer accuracy, validity and degenerate values",
    )
    names = list(dict.fromkeys(k for s in summaries for k in s.kinds))
    _bars(
        kinds,
        summaries,
        [(name.replace("_", "\n"), _kind_of(name)) for name in names],
        "Field accuracy by field kind (invalid = 0)",
    )
    _bars(
        latency,
        summaries,
        _named(
            ("first field\ncold", "first_field_cold"),
            ("first field\nwarm", "first_field_warm"),
            ("whole object\ncold", "object_cold"),
            ("whole object\nwarm", "object_warm"),
        ),
        "Latency, median seconds",
        unit="seconds",
    )
    _timeline(timeline, _by_variant(doc))
    model = doc.get("environment", {}).get("model", "")
    figure.suptitle(f"slotflight bench: slots vs native JSON modes ({model})")
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, format="png", dpi=100)
