"""The benchmark task files, their gold answers and the schemas they target."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from slotflight.bench.accuracy import score_object
from slotflight.bench.models import MAX_TASK_LINE_BYTES, SCHEMAS, TASKS_DIR, Task, load_tasks

TASK_FILES = sorted(TASKS_DIR.glob("*.jsonl"))


def raw_lines() -> list[tuple[Path, dict[str, Any]]]:
    rows = []
    for path in TASK_FILES:
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                rows.append((path, json.loads(line)))
    return rows


def test_one_task_file_per_schema() -> None:
    assert {p.stem for p in TASK_FILES} == set(SCHEMAS)


def test_every_line_is_a_well_formed_task() -> None:
    rows = raw_lines()
    assert rows
    for path, row in rows:
        assert set(row) == {"id", "schema", "input", "instructions", "gold"}, row
        assert row["schema"] == path.stem
        assert row["id"].startswith(f"{row['schema']}-")
        assert all(isinstance(row[k], str) for k in row if k != "gold")
        assert 300 <= len(row["input"]) <= 1200, row["id"]
        instructions = row["instructions"]
        assert instructions.strip() == instructions
        assert "\n" not in instructions
        assert 10 <= len(instructions) <= 200


def test_ids_are_unique_and_each_schema_has_enough_tasks() -> None:
    rows = raw_lines()
    ids = [row["id"] for _, row in rows]
    assert len(ids) == len(set(ids))
    per_schema = Counter(row["schema"] for _, row in rows)
    assert set(per_schema) == set(SCHEMAS)
    assert all(count == 10 for count in per_schema.values()), per_schema
    assert len(rows) == 50


@pytest.mark.parametrize("task", load_tasks(), ids=lambda t: t.id)
def test_every_gold_answer_validates_and_scores_one_against_itself(task: Task) -> None:
    assert task.gold is not None
    task.model.model_validate_json(json.dumps(task.gold), strict=True)
    schema = task.model.model_json_schema()
    assert {f.score for f in score_object(schema, task.gold, task.gold)} == {1.0}


def test_ticket_gold_values_are_stated_in_the_input() -> None:
    """The extraction schema's answers are in the text, written as the text writes them."""
    for task in load_tasks(schemas=["ticket"]):
        gold = task.gold
        assert gold is not None
        assert gold["customer_name"] in task.input, task.id
        assert gold["order_id"] in task.input, task.id
        if gold["amount"] is not None:
            assert f"{gold['amount']:.2f}" in task.input, task.id


def test_ticket_tasks_cover_every_answer_and_leave_some_fields_out() -> None:
    golds = [t.gold for t in load_tasks(schemas=["ticket"]) if t.gold is not None]
    schema = SCHEMAS["ticket"].model_json_schema()["properties"]
    for name in ("issue_type", "sentiment"):
        assert {g[name] for g in golds} == set(schema[name]["enum"]), name
    assert {g["refund_requested"] for g in golds} == {True, False}
    assert sum(g["amount"] is None for g in golds) >= 2
    assert sum(g["order_date"] is None for g in golds) >= 2


def test_inputs_are_varied_and_not_only_ascii() -> None:
    rows = raw_lines()
    inputs = [row["input"] for _, row in rows]
    assert len(set(inputs)) == len(inputs)
    for schema in SCHEMAS:
        texts = [row["input"] for _, row in rows if row["schema"] == schema]
        assert any(not text.isascii() for text in texts), schema
    everything = "".join(inputs)
    assert "€" in everything
    assert any("\uac00" <= ch <= "\ud7a3" for ch in everything)  # Hangul
    assert any("\u3040" <= ch <= "\u9fff" for ch in everything)  # kana or kanji


def test_load_tasks_reads_every_file() -> None:
    tasks = load_tasks()
    assert [t.id for t in tasks] == [row["id"] for _, row in raw_lines()]
    assert all(isinstance(t, Task) for t in tasks)
    first = tasks[0]
    with pytest.raises(AttributeError):
        first.id = "changed"  # type: ignore[misc]
    assert first.model is SCHEMAS[first.schema]


