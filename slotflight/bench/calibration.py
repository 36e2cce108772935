"""Does low confidence predict wrong values? Thresholds on recorded runs, against gold.

A slots-mode run recorded with confidence (``slotflight bench --confidence``) keeps,
for every accepted value, the log probabilities of the tokens that wrote it
(``value_logprobs``, by JSON Pointer) next to the gold scores of its fields
(``accuracy.fields``, by display path such as ``action_items[].owner``). Here each
scored field of a valid final object gets one confidence (the lowest of its values':
a list is as doubtful as its most doubtful item), and a field is *wrong* when its
score is below :data:`WRONG_BELOW`. For each threshold, the fields whose confidence is
below it are the ones an application would send to a person; the table says which
share of the wrong fields they catch (recall), which share of them is wrong
(precision), and which share of the right fields they bother a person with.

Fields without a figure (left out or null, so no token wrote them; or a server that
returned no logprobs) are counted apart and never flagged. Objects that did not
validate are left out: their fields score 0 whatever was written.

::

    python -m slotflight.bench.calibration benchmarks/results/NAME.jsonl
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from .report import read_log

__all__ = [
    "AGGREGATES",
    "THRESHOLDS",
    "WRONG_BELOW",
    "FieldConfidence",
    "ThresholdRow",
    "display_path",
    "field_confidences",
    "main",
    "render",
    "threshold_rows",
]

#: A field whose gold score is below this is wrong.
WRONG_BELOW: Final = 0.5
#: Thresholds the table is computed for.
THRESHOLDS: Final = (0.01, 0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.7, 0.9)

#: Ways to turn a value's token log probabilities into one figure: the one the SDK
#: reports (``joint``: the product of its tokens' probabilities) and the alternatives
#: it was chosen over.
AGGREGATES: Final[Mapping[str, Callable[[Sequence[float]], float]]] = {
    "joint": lambda lp: math.exp(sum(lp)),
    "min": lambda lp: math.exp(min(lp)),
    "geomean": lambda lp: math.exp(sum(lp) / len(lp)),
    "first": lambda lp: math.exp(lp[0]),
}

_INDEX = re.compile(r"^\d+$")


def display_path(pointer: str) -> str:
    """The benchmark's display path of a value's JSON Pointer: ``/a/2/b`` →
    ``a[].b``, ``/tags/0`` → ``tags[]``."""
    out = ""
    for raw in pointer.split("/")[1:]:
        part = raw.replace("~1", "/").replace("~0", "~")
        if _INDEX.match(part):
            out += "[]"
        else:
            out += f".{part}" if out else part
    return out


@dataclass(frozen=True)
class FieldConfidence:
    """One scored field of one run: its path, gold score and confidence (``None``: no
    token wrote it)."""

    run: str
    path: str
    score: float
    confidence: float | None

    @property
    def wrong(self) -> bool:
        return self.score < WRONG_BELOW


def field_confidences(
    run: Mapping[str, Any], aggregate: str = "joint"
) -> list[FieldConfidence] | None:
    """The scored fields of one recorded run with their confidence; ``None`` for a run
    that has no gold, no valid object, or was recorded without confidence."""
    accuracy = run.get("accuracy")
    logprobs = run.get("value_logprobs")
    if not run.get("final_valid") or not isinstance(accuracy, Mapping):
        return None
    if not isinstance(logprobs, Mapping):
        return None
    figure = AGGREGATES[aggregate]
    by_path: dict[str, float] = {}
    for pointer, values in logprobs.items():
        if not values:
            continue
        path = display_path(pointer)
        value = figure(values)
        by_path[path] = min(value, by_path.get(path, 1.0))
    label = f"{run.get('task')}#{run.get('seed')}"
    return [
        FieldConfidence(label, f["path"], float(f["score"]), by_path.get(f["path"]))
        for f in accuracy.get("fields", ())
    ]


@dataclass(frozen=True)
class ThresholdRow:
    """What flagging every field with confidence below ``threshold`` catches."""

    threshold: float
    flagged: int
    wrong_flagged: int
    wrong: int
    right_flagged: int
    right: int

    @property
    def recall(self) -> float:
        """Share of the wrong fields (with a figure) that are flagged."""
        return self.wrong_flagged / self.wrong if self.wrong else 0.0

    @property
    def precision(self) -> float:
        """Share of the flagged fields that are wrong."""
        return self.wrong_flagged / self.flagged if self.flagged else 0.0

    @property
    def right_share(self) -> float:
        """Share of the right fields (with a figure) that are flagged."""
        return self.right_flagged / self.right if self.right else 0.0


def threshold_rows(
    fields: Sequence[FieldConfidence], thresholds: Iterable[float] = THRESHOLDS
) -> list[ThresholdRow]:
    """One row per threshold, over the fields that have a confidence."""
    known = [f for f in fields if f.confidence is not None]
    wrong = sum(f.wrong for f in known)
    right = len(known) - wrong
    rows = []
    for threshold in thresholds:
        flagged = [f for f in known if f.confidence is not None and f.confidence < threshold]
        caught = sum(f.wrong for f in flagged)
        rows.append(
            ThresholdRow(threshold, len(flagged), caught, wrong, len(flagged) - caught, right)
        )
    return rows


def render(runs: Sequence[Mapping[str, Any]]) -> str:
    """The markdown report: counts, then one table per aggregate."""
    lines: list[str] = []
    for name in AGGREGATES:
        fields = [f for run in runs for f in field_confidences(run, name) or ()]
        if name == "joint":
            known = [f for f in fields if f.confidence is not None]
            used = sum(field_confidences(run) is not None for run in runs)
            lines += [
                f"{used} valid runs with confidence of {len(runs)}; {len(fields)} scored"
                f" fields, {len(known)} with a confidence ({sum(f.wrong for f in known)}"
                f" wrong), {len(fields) - len(known)} without"
                f" ({sum(f.wrong for f in fields if f.confidence is None)} wrong).",
                "",
            ]
        lines += [
            f"### {name}",
            "",
            "| threshold | flagged | recall (wrong flagged) | precision | right flagged |",
            "|---:|---:|---:|---:|---:|",
        ]
        for row in threshold_rows(fields):
            lines.append(
                f"| < {row.threshold:g} | {row.flagged} | {row.recall:.0%}"
                f" ({row.wrong_flagged}/{row.wrong}) | {row.precision:.0%}"
                f" | {row.right_share:.0%} ({row.right_flagged}/{row.right}) |"
            )
        lines.append("")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m slotflight.bench.calibration",
        description="precision and recall of confidence thresholds against gold scores",
    )
    parser.add_argument("results", type=Path, nargs="+", help="NAME.jsonl of slotflight bench")
    args = parser.parse_args(argv)
    runs = [
        run for path in args.results for run in read_log(path)["runs"] if run.get("mode") == "slots"
    ]
    sys.stdout.write(render(runs) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
