"""``slotflight bench`` end to end against the scripted upstream.

Two tiny tasks with gold answers (a triage and a product extraction) run in every mode:
slots in both frame syntaxes, native ``json_schema`` and ``json_prompt``. Each request
is answered by the reply whose ``match`` recognises its mode and task, with scripted
usage, so the recorded tokens, requests, metrics and accuracy can be checked against
what was sent.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from slotflight.bench.cli import add_bench_arguments, run_bench
from slotflight.bench.models import SCHEMAS, TASKS_DIR, SupportTriage, Task, load_tasks
from slotflight.bench.report import read_log
from slotflight.bench.runner import (
    BenchConfig,
    known_syntaxes,
    select_tasks,
    task_scores,
    variants,
)
from slotflight.plan.compiler import compile as compile_schema
from slotflight.prompting.prompt import prompt
from slotflight.syntax import DEFAULT_SYNTAX, SYNTAXES, grammar
from slotflight.testing import Reply, ScriptedServer, Usage

API_KEY = "sk-bench-never-written"
TRIAGE_INPUT = "Subject: export broken. The nightly export fails for files over 2 GB."
PRODUCT_INPUT = "Aurora desk lamp. 49.50 EUR. In stock. Dimmable, USB-C."

TRIAGE_V1 = (
    "<1>\nNightly export fails for large files.\n</1>\n<2>\nnegative\n</2>\n"
    "<3>\n9\n</3>\n<4>\nfalse\n</4>\n<5>\ndata_export\n</5>\n<6:0>\nexport\n</6:0>\n"
)
TRIAGE_V1_RETRY = "<3>\n4\n</3>\n"
TRIAGE_V2 = (
    "1 Nightly export fails for large files.\n2 negative\n3 4\n4 false\n"
    "5 data_export\n6 export\nend\n"
)
PRODUCT_V1 = (
    "<1>\nAurora desk lamp\n</1>\n<3>\n49.5\n</3>\n<4>\nEUR\n</4>\n<5>\ntrue\n</5>\n"
    "<10:0>\nDimmable\n</10:0>\n<10:1>\nUSB-C\n</10:1>\n"
)
PRODUCT_V2 = "1 Aurora desk lamp\n3 49.5\n4 EUR\n5 true\n10 Dimmable\n10 USB-C\nend\n"
#: A right triage object, and as JSON.
TRIAGE: dict[str, Any] = {
    "summary": "Nightly export fails for large files.",
    "sentiment": "negative",
    "priority": 4,
    "needs_human": False,
    "product_area": "data_export",
    "tags": ["export"],
}
TRIAGE_JSON = json.dumps(TRIAGE)
PRODUCT_JSON = (
    '{"name": "Aurora desk lamp", "price": 49.5, "currency": "EUR", "in_stock": true, '
    '"features": ["Dimmable", "USB-C"]}'
)
# The price arrives in two chunks: a partial parser shows 4 before 49.5.
PRODUCT_JSON_CHUNKS = [
    '{"name": "Aurora desk lamp", "price": 4',
    '9.5, "currency": "EUR", ',
    '"in_stock": true, "features": ["Dimmable", "USB-C"]}',
]
# Prose before the object: never JSON, so never valid, and read no further.
PRODUCT_PROSE = "Here is the product page as JSON:\n" + PRODUCT_JSON
# The object in a code fence, a remark after it: read as the object alone.
TRIAGE_FENCED = "```json\n" + TRIAGE_JSON + "\n```\nEvery field is filled in."

#: Scripted usage per (variant, task, request number).
USAGE: dict[tuple[str, str, int], Usage] = {
    ("slots v1", "triage", 0): Usage(prompt_tokens=900, completion_tokens=61),
    ("slots v1", "triage", 1): Usage(prompt_tokens=950, completion_tokens=7),
    ("slots v2", "triage", 0): Usage(prompt_tokens=880, completion_tokens=33),
    ("json_schema", "triage", 0): Usage(prompt_tokens=120, completion_tokens=52),
    ("json_prompt", "triage", 0): Usage(prompt_tokens=400, completion_tokens=53),
    ("slots v1", "product", 0): Usage(prompt_tokens=910, completion_tokens=44),
    ("slots v2", "product", 0): Usage(prompt_tokens=890, completion_tokens=25),
    ("json_schema", "product", 0): Usage(prompt_tokens=130, completion_tokens=40),
    ("json_prompt", "product", 0): Usage(prompt_tokens=410, completion_tokens=45),
}


def _system(body: Mapping[str, Any]) -> str:
    messages = body.get("messages") or [{}]
    content = messages[0].get("content")
    return content if isinstance(content, str) else ""


def _variant(body: Mapping[str, Any]) -> str:
    if "response_format" in body:
        return "json_schema"
    if "grammar" not in body:
        return "json_prompt"
    # the plan's prompt opens the system message: it names the syntax
    plan = compile_schema(SCHEMAS[_task(body)])
    (syntax,) = [s for s in SYNTAXES if _system(body).startswith(prompt(plan, s, grammar=True))]
    return f"slots {syntax}"


def _task(body: Mapping[str, Any]) -> str:
    user = json.dumps(body.get("messages"))
    return "triage" if "nightly export" in user else "product"


def _for(variant: str, task: str) -> Callable[[Mapping[str, Any]], bool]:
    return lambda body: _variant(body) == variant and _task(body) == task


def _reply(variant: str, task: str, text: str, request: int = 0, **kwargs: Any) -> Reply:
    kwargs.setdefault("chunks", 5)
    return Reply(text, usage=USAGE[variant, task, request], match=_for(variant, task), **kwargs)


TRIAGE_GOLD = {**json.loads(TRIAGE_JSON), "action_items": []}
PRODUCT_GOLD = json.loads(PRODUCT_JSON)


def _write_tasks(folder: Path) -> None:
    folder.mkdir()
    rows = [
        {
            "id": "t-triage",
            "schema": "triage",
            "input": TRIAGE_INPUT,
            "instructions": "Triage.",
            "gold": TRIAGE_GOLD,
        },
        {
            "id": "t-product",
            "schema": "product",
            "input": PRODUCT_INPUT,
            "instructions": "Extract.",
            "gold": PRODUCT_GOLD,
        },
    ]
    (folder / "tiny.jsonl").write_text(
        "".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8"
    )


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as running:
        running.add(
            # Request order does not matter: each reply only answers its mode and task.
            # The first triage v1 answer has an out-of-range priority: one follow-up.
            _reply("slots v1", "triage", TRIAGE_V1),
            _reply("slots v1", "triage", TRIAGE_V1_RETRY, request=1),
            _reply("slots v2", "triage", TRIAGE_V2),
            _reply("json_schema", "triage", TRIAGE_JSON),
            _reply("json_prompt", "triage", TRIAGE_FENCED),
            _reply("slots v1", "product", PRODUCT_V1),
            _reply("slots v2", "product", PRODUCT_V2),
            _reply("json_schema", "product", "", chunks=PRODUCT_JSON_CHUNKS),
            _reply("json_prompt", "product", PRODUCT_PROSE),
        )
        yield running


def _parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_bench_arguments(parser)
    return parser.parse_args(list(argv))


def _bench(server: ScriptedServer, tmp_path: Path) -> tuple[int, dict[str, Any], Path]:
    _write_tasks(tmp_path / "tasks")
    args = _parse(
        "--base-url",
        server.base_url,
        "--model",
        "scripted",
        "--api-key",
        API_KEY,
        "--tasks",
        str(tmp_path / "tasks"),
        "--modes",
        "slots,json_schema,json_prompt",
        "--syntax",
        "v1,v2",
        "--grammar",
        "--seed",
        "7",
        "--runs",
        "1",
        "--max-tokens",
        "300",
        "--out",
        str(tmp_path / "out"),
        "--name",
        "tiny",
    )
    status = run_bench(args)
    doc = json.loads((tmp_path / "out" / "tiny.json").read_text(encoding="utf-8"))
    return status, doc, tmp_path / "out" / "tiny.png"


def _runs(doc: Mapping[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(run["variant"], run["schema"]): run for run in doc["runs"]}


def test_bench_runs_every_task_in_every_mode(server: ScriptedServer, tmp_path: Path) -> None:
    status, doc, _ = _bench(server, tmp_path)
    assert status == 0
    assert server.remaining == 0  # every scripted reply, the follow-up included, was used
    runs = _runs(doc)
    variants = ("slots v1", "slots v2", "json_schema", "json_prompt")
    assert set(runs) == {(v, s) for v in variants for s in ("triage", "product")}
    for run in doc["runs"]:
        assert run["mode"] == run["variant"].split()[0]
        assert run["error"] is None
        assert run["seed"] == 7
    # The server saw the sampling options of every request.
    bodies = [request.body for request in server.requests]
    assert all(body["max_tokens"] == 300 and body["seed"] == 7 for body in bodies)
    assert all(body["temperature"] == 0.3 for body in bodies)  # the benchmark's default
    # The task is one user message; a mode's own prompt is a system message before it.
    for body in bodies:  # (a follow-up request adds a user message after these)
        roles = [m["role"] for m in body["messages"]]
        before, user = roles[: roles.index("user")], body["messages"][roles.index("user")]
        assert user["content"].startswith(("Triage.\n\n", "Extract.\n\n"))
        assert before == ([] if "response_format" in body else ["system"])
    schema_bodies = [b for b in bodies if "response_format" in b]
    assert {b["response_format"]["json_schema"]["name"] for b in schema_bodies} == {
        "triage",
        "product",
    }
    assert all(b["response_format"]["json_schema"]["strict"] is True for b in schema_bodies)


def test_bench_metrics_have_sane_ranges(server: ScriptedServer, tmp_path: Path) -> None:
    _, doc, _ = _bench(server, tmp_path)
    for run in doc["runs"]:
        for share in ("stream_valid", "unsafe_partial"):
            value = run[share]
            assert value["total"] == run["chunks"] == len(run["chunk_log"]) > 0
            assert 0 <= value["count"] <= value["total"]
            assert 0.0 <= value["share"] <= 1.0
        times = [t for t, _ in run["chunk_log"]]
        assert times == sorted(times) and times[0] >= 0
        fields = run["fields"]
        per_field = list(fields["per_field"].values())
        if (run["variant"], run["schema"]) == ("json_prompt", "product"):
            # Prose before the object: not JSON, no field ever settles.
            assert per_field == [] and fields["first"] is None and fields["all"] is None
            continue
        assert per_field, run["variant"]
        assert 0 <= fields["first"] <= fields["p50"] <= fields["p95"] <= fields["all"]
        assert all(fields["first"] <= t <= fields["all"] for t in per_field)
        assert fields["all"] <= run["wall_s"]


def test_bench_measures_what_each_mode_shows(server: ScriptedServer, tmp_path: Path) -> None:
    _, doc, _ = _bench(server, tmp_path)
    runs = _runs(doc)
    for (variant, schema), run in runs.items():
        prose = (variant, schema) == ("json_prompt", "product")
        assert run["final_valid"] is not prose
        assert run["fenced"] is ((variant, schema) == ("json_prompt", "triage"))
        if variant.startswith("slots"):
            # The slot state is valid JSON after every chunk, and a scalar shows only
            # once it validated.
            assert run["stream_valid"]["share"] == 1.0
            assert run["unsafe_partial"]["count"] == 0
            assert run["sse_bytes"]["full"] > 0 and run["sse_bytes"]["patch"] > 0
            assert run["events"] > 0
        else:
            # The accumulated text parses only once the object is closed.
            assert run["stream_valid"]["count"] == (0 if prose else 1)
            assert run["sse_bytes"] is None
    assert runs["json_schema", "product"]["unsafe_partial"]["count"] >= 1
    assert runs["slots v1", "product"]["final"]["price"] == 49.5
    assert set(runs["slots v2", "triage"]["fields"]["per_field"]) == {
        "/summary",
        "/sentiment",
        "/priority",
        "/needs_human",
        "/product_area",
        "/tags/0",
    }
    assert set(runs["json_schema", "product"]["fields"]["per_field"]) == {
        "/name",
        "/price",
        "/currency",
        "/in_stock",
        "/features/0",
        "/features/1",
    }


def test_bench_counts_tokens_requests_and_retries(server: ScriptedServer, tmp_path: Path) -> None:
    _, doc, _ = _bench(server, tmp_path)
    for (variant, schema), run in _runs(doc).items():
        scripted = [USAGE[variant, schema, i] for i in range(2) if (variant, schema, i) in USAGE]
        tokens = run["tokens"]
        assert run["requests"] == len(scripted)
        if run["stopped"]:
            # A prompted answer that cannot be JSON is not read to its end, and the
            # usage the server sends last never arrives.
            assert (variant, schema) == ("json_prompt", "product")
            assert PRODUCT_PROSE.startswith(run["text"]) and run["text"] != PRODUCT_PROSE
            assert tokens["reported"] is False
            continue
        assert tokens["reported"] is True
        assert tokens["per_request"] == [
            {
                "prompt_tokens": u.prompt_tokens,
                "completion_tokens": u.completion_tokens,
                "total_tokens": u.prompt_tokens + u.completion_tokens,
            }
            for u in scripted
        ]
        assert tokens["completion"] == sum(u.completion_tokens for u in scripted)
        assert tokens["prompt"] == sum(u.prompt_tokens for u in scripted)
        assert tokens["retry_completion"] == sum(u.completion_tokens for u in scripted[1:])
    retried = _runs(doc)["slots v1", "triage"]
    assert retried["final"]["priority"] == 4
    # The priority validated in the follow-up, after every field of the first request.
    per_field = retried["fields"]["per_field"]
    assert per_field["/priority"] == retried["fields"]["all"]
    assert per_field["/priority"] > per_field["/tags/0"]


def test_bench_writes_summary_environment_and_plot(server: ScriptedServer, tmp_path: Path) -> None:
    _, doc, png = _bench(server, tmp_path)
    summary = {row["variant"]: row["figures"] for row in doc["summary"]}
    assert list(summary) == ["slots v1", "slots v2", "json_schema", "json_prompt"]
    assert summary["json_prompt"]["final_valid"]["value"] == 0.5
    assert summary["slots v1"]["final_valid"]["value"] == 1.0
    assert summary["slots v1"]["retries"]["value"] == 0.5
    assert summary["slots v1"]["retry_tokens"]["value"] == 3.5  # (7 + 0) / 2
    assert summary["json_schema"]["sse_full"]["value"] is None
    for figures in summary.values():
        assert 0.0 <= figures["stream_valid"]["value"] <= 1.0
        assert 0.0 <= figures["unsafe_partial"]["value"] <= 1.0
        # One seed: the per-seed min and max are the value itself.
        accuracy = figures["accuracy"]
        assert accuracy["seed_min"] == accuracy["value"] == accuracy["seed_max"]
        assert accuracy["ci_low"] <= accuracy["value"] <= accuracy["ci_high"]
    markdown = (tmp_path / "out" / "tiny.md").read_text(encoding="utf-8")
    assert "| field accuracy (invalid = 0) |" in markdown
    assert "95 % bootstrap interval over tasks" in markdown
    assert "| free text |" in markdown and "| product |" in markdown
    env = doc["environment"]
    assert env["model"] == "scripted"
    assert env["server"] == {"kind": "remote", "host": "127.0.0.1"}
    assert env["machine"]["cpu_count"] >= 1
    assert env["machine"]["python"].count(".") == 2
    assert env["packages"]["pydantic"] and env["packages"]["openai"]
    assert API_KEY not in json.dumps(doc)  # the API key is never written
    data = png.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 10_000


def _task_named(task_id: str, schema: str) -> Task:
    return Task(id=task_id, schema=schema, input="x", instructions="y")


def test_limit_interleaves_schemas() -> None:
    tasks = [
        _task_named("a1", "triage"),
        _task_named("a2", "triage"),
        _task_named("a3", "triage"),
        _task_named("b1", "product"),
    ]
    assert [t.id for t in select_tasks(tasks, 3)] == ["a1", "b1", "a2"]
    assert [t.id for t in select_tasks(tasks, None)] == ["a1", "b1", "a2", "a3"]


def test_bench_refuses_a_bad_mode(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser()
    add_bench_arguments(parser)
    args = parser.parse_args(["--modes", "slots,xml", "--out", str(tmp_path)])
    assert run_bench(args) == 2
    args = parser.parse_args(["--syntax", "v9", "--out", str(tmp_path)])
    assert run_bench(args) == 2
    assert "xml" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


def test_bench_sends_the_compact_grammar(tmp_path: Path) -> None:
    _write_tasks(tmp_path / "tasks")
    parser = argparse.ArgumentParser()
    add_bench_arguments(parser)
    with ScriptedServer() as server:
        server.add(_reply("slots v2", "triage", TRIAGE_V2))
        args = parser.parse_args(
            [
                "--base-url",
                server.base_url,
                "--model",
                "scripted",
                "--tasks",
                str(tmp_path / "tasks"),
                "--schemas",
                "triage",
                "--modes",
                "slots",
                "--syntax",
                "v2",
                "--grammar",
                "--grammar-max-string-chars",
                "24",
                "--runs",
                "1",
                "--out",
                str(tmp_path / "out"),
            ]
        )
        assert run_bench(args) == 0
        body = server.request(0).body
    compact = grammar(compile_schema(SupportTriage), "v2", max_string_chars=24)
    assert body["grammar"] == compact
    assert compact != grammar(compile_schema(SupportTriage), "v2")
    doc = json.loads((tmp_path / "out" / "bench.json").read_text(encoding="utf-8"))
    assert doc["config"]["grammar_max_string_chars"] == 24
    assert [run["final_valid"] for run in doc["runs"]] == [True]


# --------------------------------------------------------------------------- accuracy


def test_bench_scores_answers_against_the_gold(server: ScriptedServer, tmp_path: Path) -> None:
    _, doc, _ = _bench(server, tmp_path)
    runs = _runs(doc)
    for key, run in runs.items():
        accuracy = run["accuracy"]
        paths = [f["path"] for f in accuracy["fields"]]
        assert len(paths) == len(set(paths))
        if key == ("json_prompt", "product"):  # invalid: 0 on every field
            assert {f["score"] for f in accuracy["fields"]} == {0.0}
            assert run["degenerate"] is None  # no object at all
            continue
        # Every valid answer here is the gold (the v1 triage one after its follow-up).
        assert accuracy["mean"] == 1.0, key
        assert run["degenerate"]["any"] == [], key
    kinds = {f["path"]: f["kind"] for f in runs["slots v2", "triage"]["accuracy"]["fields"]}
    assert kinds["summary"] == "free_text" and kinds["tags[]"] == "list"
    summary = {row["variant"]: row for row in doc["summary"]}
    assert summary["json_prompt"]["figures"]["accuracy"]["value"] == pytest.approx(
        9 / (9 + 10)  # the 9 triage fields right, the 10 product fields 0
    )
    assert summary["json_prompt"]["figures"]["accuracy_valid"]["value"] == 1.0
    assert summary["slots v2"]["accuracy_by_schema"]["product"]["value"] == 1.0


DEGENERATE_V2 = (
    "1 2\n2 negative\n3 3\n4 true\n5 billing\n6 Example tags 1\n"
    "7 Example description 1\n8 2\n9 2025-01-31\nend\n"
)


def test_bench_flags_slot_ids_and_repeated_values(tmp_path: Path) -> None:
    _write_tasks(tmp_path / "tasks")
    with ScriptedServer() as server:
        server.add(Reply(DEGENERATE_V2, chunks=4))
        status = run_bench(
            _parse(
                *("--base-url", server.base_url, "--model", "scripted"),
                *("--tasks", str(tmp_path / "tasks"), "--schemas", "triage"),
                *("--modes", "slots", "--syntax", "v2", "--runs", "1"),
                # the detectors are under test: the slot checks would re-ask for the junk
                *("--checks", "none"),
                *("--out", str(tmp_path / "out")),
            )
        )
    assert status == 0
    (run,) = json.loads((tmp_path / "out" / "bench.json").read_text(encoding="utf-8"))["runs"]
    assert run["variant"] == "slots v2 no-checks"
    assert run["final_valid"] is True  # valid, and nonsense
    # The prompt shows no made-up values, so none of these is counted as a copy of it.
    assert run["examples"] == []
    flags = run["degenerate"]["flags"]
    assert flags["slot_id"] == ["action_items[].owner", "summary"]
    assert flags["example_copy"] == []
    assert flags["repeated"] == ["action_items[].owner", "summary"]
    scores = {f["path"]: f["score"] for f in run["accuracy"]["fields"]}
    assert scores["summary"] == 0.0 and scores["tags[]"] == 0.0
    assert scores["sentiment"] == 1.0  # the one right answer


# --------------------------------------------------------------------------- cold / warm


def _two_triage_tasks(folder: Path) -> None:
    folder.mkdir()
    rows = [
        {"id": f"t-{i}", "schema": "triage", "input": TRIAGE_INPUT, "instructions": "Triage."}
        for i in (1, 2)
    ]
    (folder / "t.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


@pytest.mark.parametrize("send", [True, False])
def test_first_run_of_a_group_is_cold_and_asks_for_no_prompt_cache(
    tmp_path: Path, send: bool
) -> None:
    _two_triage_tasks(tmp_path / "tasks")
    with ScriptedServer() as server:
        server.add(*(Reply(TRIAGE_JSON, chunks=3) for _ in range(4)))
        status = run_bench(
            _parse(
                *("--base-url", server.base_url, "--model", "scripted"),
                *("--tasks", str(tmp_path / "tasks"), "--modes", "json_schema"),
                *("--runs", "2", "--out", str(tmp_path / "out")),
                "--cache-prompt" if send else "--no-cache-prompt",
            )
        )
        bodies = [r.body for r in server.requests]
    assert status == 0
    runs = json.loads((tmp_path / "out" / "bench.json").read_text(encoding="utf-8"))["runs"]
    # Repetition by repetition; the first run of each repetition is cold.
    assert [(r["task"], r["repeat"], r["cold"]) for r in runs] == [
        ("t-1", 0, True),
        ("t-2", 0, False),
        ("t-1", 1, True),
        ("t-2", 1, False),
    ]
    assert [r["seed"] for r in runs] == [1, 1, 2, 2]  # the default seed, then seed + 1
    if send:
        assert [b["cache_prompt"] for b in bodies] == [False, True, False, True]
    else:
        assert all("cache_prompt" not in b for b in bodies)
    for run in runs:
        assert run["latency"]["first_field_s"] <= run["latency"]["object_s"] == run["wall_s"]
        assert run["accuracy"] is None  # no gold for these tasks
    figures = json.loads((tmp_path / "out" / "bench.json").read_text(encoding="utf-8"))["summary"][
        0
    ]["figures"]
    assert figures["first_field_cold"]["value"] is not None
    assert figures["first_field_warm"]["value"] is not None
    assert figures["accuracy"]["value"] is None


# --------------------------------------------------------------------------- resume


def _resume_args(server: ScriptedServer, tmp_path: Path, *extra: str) -> argparse.Namespace:
    return _parse(
        *("--base-url", server.base_url, "--model", "scripted"),
        *("--tasks", str(tmp_path / "tasks"), "--modes", "json_schema,json_prompt"),
        *("--runs", "1", "--out", str(tmp_path / "out"), "--name", "r"),
        *extra,
    )


def test_an_interrupted_benchmark_resumes_from_its_log(tmp_path: Path) -> None:
    _write_tasks(tmp_path / "tasks")
    replies = {
        ("json_schema", "triage"): TRIAGE_JSON,
        ("json_prompt", "triage"): TRIAGE_FENCED,
        ("json_schema", "product"): PRODUCT_JSON,
        ("json_prompt", "product"): PRODUCT_PROSE,
    }
    with ScriptedServer() as server:
        server.add(*(_reply(v, t, text) for (v, t), text in replies.items()))
        assert run_bench(_resume_args(server, tmp_path)) == 0
    log = tmp_path / "out" / "r.jsonl"
    lines = log.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 1 + 4  # header and one line per run
    # Interrupted during the third run: two runs kept, and half a line.
    log.write_text("\n".join(lines[:3]) + "\n" + lines[3][:40], encoding="utf-8")
    done = {(r["variant"], r["schema"]) for r in read_log(log)["runs"]}
    assert len(done) == 2
    with ScriptedServer() as server:
        server.add(*(_reply(v, t, text) for (v, t), text in replies.items() if (v, t) not in done))
        assert run_bench(_resume_args(server, tmp_path, "--resume")) == 0
        assert server.remaining == 0 and len(server.requests) == 2
    doc = json.loads((tmp_path / "out" / "r.json").read_text(encoding="utf-8"))
    assert sorted((r["variant"], r["schema"]) for r in doc["runs"]) == sorted(replies)
    assert len(read_log(log)["runs"]) == 4


def test_resume_refuses_other_options_or_a_missing_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _write_tasks(tmp_path / "tasks")
    with ScriptedServer() as server:
        assert run_bench(_resume_args(server, tmp_path, "--resume")) == 2
        assert "nothing to resume" in capsys.readouterr().err
        server.add(*(Reply(TRIAGE_JSON) for _ in range(4)))
        assert run_bench(_resume_args(server, tmp_path)) == 0
        assert run_bench(_resume_args(server, tmp_path, "--resume", "--max-tokens", "99")) == 2
        assert "max_tokens" in capsys.readouterr().err


def test_resume_with_more_runs_adds_the_next_seeds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A finished run of seed 1 resumed with ``--runs 2`` runs seed 2 only, and its log
    then says two runs; fewer runs than the log holds are refused."""
    _write_tasks(tmp_path / "tasks")
    log = tmp_path / "out" / "r.jsonl"
    with ScriptedServer() as server:
        server.add(*(Reply(TRIAGE_JSON) for _ in range(8)))
        assert run_bench(_resume_args(server, tmp_path)) == 0
        assert len(server.requests) == 4
        assert run_bench(_resume_args(server, tmp_path, "--resume", "--runs", "2")) == 0
        assert len(server.requests) == 8
        seeds = [r.body.get("seed") for r in server.requests]
        assert seeds[:4] == [1] * 4 and seeds[4:] == [2] * 4
        doc = read_log(log)
        assert doc["config"]["runs"] == 2
        assert sorted(r["repeat"] for r in doc["runs"]) == [0] * 4 + [1] * 4
        assert run_bench(_resume_args(server, tmp_path, "--resume", "--runs", "2")) == 0
        assert len(server.requests) == 8  # nothing left to run
        assert run_bench(_resume_args(server, tmp_path, "--resume", "--runs", "1")) == 2
        assert "runs" in capsys.readouterr().err
    summary = json.loads((tmp_path / "out" / "r.json").read_text(encoding="utf-8"))["summary"]
    assert {s["seeds"] for s in summary} == {2}


