"""Running the benchmark: every task in every mode on the same server, recorded per chunk.

Three modes answer the same task (same user message, ``max_tokens``, ``temperature``
and ``seed``):

- ``slots``: the slotflight stream, once per frame syntax asked for (the default one
  unless told),
  optionally with the plan's GBNF grammar. It is driven through the SDK's own stream
  flow (:func:`~slotflight.client.flow.pass_flow`, driven by :func:`_drive`), so that
  each received chunk is visible: after each content
  chunk the state is snapshotted, and each ``slot-complete`` is timed.
- ``json_schema``: a plain ``openai`` client with ``response_format`` ``json_schema``
  (``strict``), the text accumulated chunk by chunk.
- ``json_prompt``: the JSON Schema written into a system message, no
  ``response_format``. An object in a Markdown code fence is read without the fence,
  as an application would (:mod:`slotflight.bench.fences`). A run stops reading as
  soon as its text cannot be a JSON object (its first non-blank character, or the
  first one inside a fence, is not ``{``): such an answer scores 0 however it goes on,
  and small models go on with prose to the token limit. A stopped run reports no token
  usage (the server sends usage only at the end of a stream).

The user message is the task's instructions, a blank line and its input; what a mode
adds (the slot prompt, the JSON Schema) goes into a system message before it, so the
part that depends only on the schema comes first and a server can reuse it.

Runs go repetition by repetition, schema by schema, and within a schema variant by
variant over its tasks (:func:`plan_runs`): the first run of each such group is *cold*
and sends llama.cpp's ``cache_prompt: false`` (servers that do not know the field
ignore it), the later ones are *warm* and send ``cache_prompt: true``, so a server
with a prefix cache can reuse the prompt of the previous request.

Each run becomes a :class:`RunRecord` holding its raw chunks, its stream metrics from
:mod:`slotflight.bench.metrics`, and its answer judged by :mod:`slotflight.bench.accuracy`
against the task's gold object. :func:`run_benchmark` runs a list of runs;
:func:`open_target` provides the server (the embedded local one by default).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import datetime as dt
import functools
import importlib.metadata
import itertools
import json
import os
import platform
import time
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final, Literal, Protocol
from urllib.parse import urlsplit

import jsonpointer
import openai

from ..assemble.assembler import Assembler
from ..assemble.checks import OnCheckFailure, validate_on_check_failure
from ..assemble.events import Event, SlotComplete, SlotFailed, SlotRejected
from ..client import upstream_body
from ..client.core import StreamCore, chunk_text, new_core
from ..client.flow import END, Emit, Feed, Read, Request, Wait, pass_flow
from ..client.request import StreamOptions
from ..client.upstream_body import WAITING
from ..client.upstream_errors import UPSTREAM_ERRORS
from ..client.usage import TokenUsage
from ..plan.compiler import compile as compile_plan
from ..plan.model import SlotPlan
from ..prompting.prompt import EXAMPLE_BEGIN, extract_example
from ..syntax import DEFAULT_SYNTAX
from ..syntax import SYNTAXES as REGISTERED_SYNTAXES
from ..web._encode import StateMode, encode_events
from .accuracy import Degenerate, FieldScore, detect_degenerate, schema_examples, score_object
from .defaults import (
    DEFAULT_MAX_TOKENS,
    DEFAULT_RUNS,
    DEFAULT_SEED,
    DEFAULT_TEMPERATURE,
    MODES,
    RESULTS_FORMAT,
    Mode,
)
from .fences import not_json_object, unfenced
from .metrics import Chunk, JsonRun, RunMetrics, SlotRun, measure, partial_view
from .models import SCHEMAS, TASKS_DIR, Task, load_tasks
from .split_models import KNOWN_MODELS, assembled_model, known_model

__all__ = [
    "MODES",
    "RESULTS_FORMAT",
    "BenchConfig",
    "Mode",
    "Observer",
    "RunRecord",
    "RunSpec",
    "Target",
    "Variant",
    "environment",
    "first_request_messages",
    "header",
    "json_leaves",
    "known_syntaxes",
    "load_average",
    "open_target",
    "plan_runs",
    "prompt_examples",
    "read_tasks",
    "rescore",
    "run_benchmark",
    "run_one",
    "select_tasks",
    "slot_identifiers",
    "task_degenerate",
    "task_scores",
    "variants",
]

_STATE_MODES: Final[tuple[StateMode, ...]] = ("full", "patch")
_PACKAGES: Final = ("slotflight", "openai", "llama_cpp_python", "pydantic", "jiter", "matplotlib")

_JSON_PROMPT: Final = (
    "Answer with one JSON object and nothing else: no prose, no code fence. "
    "It must validate against this JSON Schema:\n{schema}"
)


# --------------------------------------------------------------------------- configuration


#: The frame syntaxes slots mode can run: every registered one.
SYNTAXES: Final = tuple(sorted(REGISTERED_SYNTAXES))


def known_syntaxes() -> tuple[str, ...]:
    """The registered frame syntaxes, in name order."""
    return SYNTAXES


@dataclass(frozen=True)
class BenchConfig:
    """What to run. ``grammar=None`` means: on for the embedded server, off for others;
    ``grammar_max_string_chars`` is the SDK's compact grammar for small models (string
    values on one line of at most that many characters).

    ``limit`` keeps the first ``limit`` tasks after interleaving the schemas (see
    :func:`select_tasks`), so ``limit=5`` gives one task of each of the five schemas.
    ``syntaxes=None`` runs one syntax: the one a model of the embedded server is known
    to answer best in (:attr:`.split_models.SplitModel.syntax`), else the SDK's default
    (a full comparison names them, e.g. ``syntaxes=known_syntaxes()``);
    ``temperature=None`` leaves the
    server's default; ``cache_prompt`` sends llama.cpp's ``cache_prompt`` field (false
    on cold runs, true on warm ones). ``max_body_bytes``: the most bytes a JSON answer,
    or one event of a stream, is read to (``None``: the SDK's bound,
    :func:`~slotflight.client.upstream_body.body_limit`); past it the run ends with a
    :class:`~slotflight.TransportError` as its ``error``.
    """

    tasks: Path = TASKS_DIR
    runs: int = DEFAULT_RUNS
    seed: int | None = DEFAULT_SEED
    modes: tuple[Mode, ...] = MODES
    syntaxes: tuple[str, ...] | None = None
    grammar: bool | None = None
    grammar_max_string_chars: int | None = None
    limit: int | None = None
    schemas: tuple[str, ...] | None = None
    max_tokens: int = DEFAULT_MAX_TOKENS
    max_attempts: int = 3
    checks: tuple[str, ...] = ("all",)
    on_check_failure: OnCheckFailure = "accept"
    temperature: float | None = DEFAULT_TEMPERATURE
    frequency_penalty: float | None = None
    presence_penalty: float | None = None
    cache_prompt: bool = True
    confidence: bool = False
    calibrate: bool = True
    base_url: str | None = None
    model: str | None = None
    api_key: str | None = None
    request_timeout: float = 900.0
    max_body_bytes: int | None = None

    def default_syntax(self) -> str:
        """The syntax slots mode runs when none is named: the embedded model's own
        (:attr:`.split_models.SplitModel.syntax`), else the SDK's default."""
        known = KNOWN_MODELS.get(self.model or "") if self.base_url is None else None
        return (known.syntax if known else None) or DEFAULT_SYNTAX

    def __post_init__(self) -> None:
        if self.runs < 1:
            raise ValueError(f"runs must be >= 1, got {self.runs}")
        if self.limit is not None and self.limit < 1:
            raise ValueError(f"limit must be >= 1, got {self.limit}")
        if self.max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {self.max_tokens}")
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1, got {self.max_attempts}")
        if not self.checks or any(c not in ("all", "none") for c in self.checks):
            raise ValueError(f"checks must be some of all, none; got {self.checks!r}")
        if len(set(self.checks)) != len(self.checks):
            raise ValueError("a checks setting is listed twice")
        validate_on_check_failure(self.on_check_failure)
        if not self.modes:
            raise ValueError("at least one mode is needed")
        unknown = [m for m in self.modes if m not in MODES]
        if unknown:
            raise ValueError(f"unknown modes {unknown}; choose from {', '.join(MODES)}")
        if len(set(self.modes)) != len(self.modes):
            raise ValueError("a mode is listed twice")
        known = known_syntaxes()
        if self.syntaxes is None:
            object.__setattr__(self, "syntaxes", (self.default_syntax(),))
        syntaxes = self.syntaxes or ()
        if not syntaxes or any(s not in known for s in syntaxes):
            raise ValueError(f"syntaxes must be some of {', '.join(known)}")
        if len(set(syntaxes)) != len(syntaxes):
            raise ValueError("a syntax is listed twice")
        if self.schemas is not None:
            strangers = [s for s in self.schemas if s not in SCHEMAS]
            if strangers:
                raise ValueError(f"unknown schemas {strangers}; choose from {', '.join(SCHEMAS)}")
        if self.base_url is None and self.model is not None and self.model not in KNOWN_MODELS:
            raise ValueError(
                f"--model {self.model!r}: without --base-url it must be one of the models "
                f"the embedded server knows ({', '.join(KNOWN_MODELS)})"
            )
        if self.grammar_max_string_chars is not None and self.grammar_max_string_chars < 1:
            raise ValueError("grammar_max_string_chars must be >= 1")
        if not self.request_timeout > 0:
            raise ValueError("request_timeout must be positive")
        if self.max_body_bytes is not None and self.max_body_bytes < 1:
            raise ValueError(f"max_body_bytes must be >= 1, got {self.max_body_bytes}")

    def to_json(self) -> dict[str, Any]:
        return {
            "tasks": str(self.tasks),
            "runs": self.runs,
            "seed": self.seed,
            "modes": list(self.modes),
            "syntaxes": list(self.syntaxes or ()),
            "grammar": self.grammar,
            "grammar_max_string_chars": self.grammar_max_string_chars,
            "limit": self.limit,
            "schemas": None if self.schemas is None else list(self.schemas),
            "max_tokens": self.max_tokens,
            "max_attempts": self.max_attempts,
            "checks": list(self.checks),
            "temperature": self.temperature,
            "frequency_penalty": self.frequency_penalty,
            "presence_penalty": self.presence_penalty,
            "cache_prompt": self.cache_prompt,
            # only when on: logs made before the option resume as they were
            **({"confidence": True} if self.confidence else {}),
            "calibrate": self.calibrate,
            **({"on_check_failure": "accept"} if self.on_check_failure == "accept" else {}),
        }


