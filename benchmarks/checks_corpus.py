"""Slot checks over real data: how many values of the corpus's valid instances they flag.

Reads the JSONSchemaBench corpus (``../shared/schemabench/data``, as
:mod:`benchmarks.schemas`; absent: a message and a clean exit). For every schema that
compiles and every valid instance that renders, in the default syntax, through the
public API only:

- **flagged**: the instance's frames are fed to an :class:`slotflight.Assembler` with
  every built-in check on and no input text (so no schema word counts as an answer:
  the strictest setting); each ``slot-rejected`` event, and each value kept with a
  flag (an item of a list repeating another field), is one flagged value, counted per
  check code, against the values the instance has (slot-complete events of the same
  run with checks off).
- **kept**: a flagged instance whose pass failed is answered again with the same text
  (a model writing the same values again); it is *kept* when the object then ends
  valid and equal to the instance. Values dropped from a list (a list item repeating
  an earlier one) are not asked for again, so such an instance is not kept.

Writes ``benchmarks/results/checks-corpus.json`` and prints a summary. Run with
``python -m benchmarks.checks_corpus``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any, Final

import slotflight
from benchmarks.corpora import SCHEMABENCH, CorpusUnavailable, schemabench
from benchmarks.schemas import RESULTS, canonical

#: Instances read per schema at most.
MAX_INSTANCES: Final = 20


def _feed(plan: slotflight.SlotPlan, text: str, checks: bool) -> tuple[Any, list[Any]]:
    settings = slotflight.CheckSettings(max_attempts=2) if checks else None
    assembler = slotflight.Assembler(plan, checks=settings)
    events = assembler.feed(text) + assembler.close()
    return assembler, events


def measure(folder: Path) -> dict[str, Any]:
    values = flagged_values = instances = flagged_instances = kept = 0
    codes: Counter[str] = Counter()
    subsets: Counter[str] = Counter()
    for case in schemabench(folder).cases:
        try:
            plan = slotflight.compile(case.schema)
        except Exception:
            continue
        for instance in case.valid[:MAX_INSTANCES]:
            try:
                text = slotflight.render_frames(plan, instance)
                plain, plain_events = _feed(plan, text, False)
            except Exception:
                continue
            if not plain.outcome.ok:
                continue
            instances += 1
            values += sum(e.type == "slot-complete" for e in plain_events)
            checked, events = _feed(plan, text, True)
            flagged = [e.code for e in events if isinstance(e, slotflight.SlotRejected)]
            flagged += [
                e.flag.code
                for e in events
                if isinstance(e, slotflight.SlotComplete) and e.flag is not None
            ]
            if not flagged:
                continue
            flagged_instances += 1
            flagged_values += len(flagged)
            codes.update(flagged)
            subsets[case.subset] += len(flagged)
            if not checked.outcome.ok and checked.outcome.retryable:
                checked.begin_retry()
                checked.feed(text)
                checked.close()
            ok = checked.outcome.ok
            if ok and canonical(checked.state) == canonical(plain.state):
                kept += 1
    return {
        "instances": instances,
        "values": values,
        "flagged_values": flagged_values,
        "flagged_share": flagged_values / values if values else None,
        "flagged_instances": flagged_instances,
        "kept_instances": kept,
        "by_code": dict(codes.most_common()),
        "by_subset": dict(subsets.most_common()),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=SCHEMABENCH)
    parser.add_argument("--out", type=Path, default=RESULTS / "checks-corpus.json")
    args = parser.parse_args(argv)
    try:
        results = measure(args.data)
    except CorpusUnavailable as exc:
        print(f"{exc}: nothing to measure", file=sys.stderr)
        return 0
    args.out.write_text(json.dumps(results, indent=2) + "\n", "utf-8")
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
