"""The degenerate-value detectors that share the slot checks' value rules
(``placeholder``, ``quoted``, ``digit_run``, ``schema_copy``, ``list_repeat``): each on
its minimal case, every detector silent on every gold answer of the task set, and one
object judged alike whichever mode wrote it."""

from __future__ import annotations

from typing import Any

import pytest

from slotflight.assemble.value_rules import InputText
from slotflight.bench.accuracy import DETECTORS, detect_degenerate, schema_examples
from slotflight.bench.models import (
    ArticleOutline,
    MeetingNotes,
    OrderTicket,
    SupportTriage,
    Task,
    load_tasks,
)
from slotflight.bench.runner import rescore, slot_identifiers, task_degenerate
from slotflight.plan.compiler import compile as compile_schema

TRIAGE = SupportTriage.model_json_schema()
MEETING = MeetingNotes.model_json_schema()
OUTLINE = ArticleOutline.model_json_schema()
TICKET = OrderTicket.model_json_schema()
NEW = ("placeholder", "quoted", "digit_run", "schema_copy", "list_repeat")

TRIAGE_OBJ: dict[str, Any] = {
    "summary": "The nightly CSV export fails with a timeout.",
    "sentiment": "negative",
    "priority": 3,
    "needs_human": False,
    "product_area": "data_export",
    "tags": ["export", "timeout"],
    "action_items": [
        {"description": "Raise the export timeout", "owner": "data team", "due": None},
        {"description": "Tell the customer when it is fixed", "owner": "support team"},
    ],
}
INPUT = "Triage this ticket.\n\nOur nightly CSV export (1.5 GB, 3 files) fails with a timeout."


def flags(schema: dict[str, Any], obj: Any, text: str = INPUT, **kw: Any) -> dict[str, set[str]]:
    found = detect_degenerate(schema, obj, input_text=text, **kw)
    return {name: set(paths) for name, paths in found.flags.items() if paths}


def test_the_new_detectors_are_reported_after_the_first_four() -> None:
    assert DETECTORS[:4] == ("slot_id", "example_copy", "repeated", "empty")
    assert DETECTORS[4:] == NEW


def test_a_well_formed_object_flags_nothing() -> None:
    assert flags(TRIAGE, TRIAGE_OBJ) == {}


# --------------------------------------------------------------------------- placeholder


@pytest.mark.parametrize(
    ("change", "path"),
    [
        ({"tags": ["export", "1"]}, "tags[]"),
        ({"tags": ["export", 2]}, "tags[]"),  # a number where text belongs (a JSON mode)
        ({"summary": "[5]"}, "summary"),
        ({"summary": "[Triage]"}, "summary"),
        ({"summary": "<name>"}, "summary"),
        # "1" and "5" stand in the input only inside "1.5 GB": not stated as a number
        (
            {"action_items": [{"description": "Raise the timeout", "owner": "1"}]},
            "action_items[].owner",
        ),
        ({"tags": ["5"]}, "tags[]"),
    ],
)
def test_placeholder_flags_bare_numbers_and_bracketed_words(
    change: dict[str, Any], path: str
) -> None:
    assert flags(TRIAGE, {**TRIAGE_OBJ, **change}) == {"placeholder": {path}}


def test_placeholder_lets_through_a_number_the_input_states() -> None:
    # "3 files": a number the input states as a whole is an answer in a text field.
    owner = {**TRIAGE_OBJ["action_items"][0], "owner": "3"}
    assert flags(TRIAGE, {**TRIAGE_OBJ, "action_items": [owner]}) == {}
    # Number fields are not text: a priority of 1 is no placeholder.
    assert flags(TRIAGE, {**TRIAGE_OBJ, "priority": 1}) == {}
    # Without the input the same "3" is a placeholder.
    assert flags(TRIAGE, {**TRIAGE_OBJ, "action_items": [owner]}, text="") == {
        "placeholder": {"action_items[].owner"}
    }


def test_a_bare_number_item_of_a_list_of_texts_is_a_placeholder_even_when_stated() -> None:
    # A tag "3" copies the input's "3 files" (or counts the list's items): no pass.
    assert flags(TRIAGE, {**TRIAGE_OBJ, "tags": ["export", "3"]}) == {"placeholder": {"tags[]"}}