@dataclass(frozen=True)
class Variant:
    """One column of the comparison: a mode, and for slots mode the frame syntax and
    whether the slot checks run (off: labelled ``slots v3 no-checks``)."""

    mode: Mode
    syntax: str | None = None
    checks: bool = True

    @property
    def label(self) -> str:
        label = self.mode if self.syntax is None else f"{self.mode} {self.syntax}"
        return label if self.checks else f"{label} no-checks"


def variants(config: BenchConfig) -> list[Variant]:
    """The variants of ``config``: slots mode once per syntax and checks setting, the
    others once."""
    out: list[Variant] = []
    for mode in config.modes:
        if mode == "slots":
            out.extend(
                Variant(mode, syntax, checks == "all")
                for syntax in config.syntaxes or ()
                for checks in config.checks
            )
        else:
            out.append(Variant(mode))
    return out


@dataclass(frozen=True)
class Target:
    """The server every run talks to. ``kind``: ``embedded`` (started here) or ``remote``."""

    base_url: str
    model: str
    kind: Literal["embedded", "remote"]
    api_key: str = "local"
    weights: str | None = None
    """The embedded server's weights file (the model file or a converted copy)."""
    lone_space_penalty: float | None = None
    """The embedded server's penalty on a lone space after a colon (0: off)."""
    bracket_penalty: float | None = None
    """The embedded server's penalty on an opening bracket after a colon (0: off)."""
    repeated_item_penalty: float | None = None
    """The embedded server's penalty on a dash starting a line after a repeated list
    item (0: off)."""

    @property
    def grammar_default(self) -> bool:
        """Only the embedded server is known to accept a GBNF ``grammar`` field."""
        return self.kind == "embedded"


