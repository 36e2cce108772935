"""Reporting a benchmark: the summary per variant, the terminal table, the JSON results
file and the PNG plot.

Everything here reads the results document (:meth:`slotflight.bench.runner.BenchResults.to_json`,
or the same object loaded back from a results file), so a report can be redrawn from a
file without running anything again.

Summary rules (per variant, e.g. ``slots v1`` or ``json_schema``):

- ``final_valid``: share of runs whose final object validates strictly.
- ``stream_valid`` / ``unsafe_partial``: mean of the per-run shares (runs without
  chunks left out).
- ``ttff_p50``: median over runs of the time to the first settled field.
- ``all_fields_p50``: median over the *final-valid* runs of the time by which every
  field was settled (an invalid run has no "all fields").
- ``field_p50`` / ``field_p95``: median over runs of each run's per-field p50 / p95.
- tokens: means over runs whose every request reported usage; ``retry_tokens`` are the
  completion tokens of follow-up requests.
- ``errors``: runs that ended with an error (slots mode: the SDK's error, including
  ``output_invalid`` after the last attempt; JSON modes: a transport error).
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final

from matplotlib.figure import Figure
from rich.table import Table

from .metrics import percentile

__all__ = [
    "VariantSummary",
    "load_results",
    "summarize",
    "summary_markdown",
    "summary_table",
    "write_plot",
    "write_results",
]

_COLORS: Final = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b")


@dataclass(frozen=True)
class VariantSummary:
    """The aggregate of one variant's runs (see the module docs for each rule)."""

    variant: str
    runs: int
    errors: int
    final_valid: float
    stream_valid: float | None
    unsafe_partial: float | None
    ttff_p50: float | None
    all_fields_p50: float | None
    field_p50: float | None
    field_p95: float | None
    completion_tokens: float | None
    prompt_tokens: float | None
    retry_tokens: float | None
    requests: float
    sse_full_bytes: float | None
    sse_patch_bytes: float | None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _mean(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.fmean(present) if present else None


def _median(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return percentile(present, 50) if present else None


def _summarize_one(variant: str, runs: Sequence[Mapping[str, Any]]) -> VariantSummary:
    valid = [r for r in runs if r["final_valid"]]
    reported = [r for r in runs if r["tokens"]["reported"]]
    sse = [r["sse_bytes"] for r in runs if r.get("sse_bytes")]

    def tokens(key: str) -> float | None:
        return _mean(r["tokens"][key] for r in reported)

    return VariantSummary(
        variant=variant,
        runs=len(runs),
        errors=sum(1 for r in runs if r.get("error")),
        final_valid=len(valid) / len(runs),
        stream_valid=_mean(r["stream_valid"]["share"] for r in runs),
        unsafe_partial=_mean(r["unsafe_partial"]["share"] for r in runs),
        ttff_p50=_median(r["fields"]["first"] for r in runs),
        all_fields_p50=_median(r["fields"]["all"] for r in valid),
        field_p50=_median(r["fields"]["p50"] for r in runs),
        field_p95=_median(r["fields"]["p95"] for r in runs),
        completion_tokens=tokens("completion"),
        prompt_tokens=tokens("prompt"),
        retry_tokens=tokens("retry_completion"),
        requests=statistics.fmean(r["requests"] for r in runs),
        sse_full_bytes=_mean(s["full"] for s in sse),
        sse_patch_bytes=_mean(s["patch"] for s in sse),
    )


def _by_variant(doc: Mapping[str, Any]) -> dict[str, list[Mapping[str, Any]]]:
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for run in doc["runs"]:
        groups.setdefault(run["variant"], []).append(run)
    return groups


def summarize(doc: Mapping[str, Any]) -> list[VariantSummary]:
    """One summary per variant, in the order the variants first ran."""
    return [_summarize_one(name, runs) for name, runs in _by_variant(doc).items()]


# --------------------------------------------------------------------------- table


def _fmt(value: float | None, spec: str, suffix: str = "") -> str:
    return "–" if value is None else f"{value:{spec}}{suffix}"


_ROWS: Final[tuple[tuple[str, Callable[[VariantSummary], str]], ...]] = (
    ("runs", lambda s: f"{s.runs}"),
    ("final valid", lambda s: _fmt(s.final_valid, ".0%")),
    ("stream valid", lambda s: _fmt(s.stream_valid, ".1%")),
    ("unsafe partial", lambda s: _fmt(s.unsafe_partial, ".1%")),
    ("first field p50", lambda s: _fmt(s.ttff_p50, ".2f", " s")),
    ("all fields p50", lambda s: _fmt(s.all_fields_p50, ".2f", " s")),
    ("field p50 / p95", lambda s: _pair(s.field_p50, s.field_p95, ".2f", " s")),
    ("completion tokens", lambda s: _fmt(s.completion_tokens, ".0f")),
    ("prompt tokens", lambda s: _fmt(s.prompt_tokens, ".0f")),
    ("requests", lambda s: _fmt(s.requests, ".2f")),
    ("retry tokens", lambda s: _fmt(s.retry_tokens, ".0f")),
    (
        "SSE bytes full / patch",
        lambda s: _pair(s.sse_full_bytes, s.sse_patch_bytes, ".0f"),
    ),
)


def _pair(a: float | None, b: float | None, spec: str, suffix: str = "") -> str:
    if a is None and b is None:
        return "–"
    return f"{_fmt(a, spec)} / {_fmt(b, spec)}{suffix}"


def summary_table(summaries: Sequence[VariantSummary], *, title: str | None = None) -> Table:
    """The summary as a rich table: one row per metric, one column per variant."""
    table = Table(title=title)
    table.add_column("metric", style="bold")
    for summary in summaries:
        table.add_column(summary.variant, justify="right")
    for name, cell in _ROWS:
        table.add_row(name, *(cell(summary) for summary in summaries))
    return table


def summary_markdown(summaries: Sequence[VariantSummary]) -> str:
    """The same table as GitHub Markdown."""
    header = ["metric", *(s.variant for s in summaries)]
    lines = ["| " + " | ".join(header) + " |", "| --- |" + " ---: |" * len(summaries)]
    for name, cell in _ROWS:
        lines.append("| " + " | ".join([name, *(cell(s) for s in summaries)]) + " |")
    return "\n".join(lines)


# --------------------------------------------------------------------------- files


def write_results(doc: Mapping[str, Any], path: Path) -> None:
    """Write the results document, with its summary added, as JSON."""
    out = dict(doc)
    out["summary"] = [s.to_json() for s in summarize(doc)]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


def load_results(path: Path) -> dict[str, Any]:
    """A results document written by :func:`write_results`."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(doc, dict) or "runs" not in doc:
        raise ValueError(f"{path} is not a benchmark results file")
    return doc


def _timeline(ax: Any, groups: Mapping[str, Sequence[Mapping[str, Any]]]) -> None:
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
                alpha=0.6,
                linewidth=1.2,
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


def _shares(ax: Any, summaries: Sequence[VariantSummary]) -> None:
    metrics: tuple[tuple[str, Callable[[VariantSummary], float | None]], ...] = (
        ("stream valid", lambda s: s.stream_valid),
        ("final valid", lambda s: s.final_valid),
        ("unsafe partial", lambda s: s.unsafe_partial),
    )
    width = 0.8 / max(len(summaries), 1)
    for offset, (color, summary) in enumerate(zip(_COLORS * 4, summaries, strict=False)):
        xs = [i + offset * width for i in range(len(metrics))]
        values = [get(summary) or 0.0 for _, get in metrics]
        bars = ax.bar(xs, values, width=width, color=color, label=summary.variant)
        ax.bar_label(bars, labels=[f"{v:.0%}" for v in values], fontsize=7)
    ax.set_xticks([i + width * (len(summaries) - 1) / 2 for i in range(len(metrics))])
    ax.set_xticklabels([name for name, _ in metrics])
    ax.set_ylim(0, 1.1)
    ax.set_ylabel("share (mean over runs; final valid: share of runs)")
    ax.set_title("Valid JSON after each chunk, and unsafe partial views")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(loc="upper right")


def write_plot(doc: Mapping[str, Any], path: Path) -> None:
    """A PNG with the field-completion timelines per variant and the share metrics."""
    figure = Figure(figsize=(13, 5), layout="constrained")
    left, right = figure.subplots(1, 2)
    _timeline(left, _by_variant(doc))
    _shares(right, summarize(doc))
    model = doc.get("environment", {}).get("model", "")
    figure.suptitle(f"slotflight bench: slots vs native JSON modes ({model})")
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, format="png", dpi=110)