def test_a_stated_number_is_a_whole_number_of_the_input() -> None:
    source = InputText("on 3 March, €1,188.00, 1.5 kg, rated 4.9/5, ships in 1-2 days, apt 12.")
    assert source.states_number("3") and source.states_number("12")
    for part in ("1", "188", "00", "5", "9", "2"):
        assert not source.states_number(part), part


# --------------------------------------------------------------------------- quoted, digit_run


def test_quoted_flags_a_value_wrapped_in_quotes() -> None:
    quoted = {**TRIAGE_OBJ, "summary": '"The nightly export fails."', "tags": ["“export”"]}
    assert flags(TRIAGE, quoted) == {"quoted": {"summary", "tags[]"}}
    inner = {**TRIAGE_OBJ, "summary": 'The "nightly" export fails.', "tags": ['"a" and "b"']}
    assert flags(TRIAGE, inner) == {}


def test_digit_run_flags_runs_of_numbers_in_text_fields() -> None:
    run = {**TRIAGE_OBJ, "summary": "1,3,2,1,1,2,…", "tags": ["4 5 6 7 8"]}
    assert flags(TRIAGE, run) == {"digit_run": {"summary", "tags[]"}}
    # A grouped number is a number, and three numbers apart are not a run.
    assert flags(TRIAGE, {**TRIAGE_OBJ, "summary": "1,188,000"}) == {}
    assert flags(TRIAGE, {**TRIAGE_OBJ, "summary": "Fails at 3 or 4 GB"}) == {}


def test_shaped_fields_are_judged_by_their_own_shape() -> None:
    """A field with a ``format`` (dates) defines its shape: no placeholder, quotes or
    digit-run rule applies there, as in the slot checks."""
    gold = {"title": "Weekly sync", "date": "2024-03-12", "attendees": ["Ana Lopez"]}
    odd = {**gold, "decisions": [], "action_items": [], "next_meeting": "1"}
    assert "placeholder" not in flags(MEETING, odd, text="")


# --------------------------------------------------------------------------- schema_copy


def test_schema_copy_flags_the_class_name_titles_and_description_examples() -> None:
    copied = {
        **TRIAGE_OBJ,
        "summary": "Support Triage",  # the class name, spaced
        "tags": ["Tags"],  # a field's title
        "action_items": [
            {
                "description": "What has to be done, as an imperative sentence.",
                "owner": "Léa Martin",
            }
        ],
    }
    found = flags(TRIAGE, copied, model_name="SupportTriage")
    assert found.pop("schema_copy") == {
        "summary",
        "tags[]",
        "action_items[].description",
        "action_items[].owner",
    }
    # A whole description, or a value equal to a title however short, is also an
    # example copy (the schema's own words).
    assert found == {"example_copy": {"action_items[].description", "tags[]"}}


def test_schema_copy_spares_what_the_input_says() -> None:
    with_lea = "Triage this.\n\nLéa Martin from billing asked us to look at the export."
    owner = {**TRIAGE_OBJ, "action_items": [{"description": "Fix it", "owner": "Léa Martin"}]}
    assert flags(TRIAGE, owner, text=with_lea) == {}
    # A lowercase example ("billing team") is vocabulary an answer may use.
    team = {**TRIAGE_OBJ, "action_items": [{"description": "Refund", "owner": "billing team"}]}
    assert flags(TRIAGE, team) == {}
    # Enum values equal to a title are not copies (their few values recur rightly).
    assert "schema_copy" not in flags(TICKET, {"product": "blender"}, text="")


def test_schema_copy_flags_a_field_name_written_with_an_index() -> None:
    """The follow-up's names for the fields it asks for, written back as values (seen in
    SmolLM2's triage retries: tags ``description[0] was not taken:``, an owner
    ``owner[1]``), are copies of the form like its titles."""
    copied = {
        **TRIAGE_OBJ,
        "tags": ["description[0] was not taken:", "export"],
        "action_items": [{"description": "Raise the export timeout", "owner": "owner[1]"}],
    }
    found = flags(TRIAGE, copied)
    assert found.pop("schema_copy") == {"tags[]", "action_items[].owner"}
    assert "schema_copy" not in flags(TRIAGE, {**TRIAGE_OBJ, "tags": ["items[0]"]})


# --------------------------------------------------------------------------- list_repeat