@dataclass(frozen=True)
class RunSpec:
    """One run to make: a task in a variant, in repetition ``repeat`` with ``seed``."""

    task: Task
    variant: Variant
    repeat: int
    seed: int | None

    @property
    def label(self) -> str:
        return f"{self.task.id} · {self.variant.label} · run {self.repeat + 1}"

    @property
    def key(self) -> tuple[str, str, int]:
        """What identifies the run in a results file: task, variant, repetition."""
        return (self.task.id, self.variant.label, self.repeat)

    @property
    def group(self) -> tuple[int, str, str]:
        """Runs sharing a prompt prefix: repetition, schema, variant."""
        return (self.repeat, self.task.schema, self.variant.label)


# --------------------------------------------------------------------------- tasks


def read_tasks(source: Path | str, schemas: Sequence[str] | None = None) -> list[Task]:
    """The tasks of a ``*.jsonl`` file, or of every such file in a directory."""
    return load_tasks(source, schemas)


def select_tasks(tasks: Sequence[Task], limit: int | None) -> list[Task]:
    """Interleave the schemas (first task of each schema, then the second …) and keep
    the first ``limit`` (all without a limit). Schemas keep their first-seen order."""
    by_schema: dict[str, list[Task]] = {}
    for task in tasks:
        by_schema.setdefault(task.schema, []).append(task)
    mixed = [
        task
        for group in itertools.zip_longest(*by_schema.values())
        for task in group
        if task is not None
    ]
    return mixed if limit is None else mixed[:limit]


def plan_runs(config: BenchConfig, tasks: Sequence[Task]) -> list[RunSpec]:
    """Every run, repetition by repetition; within one, schema by schema (in the order
    they first appear in ``tasks``), and within a schema variant by variant over its
    tasks, so that requests sharing a prompt prefix follow each other."""
    by_schema: dict[str, list[Task]] = {}
    for task in tasks:
        by_schema.setdefault(task.schema, []).append(task)
    specs: list[RunSpec] = []
    for repeat in range(config.runs):
        seed = None if config.seed is None else config.seed + repeat
        for group in by_schema.values():
            for variant in variants(config):
                specs.extend(RunSpec(task, variant, repeat, seed) for task in group)
    return specs


# --------------------------------------------------------------------------- records