def test_load_tasks_filters_by_schema() -> None:
    tasks = load_tasks(schemas=["meeting", "product"])
    assert {t.schema for t in tasks} == {"meeting", "product"}
    assert len(tasks) == sum(1 for _, row in raw_lines() if row["schema"] in {"meeting", "product"})
    with pytest.raises(ValueError, match="unknown schema"):
        load_tasks(schemas=["recipes"])


def test_load_tasks_reports_bad_lines(tmp_path: Path) -> None:
    good = {"id": "triage-1", "schema": "triage", "input": "text", "instructions": "do it"}
    (tmp_path / "a.jsonl").write_text(json.dumps(good) + "\n\n", encoding="utf-8")
    assert load_tasks(tmp_path) == [Task("triage-1", "triage", "text", "do it")]

    (tmp_path / "b.jsonl").write_text(json.dumps({**good, "id": "x", "gold": {"priority": 9}}))
    with pytest.raises(ValueError, match=r"b\.jsonl:1: the gold answer does not validate"):
        load_tasks(tmp_path)

    (tmp_path / "b.jsonl").write_text(json.dumps(good) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"b\.jsonl:1: duplicate task id"):
        load_tasks(tmp_path)

    (tmp_path / "b.jsonl").write_text(json.dumps({**good, "schema": "nope", "id": "x"}))
    with pytest.raises(ValueError, match=r"b\.jsonl:1: unknown schema"):
        load_tasks(tmp_path)

    (tmp_path / "b.jsonl").write_text('{"id": "x", "schema": "triage"}\n')
    with pytest.raises(ValueError, match="optional 'gold'"):
        load_tasks(tmp_path)

    (tmp_path / "b.jsonl").write_text("\n{not json\n")
    with pytest.raises(ValueError, match=r"b\.jsonl:2: not JSON"):
        load_tasks(tmp_path)


def test_load_tasks_names_the_line_that_is_not_utf8(tmp_path: Path) -> None:
    good = {"id": "triage-1", "schema": "triage", "input": "text", "instructions": "do it"}
    (tmp_path / "b.jsonl").write_bytes(json.dumps(good).encode() + b"\n\xff\xfe{}\n")
    with pytest.raises(ValueError, match=r"^b\.jsonl:2: not UTF-8 text \(byte 0xff at offset 0\)"):
        load_tasks(tmp_path)


def test_load_tasks_refuses_a_line_longer_than_the_bound(tmp_path: Path) -> None:
    """A file that is not a task file (one huge line) is refused after reading at most
    the bound of that line, not read whole."""
    long_input = "x" * MAX_TASK_LINE_BYTES
    task = {"id": "t", "schema": "triage", "input": long_input, "instructions": "do it"}
    (tmp_path / "a.jsonl").write_text(json.dumps(task) + "\n", encoding="utf-8")
    limit = f"{MAX_TASK_LINE_BYTES:,}"
    with pytest.raises(ValueError, match=rf"^a\.jsonl:1: a task line is longer than {limit} bytes"):
        load_tasks(tmp_path)
    shorter = {**task, "input": "x" * (MAX_TASK_LINE_BYTES - 200)}
    (tmp_path / "a.jsonl").write_text(json.dumps(shorter) + "\n", encoding="utf-8")
    assert [t.id for t in load_tasks(tmp_path)] == ["t"]


# --------------------------------------------------------------------------- schemas


def array_depths(node: Any, defs: dict[str, Any], inside_array: bool = False) -> list[bool]:
    """For each array in the schema, whether it sits inside another array's items."""
    if isinstance(node, list):
        return [d for item in node for d in array_depths(item, defs, inside_array)]
    if not isinstance(node, dict):
        return []
    if "$ref" in node:
        return array_depths(defs[node["$ref"].rsplit("/", 1)[1]], defs, inside_array)
    found: list[bool] = []
    if node.get("type") == "array":
        found.append(inside_array)
        return found + array_depths(node.get("items"), defs, True)
    for key in ("properties", "anyOf"):
        value = node.get(key)
        if isinstance(value, dict):
            found += array_depths(list(value.values()), defs, inside_array)
        elif isinstance(value, list):
            found += array_depths(value, defs, inside_array)
    return found


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_schema_generates_with_descriptions_and_flat_arrays(name: str) -> None:
    model = SCHEMAS[name]
    schema = model.model_json_schema()
    json.dumps(schema)
    assert schema["type"] == "object"
    assert schema.get("description")
    assert all(prop.get("description") for prop in schema["properties"].values())
    assert schema.get("additionalProperties") is False
    depths = array_depths(schema, schema.get("$defs", {}))
    assert bool(depths) is (name != "ticket"), "every schema but the flat ticket has an array"
    assert not any(depths), "no array inside array items"


