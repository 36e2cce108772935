"""What the checks record of a list-of-objects item (the values it tried, the rejected
value held for it) follows the item when an item before it is taken out and positions
shift: a value counts as written again only for the item that wrote it, and a held
value is kept only for that item."""

from __future__ import annotations

from typing import Any

from slotflight import Assembler, CheckSettings, compile
from slotflight.assemble.checks import CheckFailure, CheckState
from slotflight.assemble.events import Diagnostic, Event, SlotComplete, SlotRejected
from slotflight.plan.model import Slot
from tests.assembler_support import retry_targets, task_list_schema

_ITEMS = task_list_schema({"type": "string"})
PLAN = compile(_ITEMS)


def no_todo(slot: Slot, value: Any, state: CheckState) -> CheckFailure | None:
    if isinstance(value, str) and value.startswith("TODO"):
        return CheckFailure("todo", "is a to-do note")
    return None


def _run(text: str, **settings: Any) -> tuple[Assembler, list[Event]]:
    checks = CheckSettings(checks=[no_todo], input_text="TODO call Ada", **settings)
    assembler = Assembler(PLAN, checks=checks)
    events = assembler.feed(text) + assembler.close()
    return assembler, events


def _retry(assembler: Assembler, text: str) -> list[Event]:
    assembler.begin_retry()
    return assembler.feed(text) + assembler.close()


def _rejections(events: list[Event]) -> list[tuple[str, str, str]]:
    return [(e.path, e.code, e.action) for e in events if isinstance(e, SlotRejected)]


def test_an_item_writing_a_dropped_item_s_value_is_not_confirmed() -> None:
    """The second item writes the value rejected of the first for the first time: it is
    rejected too, not confirmed as if written again."""
    assembler, events = _run("items:\n- task: TODO call Ada\n- task: TODO call Ada\nend\n")
    assert _rejections(events) == [
        ("/items/0/task", "todo", "retry"),
        ("/items/0/task", "todo", "retry"),
    ]
    assert not any(isinstance(e, Diagnostic) and e.code == "check_confirmed" for e in events)
    assert retry_targets(assembler) == [
        ("/items/0/task", "TODO call Ada"),
        ("/items/1/task", "TODO call Ada"),
    ]


def test_a_dropped_item_written_again_at_its_new_position_is_confirmed() -> None:
    assembler, _ = _run("items:\n- task: TODO call Ada\n- task: Fix the login page\nend\n")
    assert retry_targets(assembler) == [("/items/1/task", "TODO call Ada")]
    events = _retry(assembler, "task[1]: TODO call Ada\nend\n")
    assert assembler.outcome.ok
    assert assembler.result == {
        "items": [{"task": "Fix the login page"}, {"task": "TODO call Ada"}]
    }
    assert "check_confirmed" in [e.code for e in events if isinstance(e, Diagnostic)]
    assert assembler.flagged() == {}


def test_a_value_written_again_for_a_dropped_item_settles_it() -> None:
    """With ``on_failure="error"``: the same value written again (the input does not
    hold it) fails the field at once, naming the value tried."""
    text = "items:\n- task: TODO one\n- task: Fix the login page\nend\n"
    assembler, _ = _run(text, on_failure="error", max_attempts=3)
    events = _retry(assembler, "task[1]: TODO one\nend\n")
    assert _rejections(events) == [("/items/1/task", "todo", "fail")]
    assert "values tried: 'TODO one'" in assembler.outcome.errors[0].message


def test_a_held_value_is_not_kept_for_the_item_that_took_the_position() -> None:
    """The retry writes nothing: the value held for the dropped item does not fill the
    next item's missing field."""
    assembler, _ = _run("items:\n- task: TODO one\n- owner: Bob\nend\n")
    assert retry_targets(assembler) == [("/items/0/task", None), ("/items/1/task", "TODO one")]
    events = _retry(assembler, "end\n")
    assert assembler.state == {"items": [{"owner": "Bob"}]}
    assert not any(isinstance(e, SlotComplete) and e.value == "TODO one" for e in events)
    assert not assembler.outcome.ok


def test_a_held_value_follows_its_item_back() -> None:
    """A later field brings the dropped item back: the value held for it is kept there
    when the retry writes nothing acceptable."""
    text = "task[0]: TODO one\ntask[1]: Fix the login page\nowner[0]: Bob\nend\n"
    assembler, _ = _run(text)
    assert assembler.state == {"items": [{"task": "Fix the login page"}, {"owner": "Bob"}]}
    assert retry_targets(assembler) == [("/items/1/task", "TODO one")]
    _retry(assembler, "end\n")
    assert assembler.outcome.ok
    assert assembler.result == {
        "items": [{"task": "Fix the login page"}, {"owner": "Bob", "task": "TODO one"}]
    }
    assert list(assembler.flagged()) == ["/items/1/task"]