@dataclass(frozen=True)
class RunRecord:
    """Everything measured in one run.

    ``usage`` has one entry per request made (``None`` when that request reported no
    usage); the first is the initial request, the others are regenerations.
    ``sse_bytes`` (slots mode) is the size of the run's events as the web gateway sends
    them, per state mode. ``error`` says why a run ended without a valid object, when
    the transport or the protocol failed. ``final`` is the object the client ends with:
    slots mode, the validated result or else the last state; JSON modes, the parsed
    text or else the OpenAI SDK's partial view of it. ``cold``: the first run of its group
    (:attr:`RunSpec.group`) in this process, sent with ``cache_prompt: false``.
    ``examples``: the example values the model was shown (prompt example and schema).
    ``stopped``: a ``json_prompt`` run whose reading stopped once its text could no
    longer be a JSON object; ``fenced``: one whose object came in a Markdown code fence
    (read without it: :mod:`slotflight.bench.fences`). ``chunks`` and ``text`` are
    what was read as the answer: inside the fence when there was one.
    """

    spec: RunSpec
    metrics: RunMetrics
    chunks: tuple[Chunk, ...]
    usage: tuple[TokenUsage | None, ...]
    wall_s: float
    grammar: bool
    final: Any = None
    text: str = ""
    events: int = 0
    sse_bytes: Mapping[str, int] | None = None
    error: str | None = None
    cold: bool = False
    examples: tuple[Any, ...] = ()
    stopped: bool = False
    fenced: bool = False
    confidence: Mapping[str, float] | None = None
    value_logprobs: Mapping[str, tuple[float, ...]] | None = None
    #: JSON Pointers of the values kept though they failed their checks
    #: (``on_check_failure="accept"``).
    flagged: tuple[str, ...] = ()

    @property
    def scores(self) -> list[FieldScore] | None:
        """Every field scored against the gold (0 throughout unless the final object
        validated, flagged values never right); ``None`` for a task without gold."""
        return task_scores(
            self.spec.task, self.final, valid=self.metrics.final_valid, flagged=self.flagged
        )

    @property
    def degenerate(self) -> Degenerate | None:
        """The degenerate values of the final object, valid or not, flagged values left
        out (they are counted apart: a flagged value is not presented as an answer);
        ``None`` when the run produced no object."""
        return task_degenerate(self.spec.task, self.final, self.examples, self.flagged)

    @property
    def requests(self) -> int:
        return len(self.usage)

    @property
    def usage_reported(self) -> bool:
        return bool(self.usage) and all(u is not None for u in self.usage)

    def _sum(self, attr: str, start: int = 0) -> int:
        return sum(getattr(u, attr) for u in self.usage[start:] if u is not None)

    def to_json(self) -> dict[str, Any]:
        spec = self.spec
        scores = self.scores
        degenerate = self.degenerate
        return {
            **self.metrics.to_json(),
            "task": spec.task.id,
            "schema": spec.task.schema,
            "repeat": spec.repeat,
            "seed": spec.seed,
            "mode": spec.variant.mode,
            "syntax": spec.variant.syntax,
            "variant": spec.variant.label,
            "grammar": self.grammar,
            "error": self.error,
            "stopped": self.stopped,
            "fenced": self.fenced,
            "wall_s": self.wall_s,
            "cold": self.cold,
            "latency": {
                "first_field_s": self.metrics.fields.first,
                "object_s": self.wall_s if self.metrics.final_valid else None,
            },
            "accuracy": _accuracy_json(scores),
            "degenerate": None if degenerate is None else degenerate.to_json(),
            "examples": list(self.examples),
            "tokens": {
                "reported": self.usage_reported,
                "prompt": self._sum("prompt_tokens"),
                "completion": self._sum("completion_tokens"),
                "retry_prompt": self._sum("prompt_tokens", start=1),
                "retry_completion": self._sum("completion_tokens", start=1),
                "per_request": [None if u is None else u.to_json() for u in self.usage],
            },
            "requests": self.requests,
            "events": self.events,
            "sse_bytes": None if self.sse_bytes is None else dict(self.sse_bytes),
            "final": self.final,
            "flagged": list(self.flagged),
            "confidence": None if self.confidence is None else dict(self.confidence),
            "value_logprobs": None
            if self.value_logprobs is None
            else {p: list(lp) for p, lp in self.value_logprobs.items()},
            "text": self.text,
            "chunk_log": [[t, text] for t, text in self.chunks],
        }


def task_scores(
    task: Task, final: Any, *, valid: bool, flagged: Sequence[str] = ()
) -> list[FieldScore] | None:
    """Every field of ``final`` scored against the task's gold, 0 throughout unless
    ``valid``; the values at the JSON Pointers ``flagged`` (kept though they failed
    their checks) are never scored right: each is taken as no answer (an item of a list
    that matches no gold item), and a field it fills whole (a field outside lists, or a
    whole list) scores 0 even where the gold has no value either. ``None`` for a task
    without gold."""
    if task.gold is None:
        return None
    if not valid:
        return score_object(task.model.model_json_schema(), None, task.gold)
    if not flagged:
        return score_object(task.model.model_json_schema(), final, task.gold)
    scores = score_object(
        task.model.model_json_schema(), without_flagged(final, flagged), task.gold
    )
    whole: set[str] = set()
    for pointer in flagged:
        with contextlib.suppress(jsonpointer.JsonPointerException):
            field = ".".join(jsonpointer.JsonPointer(pointer).parts)
            whole.update((field, f"{field}[]"))
    return [replace(s, score=0.0) if s.path in whole else s for s in scores]