def test_rescore_scores_the_stored_objects_again_without_a_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--rescore`` computes accuracy and degenerate values again from the objects a
    finished benchmark holds, against the task file as it is now, and rewrites the log
    and the results; it sends no request. Without the log it reads the results file."""
    _write_tasks(tmp_path / "tasks")
    out = tmp_path / "out"
    with ScriptedServer() as server:
        server.add(*(Reply(TRIAGE_JSON) for _ in range(4)))
        assert run_bench(_resume_args(server, tmp_path, "--schemas", "triage")) == 0
        sent = len(server.requests)
        log = out / "r.jsonl"
        doc = read_log(log)
        # The gold's summary changes from the one the model wrote, and a stored figure
        # is stale: both must come out as this code computes them.
        tasks = tmp_path / "tasks" / "tiny.jsonl"
        rows = [json.loads(line) for line in tasks.read_text(encoding="utf-8").splitlines()]
        rows[0]["gold"] = {**rows[0]["gold"], "summary": "Refund requested."}
        tasks.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        doc["runs"][0]["degenerate"] = {"fields": 0, "flags": {}, "any": ["stale"]}
        log.write_text(
            "".join(
                json.dumps(item) + "\n"
                for item in [{k: v for k, v in doc.items() if k != "runs"}, *doc["runs"]]
            ),
            encoding="utf-8",
        )
        before = {f["path"]: f["score"] for f in doc["runs"][1]["accuracy"]["fields"]}
        assert before["summary"] == 1.0
        assert run_bench(_resume_args(server, tmp_path, "--schemas", "triage", "--rescore")) == 0
        assert len(server.requests) == sent
    for rescored in (read_log(log), json.loads((out / "r.json").read_text(encoding="utf-8"))):
        assert len(rescored["runs"]) == 2
        for run in rescored["runs"]:
            scores = {f["path"]: f["score"] for f in run["accuracy"]["fields"]}
            assert scores["summary"] == 0.0, run["variant"]
            assert scores["sentiment"] == 1.0
            assert run["degenerate"]["any"] == []
        assert rescored["config"] == doc["config"]
    results = json.loads((out / "r.json").read_text(encoding="utf-8"))
    (schema_figures,) = [s for s in results["summary"] if s["variant"] == "json_schema"]
    assert 0.5 < schema_figures["figures"]["accuracy"]["value"] < 1.0
    # Without the log, the results file is read; a run of an unknown task is refused.
    log.unlink()
    (out / "r.md").unlink()
    assert run_bench(_resume_args(server, tmp_path, "--rescore")) == 0
    assert (out / "r.md").is_file() and not log.exists()
    tasks.write_text(json.dumps({**rows[1]}) + "\n", encoding="utf-8")
    assert run_bench(_resume_args(server, tmp_path, "--rescore")) == 2
    assert "t-triage" in capsys.readouterr().err
    (out / "r.json").unlink()
    assert run_bench(_resume_args(server, tmp_path, "--rescore")) == 2
    assert "nothing to rescore" in capsys.readouterr().err


def test_quick_runs_one_task_per_schema_once(tmp_path: Path) -> None:
    folder = tmp_path / "tasks"
    _two_triage_tasks(folder)
    product = {"id": "p-1", "schema": "product", "input": PRODUCT_INPUT, "instructions": "Extract."}
    (folder / "p.jsonl").write_text(json.dumps(product) + "\n", encoding="utf-8")
    with ScriptedServer() as server:
        server.add(Reply(PRODUCT_JSON), Reply(TRIAGE_JSON))  # tasks run file by file
        status = run_bench(
            _parse(
                *("--base-url", server.base_url, "--model", "scripted"),
                *("--tasks", str(folder), "--modes", "json_schema", "--quick"),
                *("--out", str(tmp_path / "out")),
            )
        )
    assert status == 0
    runs = json.loads((tmp_path / "out" / "bench.json").read_text(encoding="utf-8"))["runs"]
    assert [(r["task"], r["repeat"]) for r in runs] == [("p-1", 0), ("t-1", 0)]


def test_known_syntaxes_are_the_ones_with_templates_and_a_renderer() -> None:
    syntaxes = known_syntaxes()
    assert {"v1", "v2"} <= set(syntaxes)
    assert list(syntaxes) == sorted(syntaxes)


def test_an_unfinished_json_answer_is_judged_on_its_partial_view(tmp_path: Path) -> None:
    _write_tasks(tmp_path / "tasks")
    cut = '{"summary": "2 3", "sentiment": "negative", "priority": 4, "tags": ["export", "2'
    with ScriptedServer() as server:
        server.add(Reply(cut, chunks=3))
        status = run_bench(
            _parse(
                *("--base-url", server.base_url, "--model", "scripted"),
                *("--tasks", str(tmp_path / "tasks"), "--schemas", "triage"),
                *("--modes", "json_schema", "--runs", "1", "--out", str(tmp_path / "out")),
            )
        )
    assert status == 0
    (run,) = json.loads((tmp_path / "out" / "bench.json").read_text(encoding="utf-8"))["runs"]
    assert run["final_valid"] is False
    # The partial view drops the unfinished string, as the OpenAI SDK does.
    assert run["final"] == {
        "summary": "2 3",
        "sentiment": "negative",
        "priority": 4,
        "tags": ["export"],
    }
    assert run["degenerate"]["flags"]["slot_id"] == ["summary"]
    assert {f["score"] for f in run["accuracy"]["fields"]} == {0.0}  # invalid: 0 throughout


def test_checks_on_and_off_run_side_by_side() -> None:
    config = BenchConfig(modes=("slots", "json_schema"), checks=("all", "none"))
    labels = [v.label for v in variants(config)]
    default = f"slots {DEFAULT_SYNTAX}"
    assert labels == [default, f"{default} no-checks", "json_schema"]
    assert config.to_json()["checks"] == ["all", "none"]
    with pytest.raises(ValueError, match="checks"):
        BenchConfig(checks=("some",))


def test_a_value_kept_though_it_fails_its_checks_is_flagged_and_never_scored_right(
    tmp_path: Path,
) -> None:
    """``--on-check-failure accept`` (the default): a required summary that is a
    placeholder again on its retry ends the run valid after two requests with the
    summary flagged, scored 0
    even where the flagged text would match the gold and left out of the degenerate
    count; ``error`` ends the run invalid. Rescoring keeps the flagged value out."""
    _write_tasks(tmp_path / "tasks")
    tasks = tmp_path / "tasks" / "tiny.jsonl"
    rows = [json.loads(line) for line in tasks.read_text(encoding="utf-8").splitlines()]
    rows[0]["gold"] = {**rows[0]["gold"], "summary": "[Summary]"}
    tasks.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    first = (
        "summary: [Summary]\nsentiment: negative\npriority: 4\nneeds_human: false\n"
        "product_area: data_export\ntags: export\nend\n"
    )
    retries = ["summary: [Text]\nend\n", "summary: [Other]\nend\n"]
    for choice, valid, requests in (("accept", True, 2), ("error", False, 3)):
        out = tmp_path / choice
        with ScriptedServer() as server:
            server.add(Reply(first), *(Reply(text) for text in retries))
            args = _parse(
                *("--base-url", server.base_url, "--model", "scripted"),
                *("--tasks", str(tmp_path / "tasks"), "--schemas", "triage"),
                *("--modes", "slots", "--runs", "1", "--out", str(out), "--name", "r"),
                *("--on-check-failure", choice),
            )
            assert run_bench(args) == 0
            assert len(server.requests) == requests
        (run,) = read_log(out / "r.jsonl")["runs"]
        assert run["final_valid"] is valid
        scores = {f["path"]: f["score"] for f in run["accuracy"]["fields"]}
        assert scores["summary"] == 0.0
        if valid:
            assert run["flagged"] == ["/summary"]
            assert run["final"]["summary"] == "[Text]"
            assert "summary" not in run["degenerate"]["any"]
            assert scores["sentiment"] == 1.0
        args = _parse(
            *("--tasks", str(tmp_path / "tasks"), "--out", str(out), "--name", "r", "--rescore")
        )
        assert run_bench(args) == 0
        (rescored,) = read_log(out / "r.jsonl")["runs"]
        assert rescored["accuracy"] == run["accuracy"]
    assert read_log(tmp_path / "accept" / "r.jsonl")["config"]["on_check_failure"] == "accept"
    assert "on_check_failure" not in read_log(tmp_path / "error" / "r.jsonl")["config"]


def test_a_flagged_value_scores_0_where_the_gold_has_no_value_either() -> None:
    """A flagged brand where the gold has none, a flagged whole list and a flagged list
    item: none is scored right; the fields around them are scored as before."""
    (task,) = [t for t in load_tasks(TASKS_DIR, ["product"]) if t.id == "product-011"]
    gold = task.gold
    assert gold["brand"] is None and "features" in gold
    final = {**gold, "brand": "Acme", "features": [*gold["features"], "junk"]}

    def scores(flagged: list[str]) -> dict[str, float]:
        fields = task_scores(task, final, valid=True, flagged=flagged)
        assert fields is not None
        return {f.path: f.score for f in fields}

    plain = scores([])
    assert plain["brand"] == 0.0 and 0.0 < plain["features[]"] < 1.0
    assert scores(["/brand"])["brand"] == 0.0  # as absent it would agree with the gold
    item = len(gold["features"])
    assert scores([f"/features/{item}"])["features[]"] == plain["features[]"]
    assert scores(["/features"])["features[]"] == 0.0
    assert {
        k: v for k, v in scores(["/brand", "/features"]).items() if k not in {"brand", "features[]"}
    } == {k: v for k, v in plain.items() if k not in {"brand", "features[]"}}
    assert scores(["/no/such/field", "~bad"]) == plain
