"""A list-of-objects item whose every field failed leaves the state and the next item
takes its position: the failure must not stay on that position, or the follow-up asks
for a value the state holds, gets a duplicate frame, and the valid object fails."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from slotflight import Assembler, CheckSettings, compile
from slotflight._errors import ErrorDetail
from slotflight.assemble.events import SlotRejected
from slotflight.assemble.results import SlotResults
from tests.assembler_support import retry_targets, task_list_schema

_ITEMS = task_list_schema({"type": "string", "minLength": 3})
PLAN = compile(_ITEMS)
_WITH_TAGS: dict[str, Any] = {
    **_ITEMS,
    "properties": {
        **_ITEMS["properties"],
        "tags": {"type": "array", "items": {"type": "string", "minLength": 3}},
    },
}


def _run(text: str, checks: CheckSettings | None = None) -> Assembler:
    assembler = Assembler(PLAN, checks=checks)
    assembler.feed(text)
    assembler.close()
    return assembler


def test_a_failed_first_item_is_asked_for_as_a_new_item() -> None:
    assembler = _run("items:\n- task: x\n- task: Fix the login page\nend\n")
    assert assembler.state == {"items": [{"task": "Fix the login page"}]}
    assert not assembler.outcome.ok
    assert retry_targets(assembler) == [("/items/1/task", "x")]
    _, events = assembler.begin_retry()
    assert events[0].to_json()["reasons"][0]["location"] == "/items/1/task"
    assembler.feed("task[1]: Write the notes\nend\n")
    assembler.close()
    assert assembler.outcome.ok
    assert assembler.result == {
        "items": [{"task": "Fix the login page"}, {"task": "Write the notes"}]
    }


def test_an_item_a_check_rejected_does_not_take_the_next_ones_place() -> None:
    text = "items:\n- task: [Triage]\n- task: Fix the login page\nowner: Ada Lovelace\nend\n"
    assembler = _run(text, CheckSettings())
    assert assembler.state == {"items": [{"task": "Fix the login page", "owner": "Ada Lovelace"}]}
    assert retry_targets(assembler) == [("/items/1/task", "[Triage]")]


def test_a_later_field_of_a_dropped_item_takes_its_failures_back() -> None:
    # item 0 and item 1 fail and leave; owner[0] brings item 0 back at position 0
    assembler = _run("task[0]: x\ntask[1]: y\nowner[0]: Bob\ntask[2]: Fix it\nend\n")
    assert assembler.state == {"items": [{"owner": "Bob"}, {"task": "Fix it"}]}
    assert retry_targets(assembler) == [("/items/0/task", "x"), ("/items/2/task", "y")]


def test_an_accepted_value_clears_a_failure_under_its_key() -> None:
    results = SlotResults()
    task, _, tags, *_ = compile(_WITH_TAGS).slots
    assert (task.path, tags.path) == ("items[].task", "tags[]")
    for slot in (task, tags):
        results.fail(slot, (slot.id, 0), ErrorDetail("string_too_short", "too short"))
    results.accept((task.id, 0), "/items/0/task", "Fix it")
    results.accept((tags.id, 0), "/tags/0", "ok")
    # a list of scalars with a failed item is asked for again as a whole
    assert list(results.failed) == [(tags.id, 0)]


def _written(kinds: tuple[str, ...], late: bool) -> str:
    """Item ``k`` of ``kinds``: a valid task, a task too short, or a task too short
    with an owner; ``late``: the owners come after every task."""
    lines: list[str] = []
    owners: list[str] = []
    for k, kind in enumerate(kinds):
        lines.append(f"task[{k}]: {'Task ' if kind == 'good' else 'x'}{k}")
        if kind == "owned":
            (owners if late else lines).append(f"owner[{k}]: Owner {k}")
    return "\n".join([*lines, *owners, "end", ""])


@pytest.mark.parametrize("late", [False, True])
def test_every_written_item_is_kept_or_asked_for_again(late: bool) -> None:
    for n in range(1, 5):
        for kinds in itertools.product(("good", "bad", "owned"), repeat=n):
            assembler = _run(_written(kinds, late))
            items = assembler.state.get("items", [])
            completed = assembler.completed()
            targets = retry_targets(assembler)
            assert all(pointer not in completed for pointer, _ in targets), kinds
            # each target names the item the model wrote: its owner, or a new item
            for pointer, written in targets:
                assert written is not None
                position = int(pointer.split("/")[2])
                if position < len(items):
                    assert items[position] == {"owner": f"Owner {written[1:]}"}, kinds
            assert len(items) + sum(int(p.split("/")[2]) >= len(items) for p, _ in targets) == n
            if not targets:
                continue
            assembler.begin_retry()
            answers = [f"task[{p.split('/')[2]}]: Again {w}" for p, w in targets]
            assembler.feed("\n".join([*answers, "end", ""]))
            assembler.close()
            assert assembler.outcome.ok, kinds
            assert len(assembler.result["items"]) == n


def test_a_rejected_item_is_reported_once() -> None:
    assembler = Assembler(PLAN, checks=CheckSettings())
    events = assembler.feed("items:\n- task: [Triage]\n- task: Fix the login page\nend\n")
    events += assembler.close()
    assert [e.code for e in events if isinstance(e, SlotRejected)] == ["placeholder"]
    assert [e.code for e in assembler.outcome.errors] == ["placeholder"]