def without_flagged(final: Any, flagged: Sequence[str]) -> Any:
    """A copy of ``final`` with the values at ``flagged`` (JSON Pointers) set to
    ``None``: what the scoring counts as no answer. Pointers that do not resolve are
    passed over."""
    out = copy.deepcopy(final)
    for pointer in flagged:
        try:
            jsonpointer.set_pointer(out, pointer, None)
        except (jsonpointer.JsonPointerException, TypeError):
            continue
    return out


def task_degenerate(
    task: Task, final: Any, examples: Sequence[Any], flagged: Sequence[str] = ()
) -> Degenerate | None:
    """The degenerate values of ``final`` (valid or not), ``examples`` being what the
    model was shown, the input being the task's user message; the values at the JSON
    Pointers ``flagged`` are left out (counted apart: a flagged value is not presented
    as an answer). ``None`` when it is no object."""
    if not isinstance(final, Mapping):
        return None
    if flagged:
        final = without_flagged(final, flagged)
    return detect_degenerate(
        task.model.model_json_schema(),
        final,
        task.gold,
        identifiers=slot_identifiers(_plan(task.schema)),
        examples=examples,
        input_text=_user_text(task),
        model_name=task.model.__name__,
    )


def _accuracy_json(scores: Sequence[FieldScore] | None) -> dict[str, Any] | None:
    if scores is None:
        return None
    return {
        "mean": sum(s.score for s in scores) / len(scores) if scores else None,
        "fields": [{"path": s.path, "kind": s.kind, "score": s.score} for s in scores],
    }


def rescore(run: Mapping[str, Any], tasks: Mapping[str, Task]) -> dict[str, Any]:
    """A stored run (:meth:`RunRecord.to_json`) with its ``accuracy`` and ``degenerate``
    computed again from the object it holds, by this version's scoring and detectors
    against ``tasks`` (by id); nothing is run. Raises :class:`ValueError` when the run's
    task is not in ``tasks`` or is of another schema."""
    task = tasks.get(str(run.get("task")))
    if task is None or task.schema != run.get("schema"):
        raise ValueError(f"run of task {run.get('task')!r}: no such {run.get('schema')} task")
    final = run.get("final")
    examples = run.get("examples")
    flagged = [p for p in run.get("flagged") or () if isinstance(p, str)]
    degenerate = task_degenerate(
        task, final, examples if isinstance(examples, list) else [], flagged
    )
    return {
        **run,
        "accuracy": _accuracy_json(
            task_scores(task, final, valid=run.get("final_valid") is True, flagged=flagged)
        ),
        "degenerate": None if degenerate is None else degenerate.to_json(),
    }


def header(config: BenchConfig, target: Target) -> dict[str, Any]:
    """The head of a results document: format, start time, configuration, environment."""
    return {
        "format": RESULTS_FORMAT,
        "started_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "config": config.to_json(),
        "environment": environment(target),
    }


# --------------------------------------------------------------------------- server


def _first_listed_model(base_url: str, api_key: str) -> str:
    """The first model the server at ``base_url`` lists (``GET /models``), its answer
    read as JSON of the OpenAI shape. Raises :class:`ConnectionError` when the server
    does not answer and :class:`ValueError` when the answer names no model."""
    try:
        with openai.OpenAI(base_url=base_url, api_key=api_key) as client:
            listing: Any = client.get("/models", cast_to=object)
    except openai.APIError as exc:
        raise ConnectionError(
            f"{base_url} did not list its models ({_describe(exc)}); check that the server"
            " answers, or pass --model"
        ) from None
    data = listing.get("data") if isinstance(listing, Mapping) else None
    first = data[0] if isinstance(data, list) and data else None
    model = first.get("id") if isinstance(first, Mapping) else None
    if not isinstance(model, str) or not model:
        raise ValueError(f"{base_url} lists no model; pass --model")
    return model


@contextlib.contextmanager
def open_target(config: BenchConfig) -> Iterator[Target]:
    """The server to benchmark: ``config.base_url`` (model from ``config.model``, else
    the first one the server lists), or the embedded local server started for the run.

    Raises :class:`ImportError` when the embedded server's extra is not installed,
    :class:`ConnectionError` when a remote server does not answer the model listing and
    :class:`ValueError` when its listing names no model.
    """
    if config.base_url is not None:
        api_key = config.api_key or os.environ.get("OPENAI_API_KEY") or "none"
        model = config.model
        if model is None:
            model = _first_listed_model(config.base_url, api_key)
        yield Target(config.base_url, model, "remote", api_key)
        return
    from slotflight.local import start_local_server

    model_path = None
    if config.model is not None:  # a known model instead of the packaged one
        model_path = assembled_model(known_model(config.model))
    server = start_local_server(model_path, seed=config.seed)
    try:
        yield Target(
            server.base_url,
            server.model,
            "embedded",
            config.api_key or "local",
            weights=server.engine.weights_path.name,
            lone_space_penalty=server.engine.lone_space_penalty,
            bracket_penalty=server.engine.bracket_penalty,
            repeated_item_penalty=server.engine.repeated_item_penalty,
        )
    finally:
        server.close()


