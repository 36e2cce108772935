"""Real-world schemas: compile coverage, round trips, rejection, compile time and sizes.

Reads the JSONSchemaBench corpus from ``../shared/schemabench/data`` (relative to the
repository root; ``--data`` for another folder). Each file holds a schema and test
instances marked valid or invalid. The corpus is not part of the project: when the folder
is absent the run prints a message and exits cleanly.

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

Writes ``benchmarks/results/schemas.json`` (figures per subset and in total) and
``benchmarks/results/schemas.md`` (a short summary); ``--failures PATH`` writes one JSON
line per failure for inspection. Run with ``python -m benchmarks.schemas``.
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
import referencing
import referencing.exceptions
from referencing.jsonschema import specification_with

import slotflight
from slotflight.syntax import SYNTAXES

ROOT: Final = Path(__file__).resolve().parent.parent
DATA: Final = ROOT.parent / "shared" / "schemabench" / "data"
RESULTS: Final = Path(__file__).parent / "results"
SEED: Final = 13
CHUNK_MIN, CHUNK_MAX = 1, 17
#: Compile time is the best of this many runs.
COMPILE_RUNS: Final = 3
#: A schema whose work takes longer than this is counted as a timeout (a defect).
SCHEMA_TIMEOUT_S: Final = 60


# -- the corpus -----------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    name: str
    subset: str
    schema: Any
    valid: tuple[Any, ...]
    invalid: tuple[Any, ...]


def subset_of(name: str) -> str:
    """``Kubernetes---kb_1_Normalized`` → ``Kubernetes``; ``BFCL_simple_3`` → ``BFCL``."""
    match = re.match(r"[A-Za-z]+", name)
    return match.group(0) if match else name


def load(folder: Path, only: str | None = None, limit: int | None = None) -> list[Case]:
    cases: list[Case] = []
    for path in sorted(folder.glob("*.json")):
        name = path.stem
        if only is not None and subset_of(name) != only and only not in name:
            continue
        data = json.loads(path.read_text("utf-8"))
        tests = data.get("tests", [])
        cases.append(
            Case(
                name,
                subset_of(name),
                data["schema"],
                tuple(t["data"] for t in tests if t["valid"]),
                tuple(t["data"] for t in tests if not t["valid"]),
            )
        )
        if limit is not None and len(cases) >= limit:
            break
    return cases


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
            "refusals": dict(self.refusals.most_common(15)),
            "builds_refused": dict(sorted(self.builds_refused.items())),
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


def _ratio(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


# -- one schema -------------------------------------------------------------------------


class Runner:
    def __init__(
        self, seed: int, failures: list[dict[str, Any]], syntaxes: tuple[str, ...] = tuple(SYNTAXES)
    ) -> None:
        self.seed = seed
        self.failures = failures
        self.syntaxes = syntaxes

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
        for syntax in self.syntaxes:
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
                if outcome == "exact":
                    continue
                self.fail(case, f"valid_{outcome}", syntax=syntax, instance=number)
            for number, instance in enumerate(case.invalid):
                outcome = self.round_trip(case, plan, instance, syntax, number, False, tally)
                tally.invalid["total"] += 1
                tally.invalid[outcome] += 1
                if outcome.startswith("rejected"):
                    tally.invalid["rejected_total"] += 1
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


# -- report ----------------------------------------------------------------------------


def markdown(results: Mapping[str, Any]) -> str:
    total = results["total"]
    lines = [
        "# Real-world schemas",
        "",
        f"`python -m benchmarks.schemas` on {total['schemas']} schemas of JSONSchemaBench "
        f"({', '.join(results['syntaxes'])}; seed {results['seed']}; "
        f"{results['network_attempts']} network attempts).",
        "",
        "| subset | schemas | compiled | exceptions | compile p50 / p99 ms "
        "| valid exact | invalid rejected | max slots | max prompt | max grammar |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    rows = [*results["subsets"].items(), ("**total**", total)]
    for name, row in rows:
        prompt_max = max((v["max"] for v in row["prompt_chars"].values()), default=0)
        grammar_max = max((v["max"] for v in row["grammar_chars"].values()), default=0)
        lines.append(
            f"| {name} | {row['schemas']} | {_pct(row['compile_coverage'])} "
            f"| {row['exceptions'] + row['timeouts']} "
            f"| {row['compile_ms_p50']:.1f} / {row['compile_ms_p99']:.1f} "
            f"| {row['valid_exact']}/{row['valid_round_trips']} "
            f"({_pct(row['valid_exact_rate'])}) "
            f"| {row['invalid_rejected']}/{row['invalid_instances']} "
            f"({_pct(row['invalid_rejected_rate'])}) "
            f"| {row['slots_max']} | {prompt_max} | {grammar_max} |"
        )
    lines += [
        "",
        "Round trips and rejections count each instance once per syntax. Refusals "
        "(SchemaError) by category:",
        "",
    ]
    lines += [f"- {count} × {category}" for category, count in total["refusals"].items()]
    lines += [
        "",
        "Compiled plans whose prompt or grammar was refused by its bound (`max_prompt_chars`, "
        "`max_grammar_chars`): "
        + (", ".join(f"{k}: {v}" for k, v in total["builds_refused"].items()) or "none")
        + ".",
    ]
    return "\n".join(lines) + "\n"


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value * 100:.1f} %"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--data", type=Path, default=DATA, help="corpus folder")
    parser.add_argument("--subset", help="only this subset (or names containing this text)")
    parser.add_argument("--limit", type=int, help="at most this many schemas")
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--out", type=Path, default=RESULTS, help="results folder")
    parser.add_argument("--failures", type=Path, help="write one JSON line per failure here")
    parser.add_argument(
        "--syntax", help="only these registered syntaxes, comma-separated (default: every one)"
    )
    args = parser.parse_args(argv)
    if not args.data.is_dir():
        print(f"schemabench corpus not found at {args.data}: nothing to measure (skipped)")
        return 0
    cases = load(args.data, args.subset, args.limit)
    failures: list[dict[str, Any]] = []
    syntaxes = tuple(SYNTAXES) if not args.syntax else tuple(args.syntax.split(","))
    unknown = [name for name in syntaxes if name not in SYNTAXES]
    if unknown:
        parser.error(f"unknown syntax {', '.join(unknown)} (known: {', '.join(SYNTAXES)})")
    runner = Runner(args.seed, failures, syntaxes)
    tallies: dict[str, Tally] = defaultdict(Tally)
    started = time.perf_counter()
    previous = signal.signal(signal.SIGALRM, _alarm)
    try:
        with network_forbidden() as network:
            for number, case in enumerate(cases, start=1):
                runner.run(case, tallies[case.subset])
                if number % 250 == 0:
                    print(f"{number}/{len(cases)} schemas, {time.perf_counter() - started:.0f} s")
    finally:
        signal.signal(signal.SIGALRM, previous)
    total = Tally()
    for tally in tallies.values():
        total.merge(tally)
    results = {
        "corpus": "JSONSchemaBench (../shared/schemabench/data)",
        "syntaxes": list(syntaxes),
        "seed": args.seed,
        "seconds": round(time.perf_counter() - started, 1),
        "network_attempts": len(network),
        "total": total.summary(),
        "subsets": {name: tallies[name].summary() for name in sorted(tallies)},
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "schemas.json").write_text(json.dumps(results, indent=2) + "\n", "utf-8")
    summary = markdown(results)
    (args.out / "schemas.md").write_text(summary, "utf-8")
    if args.failures is not None:
        with args.failures.open("w", encoding="utf-8") as handle:
            for row in failures:
                handle.write(json.dumps(row, ensure_ascii=False, default=str) + "\n")
    print(summary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