VALID: dict[str, dict[str, Any]] = {
    "triage": {
        "summary": "Customer was charged twice for the annual plan.",
        "sentiment": "negative",
        "priority": 4,
        "needs_human": True,
        "product_area": "billing",
        "tags": ["refund", "duplicate-charge"],
        "action_items": [
            {"description": "Refund the duplicate charge", "owner": "billing team", "due": None},
            {"description": "Reply to Margaux", "owner": "Léa Martin", "due": "2024-03-08"},
        ],
    },
    "product": {
        "name": "WH-1000XM5",
        "brand": "Sony",
        "price": 348,
        "currency": "USD",
        "in_stock": True,
        "rating": 4.6,
        "dimensions": {"width_cm": 27, "height_cm": 20, "depth_cm": 8.5},
        "features": ["Noise cancellation", "30 h battery"],
    },
    "outline": {
        "title": "Idempotency Keys",
        "audience": "practitioner",
        "sections": [
            {"heading": "Why Retries Duplicate", "summary": "Networks fail.", "est_words": 400},
            {"heading": "Designing the Key", "summary": "UUIDs per call.", "est_words": 600},
        ],
        "reading_time_min": 8,
    },
    "meeting": {
        "title": "Weekly product sync",
        "date": "2024-03-12",
        "attendees": ["Hannah Schmidt", "Luis Ortega"],
        "decisions": ["Ship the fix in 5.13"],
        "action_items": [{"task": "Merge the fix", "owner": "Luis Ortega", "due": "2024-03-14"}],
        "next_meeting": "2024-03-19",
    },
    "ticket": {
        "customer_name": "Ingrid Solberg",
        "order_id": "LH-204518",
        "product": "electric_kettle",
        "issue_type": "damaged_in_transit",
        "sentiment": "negative",
        "refund_requested": True,
        "amount": 59.9,
        "order_date": "2025-02-03",
    },
}

INVALID: list[tuple[str, dict[str, Any]]] = [
    ("triage", {"priority": 6}),
    ("triage", {"priority": "4"}),
    ("triage", {"sentiment": "angry"}),
    ("triage", {"tags": []}),
    ("triage", {"tags": ["a", "b", "c", "d", "e", "f"]}),
    ("triage", {"summary": "x" * 201}),
    ("triage", {"product_area": "shipping"}),
    ("product", {"currency": "usd"}),
    ("product", {"price": -1}),
    ("product", {"rating": 5.5}),
    ("product", {"dimensions": {"width_cm": 1, "height_cm": 2}}),
    ("product", {"in_stock": "yes"}),
    ("outline", {"sections": []}),
    ("outline", {"audience": "kids"}),
    ("outline", {"reading_time_min": 0}),
    ("meeting", {"date": "12 March 2024"}),
    ("meeting", {"attendees": []}),
    ("meeting", {"surprise": 1}),
    ("ticket", {"amount": 12.345}),
    ("ticket", {"amount": -1.0}),
    ("ticket", {"product": "toaster"}),
    ("ticket", {"order_id": "LH"}),
    ("ticket", {"order_date": "3 February 2025"}),
]


@pytest.mark.parametrize("name", sorted(VALID))
def test_valid_example_passes_strict_validation(name: str) -> None:
    model: type[BaseModel] = SCHEMAS[name]
    model.model_validate_json(json.dumps(VALID[name]), strict=True)


@pytest.mark.parametrize("optional", ["brand", "rating", "dimensions"])
def test_optional_product_fields_may_be_left_out(optional: str) -> None:
    data = {k: v for k, v in VALID["product"].items() if k != optional}
    SCHEMAS["product"].model_validate_json(json.dumps(data), strict=True)


@pytest.mark.parametrize(("name", "change"), INVALID)
def test_constraints_reject_bad_values(name: str, change: dict[str, Any]) -> None:
    data = {**VALID[name], **change}
    with pytest.raises(ValueError):
        SCHEMAS[name].model_validate_json(json.dumps(data), strict=True)