def _package_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def load_average() -> list[float] | None:
    """The 1, 5 and 15 minute load averages, rounded; ``None`` where unknown."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def environment(target: Target) -> dict[str, Any]:
    """The model, the kind of server (never its credentials) and the machine."""
    server: dict[str, Any] = {"kind": target.kind}
    if target.kind == "remote":
        server["host"] = urlsplit(target.base_url).hostname
    if target.weights is not None:
        server["weights"] = target.weights
    if target.lone_space_penalty is not None:
        server["lone_space_penalty"] = target.lone_space_penalty
    if target.bracket_penalty is not None:
        server["bracket_penalty"] = target.bracket_penalty
    if target.repeated_item_penalty is not None:
        server["repeated_item_penalty"] = target.repeated_item_penalty
    return {
        "model": target.model,
        "server": server,
        "machine": {
            "cpu_count": os.cpu_count(),
            "platform": platform.platform(),
            "machine": platform.machine(),
            "python": platform.python_version(),
            "load_average_start": load_average(),
        },
        "packages": {name: _package_version(name) for name in _PACKAGES},
    }


# --------------------------------------------------------------------------- one run


def _messages(task: Task, mode: Mode) -> list[dict[str, str]]:
    """The task as one user message; json_prompt puts the schema in a system message
    before it (slots mode: the SDK places the slot prompt there)."""
    user = {"role": "user", "content": _user_text(task)}
    if mode != "json_prompt":
        return [user]
    schema = json.dumps(task.model.model_json_schema(), ensure_ascii=False)
    return [{"role": "system", "content": _JSON_PROMPT.format(schema=schema)}, user]


def first_request_messages(task: Task, syntax: str = DEFAULT_SYNTAX) -> list[dict[str, Any]]:
    """The messages of a slots run's first request for ``task`` in ``syntax``: the
    task's, with the slot prompt placed as the SDK places it (no request is sent)."""
    core = new_core(
        task.model,
        model="model",
        messages=_messages(task, "slots"),
        options=StreamOptions(syntax=syntax, grammar="llama.cpp"),
        params={},
        client_timeout=None,
    )
    flow = pass_flow(core)
    command = flow.send(None)
    while not isinstance(command, Request):
        command = flow.send(None)
    return [dict(message) for message in command.kwargs["messages"]]


def _user_text(task: Task) -> str:
    """The user message of every mode: the task's instructions, a blank line, its input
    (also what the detectors read as the input)."""
    return f"{task.instructions}\n\n{task.input}"


def _sampling(config: BenchConfig, spec: RunSpec, cold: bool) -> dict[str, Any]:
    params: dict[str, Any] = {"max_tokens": config.max_tokens}
    if spec.seed is not None:
        params["seed"] = spec.seed
    if config.temperature is not None:
        params["temperature"] = config.temperature
    if config.frequency_penalty is not None:
        params["frequency_penalty"] = config.frequency_penalty
    if config.presence_penalty is not None:
        params["presence_penalty"] = config.presence_penalty
    if config.cache_prompt:
        params["extra_body"] = {"cache_prompt": not cold}
    return params


@functools.cache
def _plan(schema: str) -> SlotPlan:
    return compile_plan(SCHEMAS[schema])


def slot_identifiers(plan: SlotPlan) -> frozenset[str]:
    """What a slot may be called in a frame: its id, its name and its display path."""
    names: set[str] = set()
    for slot in plan.slots:
        names.update((str(slot.id), slot.name, slot.path))
    names.discard("")
    return frozenset(names)


def json_leaves(value: Any) -> Iterator[Any]:
    """Every scalar other than ``null`` in a JSON value, depth first."""
    if isinstance(value, Mapping):
        for item in value.values():
            yield from json_leaves(item)
    elif isinstance(value, list):
        for item in value:
            yield from json_leaves(item)
    elif value is not None:
        yield value


def prompt_examples(
    messages: Sequence[Mapping[str, Any]], plan: SlotPlan, syntax: str
) -> list[Any]:
    """The values of every example answer in ``messages``: the text between the
    prompt's example marker lines, read by the assembler in ``syntax``."""
    values: list[Any] = []
    for message in messages:
        content = message.get("content")
        if not isinstance(content, str) or EXAMPLE_BEGIN not in content:
            continue
        text = extract_example(content)
        if text is None:
            continue
        assembler = Assembler(plan, syntax=syntax)
        assembler.feed(text)
        assembler.close()
        values.extend(json_leaves(assembler.state))
    return values