def test_list_repeat_flags_items_of_a_list_of_strings_repeating_each_other() -> None:
    same = {**TRIAGE_OBJ, "tags": ["export", "timeout", "Export"]}
    assert flags(TRIAGE, same) == {"list_repeat": {"tags[]"}, "repeated": {"tags[]"}}
    meeting = {
        "title": "Weekly sync",
        "date": "2024-03-12",
        "attendees": ["Ana Lopez"],
        "decisions": ["Ship the beta on Friday", "Ship the beta on Friday!!", "Hire"],
        "action_items": [],
    }
    assert flags(MEETING, meeting, text="")["list_repeat"] == {"decisions[]"}  # a near copy
    apart = {**meeting, "decisions": ["Ship the beta on Friday", "Ship the docs on Monday"]}
    assert "list_repeat" not in flags(MEETING, apart, text="")


def test_list_repeat_flags_the_text_fields_of_a_repeated_item() -> None:
    item = {"description": "Raise the export timeout", "owner": "data team", "due": None}
    five = {**TRIAGE_OBJ, "action_items": [item] * 4}
    assert flags(TRIAGE, five) == {
        "list_repeat": {"action_items[].description", "action_items[].owner"}
    }
    # Numbers are not compared: a section repeated with another word count repeats.
    section = {"heading": "Why sleep matters", "summary": "Teenagers need nine hours."}
    outline = {
        "title": "Sleep and school",
        "audience": "general",
        "sections": [{**section, "est_words": 300}, {**section, "est_words": 400}],
        "reading_time_min": 4,
    }
    assert flags(OUTLINE, outline, text="")["list_repeat"] == {
        "sections[].heading",
        "sections[].summary",
    }


def test_items_sharing_some_fields_are_not_repeats() -> None:
    """Two action items may share an owner, or a task with another owner."""
    shared = [
        {"description": "Raise the export timeout", "owner": "data team"},
        {"description": "Tell the customer", "owner": "data team"},
        {"description": "Tell the customer", "owner": "support team"},
    ]
    assert flags(TRIAGE, {**TRIAGE_OBJ, "action_items": shared}) == {}


def test_a_right_value_is_never_flagged() -> None:
    odd = {**TRIAGE_OBJ, "tags": ["1", "1"], "summary": '"quoted"'}
    assert not detect_degenerate(TRIAGE, odd, odd).any


# --------------------------------------------------------------------------- gold and modes

TASKS = load_tasks()


@pytest.mark.parametrize("task", TASKS, ids=lambda t: t.id)
def test_gold_answers_survive_every_detector(task: Task) -> None:
    """Every gold object of the task set: judged as the benchmark judges it (with its
    gold), no detector flags a value; judged without its gold (no value counts as
    right), only ``repeated`` does, by design (an owner who is also an attendee: the
    right-value rule is what spares them), and none of the value rules does."""
    assert task.gold is not None
    judged = task_degenerate(task, task.gold, schema_examples(task.model.model_json_schema()))
    assert judged is not None and not judged.any, judged.to_json()
    schema = task.model.model_json_schema()
    blind = detect_degenerate(
        schema,
        task.gold,
        identifiers=slot_identifiers(compile_schema(task.model)),
        examples=schema_examples(schema),
        input_text=f"{task.instructions}\n\n{task.input}",
        model_name=task.model.__name__,
    )
    assert {name for name, paths in blind.flags.items() if paths} <= {"repeated"}, blind.to_json()


def test_every_mode_s_object_is_judged_alike() -> None:
    """The detectors read the final object, the schema and the input: the same object
    written by ``slots``, ``json_schema`` or ``json_prompt`` gets the same flags."""
    task = next(t for t in TASKS if t.schema == "triage")
    junk = {
        **(task.gold or {}),
        "tags": ["1", '"refund"', "1,2,3,4", "SupportTriage"],
        "action_items": [{"description": "Refund it", "owner": "Léa Martin"}] * 2,
    }
    base = {"task": task.id, "schema": task.schema, "final": junk, "final_valid": True}
    judged = [
        rescore({**base, "mode": mode, "examples": []}, {task.id: task})["degenerate"]
        for mode in ("slots", "json_schema", "json_prompt")
    ]
    assert judged[0] == judged[1] == judged[2]
    assert {name for name in NEW if judged[0]["flags"][name]} == set(NEW)