def _unique(values: Iterable[Any]) -> tuple[Any, ...]:
    seen: set[str] = set()
    out: list[Any] = []
    for value in values:
        key = json.dumps(value, sort_keys=True, default=str)
        if key not in seen:
            seen.add(key)
            out.append(value)
    return tuple(out)


def _body_limit(config: BenchConfig) -> int:
    """The most bytes a run reads of a JSON answer, or of one event of a stream."""
    if config.max_body_bytes is not None:
        return config.max_body_bytes
    return upstream_body.body_limit(None)


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:500]


class _SlotRecorder:
    """Keeps the chunks, a state snapshot per chunk, the events and the slot times."""

    def __init__(self, core: StreamCore, start: float) -> None:
        self.core = core
        self.start = start
        self.sent: list[Mapping[str, Any]] = []  # the messages of every request
        self.chunks: list[Chunk] = []
        self.states: list[Any] = []
        self.events: list[Event] = []
        self.times: dict[str, float] = {}

    def now(self) -> float:
        return time.monotonic() - self.start

    def note(self, events: Sequence[Event], t: float) -> None:
        for event in events:
            if isinstance(event, SlotComplete):
                self.times[event.path] = t
            elif isinstance(event, SlotFailed | SlotRejected):
                self.times.pop(event.path, None)
        self.events.extend(events)

    def chunk(self, chunk: Any, events: Sequence[Event]) -> None:
        """A chunk was read and ``events`` are what it made."""
        t = self.now()
        text = chunk_text(chunk)
        if text:
            self.chunks.append((t, text))
            self.states.append(self.core.assembler.state)
        self.note(events, t)


def _drive(client: openai.OpenAI, recorder: _SlotRecorder, limit: int) -> None:
    """Drive the SDK's own pass flow (:func:`~slotflight.client.flow.pass_flow`, as
    :class:`~slotflight.client.sync_stream.SlotStream` does) with blocking I/O, handing
    every chunk and event to ``recorder``. Chunks are read as the SDK reads them
    (:func:`~slotflight.client.upstream_body.chunks`, bodies bounded by ``limit``
    bytes)."""
    flow = pass_flow(recorder.core)
    reply: Any = None
    upstream: Any = None
    chunks: Iterator[Any] = iter(())
    read: Any = None  # the chunk just read, until the flow emits what it made
    while True:
        try:
            command = flow.send(reply)
        except StopIteration:
            return
        reply = None
        if isinstance(command, Emit):
            if read is not None and read is not WAITING:
                recorder.chunk(read, command.events)
            else:
                recorder.note(command.events, recorder.now())
            read = None
        elif isinstance(command, Request):
            recorder.sent.extend(command.kwargs["messages"])
            try:
                upstream = client.chat.completions.create(**command.kwargs)
                chunks = upstream_body.chunks(upstream, limit)
            except UPSTREAM_ERRORS as exc:
                reply = exc
        elif isinstance(command, Read):
            try:
                reply = read = next(chunks)
            except StopIteration:
                reply = END
            except UPSTREAM_ERRORS as exc:
                reply = exc
        elif isinstance(command, Feed):
            reply = command.feed()
        elif isinstance(command, Wait):
            time.sleep(command.seconds)
        elif upstream is not None:  # Release
            upstream.close()
            upstream = None


async def _wire_sizes(events: Sequence[Event], state_mode: StateMode) -> int:
    async def source() -> AsyncIterator[Event]:
        for event in events:
            yield event

    size = 0
    sequence = 0
    async for wire in encode_events(source(), state_mode=state_mode):
        sequence += 1
        size += len(f"event: {wire.event}\nid: {sequence}\ndata: {wire.data}\n\n".encode())
    return size


def _sse_bytes(events: Sequence[Event]) -> dict[str, int]:
    """Bytes of the events as the web gateway sends them (no coalescing, no pings)."""
    return {mode: asyncio.run(_wire_sizes(events, mode)) for mode in _STATE_MODES}


def _run_slots(
    client: openai.OpenAI,
    target: Target,
    config: BenchConfig,
    spec: RunSpec,
    grammar: bool,
    cold: bool,
) -> RunRecord:
    task = spec.task
    syntax = spec.variant.syntax or ""
    options = StreamOptions(
        syntax=syntax,
        max_attempts=config.max_attempts,
        grammar="llama.cpp" if grammar else False,
        grammar_max_string_chars=config.grammar_max_string_chars if grammar else None,
        timeout=config.request_timeout,
        checks="all" if spec.variant.checks else "none",
        on_check_failure=config.on_check_failure,
        confidence=config.confidence,
        calibrate=config.calibrate and grammar,
    )
    core = new_core(
        task.model,
        model=target.model,
        messages=_messages(task, "slots"),
        options=options,
        params=_sampling(config, spec, cold),
        client_timeout=client.timeout,
    )
    start = time.monotonic()
    recorder = _SlotRecorder(core, start)
    _drive(client, recorder, _body_limit(config))
    wall = time.monotonic() - start
    final: Any = None
    if core.finished:
        final = core.result().model_dump(mode="json")
    accepted = core.assembler.completed()
    times = {path: t for path, t in recorder.times.items() if path in accepted}
    run = SlotRun(tuple(recorder.chunks), tuple(recorder.states), times, final)
    error = None if core.error is None else f"{core.error.code}: {core.error.message}"[:500]
    return RunRecord(
        spec=spec,
        metrics=measure(run, task.model),
        chunks=run.chunks,
        usage=core.usage.requests,
        wall_s=wall,
        grammar=grammar,
        final=final if final is not None else run.final_state,
        text="".join(text for _, text in run.chunks),
        events=len(recorder.events),
        sse_bytes=_sse_bytes(recorder.events),
        error=error,
        cold=cold,
        confidence=core.assembler.confidence() if config.confidence else None,
        value_logprobs=core.assembler.value_logprobs() if config.confidence else None,
        flagged=tuple(sorted(core.assembler.flagged())) if final is not None else (),
        examples=_unique(
            [
                *prompt_examples(recorder.sent, core.plan, syntax),
                *schema_examples(task.model.model_json_schema()),
            ]
        ),
    )


def _response_format(task: Task) -> dict[str, Any]:
    return {
        "type": "json_schema",
        "json_schema": {
            "name": task.schema,
            "schema": task.model.model_json_schema(),
            "strict": True,
        },
    }


def _run_json(
    client: openai.OpenAI, target: Target, config: BenchConfig, spec: RunSpec, cold: bool
) -> RunRecord:
    task = spec.task
    mode = spec.variant.mode
    kwargs: dict[str, Any] = {
        "model": target.model,
        "messages": _messages(task, mode),
        "stream": True,
        "stream_options": {"include_usage": True},
        **_sampling(config, spec, cold),
    }
    if mode == "json_schema":
        kwargs["response_format"] = _response_format(task)
    chunks: list[Chunk] = []
    usage: TokenUsage | None = None
    error: str | None = None
    stopped = False
    start = time.monotonic()
    try:
        with client.chat.completions.create(**kwargs) as stream:
            head = ""  # the text's start, until it shows whether an object follows
            for chunk in upstream_body.chunks(stream, _body_limit(config)):
                if chunk is WAITING:  # a network read of a JSON answer, no chunk yet
                    continue
                t = time.monotonic() - start
                if getattr(chunk, "usage", None) is not None:
                    usage = TokenUsage.from_openai(chunk.usage)
                text = chunk_text(chunk)
                if text:
                    chunks.append((t, text))
                    if mode == "json_prompt" and "{" not in head:
                        head += text
                        if not_json_object(head):
                            stopped = True
                            break
    except UPSTREAM_ERRORS as exc:
        error = _describe(exc)
    wall = time.monotonic() - start
    answer, fenced = unfenced(tuple(chunks)) if mode == "json_prompt" else (tuple(chunks), False)
    run = JsonRun(answer)
    try:
        final: Any = json.loads(run.text)
    except ValueError:  # what the client holds: the OpenAI SDK's partial view
        final = partial_view(run.text)
    return RunRecord(
        spec=spec,
        metrics=measure(run, task.model),
        chunks=run.chunks,
        usage=(usage,),
        wall_s=wall,
        grammar=mode == "json_schema",
        final=final,
        text=run.text,
        error=error,
        cold=cold,
        examples=_unique(schema_examples(task.model.model_json_schema())),
        stopped=stopped,
        fenced=fenced and not stopped,
    )


def run_one(
    client: openai.OpenAI, target: Target, config: BenchConfig, spec: RunSpec, *, cold: bool
) -> RunRecord:
    """Make one run and measure it; ``cold`` sends ``cache_prompt: false``."""
    if spec.variant.mode == "slots":
        grammar = target.grammar_default if config.grammar is None else config.grammar
        return _run_slots(client, target, config, spec, grammar, cold)
    return _run_json(client, target, config, spec, cold)


# --------------------------------------------------------------------------- all runs


class Observer(Protocol):
    """Told about progress (the CLI draws a progress bar from it)."""

    def run_started(self, spec: RunSpec) -> None: ...

    def run_finished(self, record: RunRecord) -> None: ...


def run_benchmark(
    config: BenchConfig,
    target: Target,
    specs: Sequence[RunSpec],
    *,
    observer: Observer | None = None,
) -> list[RunRecord]:
    """Make every run of ``specs`` against ``target``, in order. The first run of each
    group (:attr:`RunSpec.group`) made here is cold, the others warm. The observer
    hears of each run as it starts and ends (the CLI writes each record then)."""
    records: list[RunRecord] = []
    started: set[tuple[int, str, str]] = set()
    with openai.OpenAI(
        base_url=target.base_url,
        api_key=target.api_key,
        max_retries=0,
        timeout=config.request_timeout,
    ) as client:
        for spec in specs:
            if observer is not None:
                observer.run_started(spec)
            cold = spec.group not in started
            started.add(spec.group)
            record = run_one(client, target, config, spec, cold=cold)
            records.append(record)
            if observer is not None:
                observer.run_finished(record)
    return records
