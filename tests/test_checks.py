"""Slot checks in the core: each fires on its minimal case, stays silent on gold values,
and settles what the model cannot mend (see ``slotflight/assemble/checks.py``)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field

from slotflight import Assembler, CheckFailure, CheckState, Slot, compile, render_frames
from slotflight.assemble.checks import CHECK_CODES, CheckSettings
from slotflight.assemble.events import (
    Diagnostic,
    Event,
    PassFailed,
    SlotComplete,
    SlotDelta,
    SlotFailed,
    SlotRejected,
)
from slotflight.assemble.text_rules import (
    description_examples,
    is_digit_run,
    is_placeholder,
    name_words,
    needless_quotes,
    word_tokens,
)
from slotflight.assemble.value_rules import FORM_NOTE
from slotflight.bench.models import SCHEMAS, TASKS_DIR, load_tasks
from slotflight.prompting.prompt import prompt
from tests.assembler_support import split_at
from tests.client_support import written


class Note(BaseModel):
    """A note about one customer."""

    title: str
    heading: str
    owner: str = Field(description="Who follows up, e.g. 'Léa Martin' or 'billing team'.")
    tags: list[str] = Field(default_factory=list, max_length=6)
    comment: str | None = None


class Item(BaseModel):
    task: str
    owner: str


class Board(BaseModel):
    title: str
    items: list[Item] = Field(max_length=4)


class Labels(BaseModel):
    names: list[str] = Field(min_length=2, max_length=6)


class Minutes(BaseModel):
    title: str
    attendees: list[str] = Field(max_length=8)
    decisions: list[str] = Field(max_length=8)


class Address(BaseModel):
    billing: str
    shipping: str = Field(json_schema_extra={"x-slotflight-allow-repeat": True})


class Loose(BaseModel):
    code: str = Field(json_schema_extra={"x-slotflight-checks": ["quoted"]})
    note: str = Field(json_schema_extra={"x-slotflight-checks": False})


INPUT = "Ada Lovelace wrote about the export failing for large files; Lin Wu will look."


def run(
    model: type[BaseModel],
    *frames: tuple[Any, ...],
    input_text: str = INPUT,
    **options: Any,
) -> tuple[Assembler, list[Event]]:
    """One pass of ``frames`` (``(slot_id, value)`` or ``(slot_id, value, index)``)."""
    settings_ = CheckSettings(input_text=input_text, **options)
    assembler = Assembler(compile(model), checks=settings_)
    text = written(model, *frames)
    events = assembler.feed(text) + assembler.close()
    return assembler, events


def rejected(events: list[Event]) -> list[tuple[str, str, str]]:
    return [(e.slot, e.code, e.action) for e in events if isinstance(e, SlotRejected)]


def note(**values: str) -> list[tuple[Any, ...]]:
    base = {"title": "Export fails on large files", "heading": "Lin looks at it", "owner": "Lin Wu"}
    base.update(values)
    return [(1, base["title"]), (2, base["heading"]), (3, base["owner"])]


# --------------------------------------------------------------------------- text rules


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("Aiko Tanaka (design)", ["aiko", "tanaka"]),
        ("Luis Ortega (eng lead)", ["luis", "ortega"]),
        ("Hiroshi Yamamoto (山本博)", ["hiroshi", "yamamoto"]),
        ("Sam Patel [QA]", ["sam", "patel"]),
        ("Ada (PM) Lovelace", ["ada", "lovelace"]),
        ("Ada ((PM)) Lovelace", ["ada", "lovelace"]),  # the inner note, then the lone brackets
        ("Ada (PM", ["ada", "pm"]),  # no closing bracket: no note
        ("", []),
    ],
)
def test_name_words_leave_out_bracketed_notes(text: str, words: list[str]) -> None:
    assert name_words(text) == words


@given(st.text(alphabet="a (]x[)", max_size=200))
@settings(max_examples=200, deadline=None)
def test_name_words_are_words_of_the_text(text: str) -> None:
    """Never more words than the text has, each one of them."""
    got = name_words(text)
    all_words = word_tokens(text)
    assert len(got) <= len(all_words)
    assert set(got) <= set(all_words)


@pytest.mark.parametrize("text", ["1", "42", "[5]", " [3] ", "[Triage]", "<name>", "{owner}"])
def test_placeholders(text: str) -> None:
    assert is_placeholder(text)


@pytest.mark.parametrize("text", ["Ada", "1234", "Room 12", "[a] and [b]", "v1.2", "12 apples"])
def test_not_placeholders(text: str) -> None:
    assert not is_placeholder(text)


@pytest.mark.parametrize("text", ["1,3,2,1,1,2,…", "1, 2, 3", "4;5;6", "1 2 3 4"])
def test_digit_runs(text: str) -> None:
    assert is_digit_run(text)


@pytest.mark.parametrize("text", ["1,000,000", "2024-03-12", "555 123 4567", "12:30", "1, 2"])
def test_not_digit_runs(text: str) -> None:
    assert not is_digit_run(text)


def test_needless_quotes() -> None:
    assert needless_quotes('"Ada"')
    assert needless_quotes("“Export fails”")
    assert not needless_quotes('"a" and "b"')
    assert not needless_quotes("'")
    assert not needless_quotes("Ada's notes")


def test_description_examples() -> None:
    text = "Team or person responsible, e.g. 'billing team' or 'Léa Martin'. Not 'x'."
    assert description_examples(text) == ["billing team", "Léa Martin"]
    assert description_examples("Labels (e.g. “refund”), lowercase") == ["refund"]
    assert description_examples("A 'quoted' word without a marker") == []


@given(st.text(alphabet=st.characters(categories=["Ll", "Lu"]), min_size=1, max_size=30))
def test_words_are_no_junk_shape(word: str) -> None:
    for text in (word, f"{word} {word[::-1]}", f"The {word}"):
        assert not is_placeholder(text)
        assert not is_digit_run(text)
        assert not needless_quotes(text)


# --------------------------------------------------------------------------- each check


def test_a_clean_object_passes_every_check() -> None:
    assembler, events = run(Note, *note(), (4, "export", 0), (4, "large files", 1))
    assert rejected(events) == []
    assert assembler.outcome.ok


def test_repeat_of_another_field() -> None:
    title = "Export fails on large files"
    _, events = run(Note, *note(heading=title))
    assert rejected(events) == [("heading", "repeat", "retry")]
    event = next(e for e in events if isinstance(e, SlotRejected))
    assert event.reason == "repeats the value of title"
    assert event.value == title
    assert event.to_json()["code"] == "repeat"


def test_near_copy_of_another_field() -> None:
    _, events = run(Note, *note(heading="Export fails on large files!"))
    assert rejected(events) == [("heading", "repeat", "retry")]
    _, events = run(Note, *note(heading="Export fails on very large files"))
    assert rejected(events) == [("heading", "repeat", "retry")]  # F1 0.91
    _, events = run(Note, *note(heading="Export fails for many files"))
    assert rejected(events) == []  # F1 0.6: related, not a copy


def test_a_short_name_from_the_input_may_be_referred_to_twice() -> None:
    _, events = run(Note, *note(heading="Lin Wu", owner="Lin Wu"))
    assert rejected(events) == []
    _, events = run(Note, *note(heading="Bob Stone", owner="Bob Stone"))
    assert rejected(events) == [("owner", "repeat", "retry")]


def test_a_name_with_its_role_in_brackets_is_a_short_name() -> None:
    """``Aiko Tanaka (design)`` as attendee and owner: a name the input gives, its role
    in brackets not counted as words. A bracketed note the input does not hold, or a
    longer text, still repeats."""
    text = "Attendees: Aiko Tanaka (design), Hiroshi Yamamoto (山本博), Luis Ortega [eng lead]."
    for name in ("Aiko Tanaka (design)", "Hiroshi Yamamoto (山本博)", "Luis Ortega [eng lead]"):
        _, events = run(Note, *note(heading=name, owner=name), input_text=text)
        assert rejected(events) == [], name
    for name, where in (
        ("Aiko Tanaka (design) (same as heading)", text),  # not what the input says
        ("Aiko Tanaka (design)", "Attendees: Aiko Tanaka, design."),
        ("Aiko Tanaka Brown (design)", text + " Aiko Tanaka Brown (design)"),  # three words
    ):
        _, events = run(Note, *note(heading=name, owner=name), input_text=where)
        assert rejected(events) == [("owner", "repeat", "retry")], name


def test_items_of_a_list_of_objects_may_share_a_field_value() -> None:
    frames = [(1, "Release plan"), (2, "Write notes", 0), (3, "Bob", 0)]
    frames += [(2, "Test the build", 1), (3, "Bob", 1)]
    _, events = run(Board, *frames)
    assert rejected(events) == []


def test_a_list_stops_at_a_repeated_item() -> None:
    assembler, events = run(
        Labels, (1, "export", 0), (1, "large files", 1), (1, "Export", 2), (1, "billing", 3)
    )
    assert rejected(events) == [("names[2]", "list_repeat", "stop")]
    assert [d.code for d in events if isinstance(d, Diagnostic)] == ["list_stopped"]
    assert assembler.state == {"names": ["export", "large files"]}
    assert assembler.outcome.ok


def test_a_list_of_objects_stops_at_an_item_opening_as_an_earlier_one() -> None:
    """The item's first field repeating (three words or more) is a repeated item: the
    item and the rest of the list are left out, every field of it."""
    frames = [(1, "Release plan"), (2, "Write the notes", 0), (3, "Bob", 0)]
    frames += [(2, "Write the Notes", 1), (3, "Ann", 1), (2, "Test the build", 2), (3, "Ann", 2)]
    assembler, events = run(Board, *frames)
    assert rejected(events) == [("items[1].task", "list_repeat", "stop")]
    codes = [d.code for d in events if isinstance(d, Diagnostic)]
    assert codes == ["list_stopped"] * 3
    assert assembler.state == {
        "title": "Release plan",
        "items": [{"task": "Write the notes", "owner": "Bob"}],
    }
    assert assembler.outcome.ok


def test_items_of_a_list_of_objects_may_open_with_the_same_short_text() -> None:
    frames = [(1, "Release plan"), (2, "Deploy", 0), (3, "Bob", 0), (2, "Deploy", 1)]
    frames += [(3, "Ann", 1)]
    assembler, events = run(Board, *frames)
    assert rejected(events) == []
    assert len(assembler.state["items"]) == 2


def test_a_stopped_list_under_min_items_is_asked_for_again() -> None:
    """The whole list is asked for again, with the repeat as the reason: the follow-up
    quotes the item and why it was refused, not "no frame arrived"."""
    assembler, events = run(Labels, (1, "export", 0), (1, "export", 1))
    assert rejected(events) == [("names[1]", "list_repeat", "stop")]
    assert not assembler.outcome.ok
    request = assembler.retry_request()
    assert request is not None and [t.slot.path for t in request.targets] == ["names[]"]
    [target] = request.targets
    assert (target.error.code, target.error.input) == ("list_repeat", "export")
    assert target.error.message == "The value repeats an earlier item of names."


def test_a_list_of_scalars_its_checks_left_short_is_asked_for_with_the_reason() -> None:
    assembler, events = run(Labels, (1, "1", 0), (1, "[2]", 1))
    assert rejected(events) == [("names[0]", "placeholder", "drop")] * 2  # nothing kept
    request = assembler.retry_request()
    assert request is not None
    [target] = request.targets
    assert (target.error.code, target.error.input) == ("placeholder", "[2]")


class Steps(BaseModel):
    title: str
    items: list[Item] = Field(min_length=2, max_length=4)


def test_a_list_of_objects_stopped_under_min_items_asks_for_the_item_with_the_reason() -> None:
    frames = [(1, "Release plan"), (2, "Write the notes", 0), (3, "Bob", 0)]
    frames += [(2, "Write the Notes", 1), (3, "Ann", 1)]
    assembler, events = run(Steps, *frames)
    assert rejected(events) == [("items[1].task", "list_repeat", "stop")]
    request = assembler.retry_request()
    assert request is not None
    got = [(t.slot.display(t.index), t.error.code, t.error.input) for t in request.targets]
    assert got == [
        ("items[1].task", "list_repeat", "Write the Notes"),
        ("items[1].owner", "missing", None),
    ]
    assert request.targets[1].error.message == "the item repeats an earlier one"
    failed = [(e.slot, e.error.code) for e in events if isinstance(e, SlotFailed)]
    assert failed == [("items[1].task", "list_repeat"), ("items[1].owner", "missing")]


def test_placeholder_in_a_text_field() -> None:
    for junk in ("1", "[5]", "[Triage]"):
        _, events = run(Note, *note(heading=junk))
        assert rejected(events) == [("heading", "placeholder", "retry")], junk


def test_a_number_the_input_states_is_an_answer() -> None:
    """A bare number passes where the input states it as a whole number ("floor 4"),
    not where it is only a piece of another (the 1 of "1.5 GB", of "1-2 days")."""
    text = "The export of 1.5 GB fails on floor 4; it takes 1-2 days to rerun."
    _, events = run(Note, *note(heading="4"), input_text=text)
    assert rejected(events) == []
    for piece in ("1", "5", "2"):
        _, events = run(Note, *note(heading=piece), input_text=text)
        assert rejected(events) == [("heading", "placeholder", "retry")], piece


def test_a_bare_number_in_a_list_of_texts_is_a_placeholder_even_when_the_input_states_it() -> None:
    """A tag ``3`` copies a quantity of the input ("On 3 March", "4 years"), or counts
    the list's own items (``1``, ``2``, ``3`` …): an item, unlike a text field, gets no
    pass for a number the input holds."""
    text = "On 3 March my card was charged twice; 4 years of notes are gone."
    assembler, events = run(
        Note, *note(), (4, "3", 0), (4, "billing", 1), (4, "4", 2), input_text=text
    )
    assert rejected(events) == [
        ("tags[0]", "placeholder", "drop"),
        ("tags[1]", "placeholder", "drop"),
    ]
    assert assembler.state["tags"] == ["billing"]
    _, events = run(Note, *note(heading="4"), input_text=text)
    assert rejected(events) == []  # a text field may hold the number the input states


def test_a_list_item_repeating_another_field_is_kept_flagged_and_the_list_goes_on() -> None:
    """An item of a list of texts that is another field's value again (the title as a
    tag, an equal or near copy) is kept and flagged: real data repeats so too, and an
    item is not asked for again on its own; with ``error`` it is dropped. A single word
    or a short name the input gives may recur (``Lin Wu`` as owner and tag)."""
    for copy in ("Export fails on large files", "Export fails on very large files"):
        items = ["export", copy, "Lin Wu", "large files"]
        frames = [(4, item, i) for i, item in enumerate(items)]
        assembler, events = run(Note, *note(), *frames)
        assert rejected(events) == []
        assert assembler.state["tags"] == items
        assert list(assembler.flagged()) == ["/tags/1"]
        complete = [e for e in events if isinstance(e, SlotComplete) and e.slot == "tags[1]"]
        assert complete[0].to_json()["code"] == "repeat"
        assert assembler.outcome.ok
        assembler, events = run(Note, *note(), *frames, on_failure="error")
        assert rejected(events) == [("tags[1]", "repeat", "drop")]
        assert assembler.state["tags"] == ["export", "Lin Wu", "large files"]


def test_a_list_item_repeating_an_item_of_another_list_is_flagged() -> None:
    """The later of two lists holding the same sentence gets the flag (a decision
    written again as an attendee, or the other way round); the earlier one keeps it."""
    sentence = "No next meeting needed unless Ada declines."
    frames = [(1, "Hiring debrief"), (2, "Ada Lovelace", 0), (2, sentence, 1)]
    frames += [(3, sentence, 0), (3, "Offer goes to Lin Wu", 1)]
    assembler, events = run(Minutes, *frames)
    assert rejected(events) == []
    assert list(assembler.flagged()) == ["/decisions/0"]
    assert assembler.state == {
        "title": "Hiring debrief",
        "attendees": ["Ada Lovelace", sentence],
        "decisions": [sentence, "Offer goes to Lin Wu"],
    }


def test_a_placeholder_item_is_dropped_and_the_list_goes_on() -> None:
    assembler, events = run(Note, *note(), (4, "1", 0), (4, "export", 1))
    assert rejected(events) == [("tags[0]", "placeholder", "drop")]
    assert assembler.state["tags"] == ["export"]


def test_schema_copy_of_the_class_name_title_and_examples() -> None:
    for junk, what in [
        ("note", "the model's class name"),
        ("Heading", "a title in the form"),
        ("Léa Martin", "an example from the form"),
        ("A note about one customer.", "a description"),
    ]:
        _, events = run(Note, *note(owner=junk))
        reasons = [e.reason for e in events if isinstance(e, SlotRejected)]
        assert reasons == [f"copies {what} instead of a value taken from the input"], junk


def test_a_field_name_with_an_index_copies_the_form() -> None:
    """``heading[0] was not taken``, ``owner[1]``: the follow-up's names for the fields
    it asks for, written back as values; an item of a list is dropped. A name the form
    does not have (``items[0]`` in a log line) or the input holds is text."""
    for junk in ("owner[1]", "heading[0] was not taken:", "Tags[2]: export"):
        _, events = run(Note, *note(heading=junk))
        assert rejected(events) == [("heading", "schema_copy", "retry")], junk
        event = next(e for e in events if isinstance(e, SlotRejected))
        assert (
            event.reason
            == "copies a field's name from the form instead of a value taken from the input"
        )
    assembler, events = run(Note, *note(), (4, "title[0]", 0), (4, "export", 1))
    assert rejected(events) == [("tags[0]", "schema_copy", "drop")]
    assert assembler.state["tags"] == ["export"]
    _, events = run(Note, *note(heading="items[0] is empty"))
    assert rejected(events) == []
    text = "The log says: owner[1] is not set."
    _, events = run(Note, *note(heading="owner[1] is not set"), input_text=text)
    assert rejected(events) == []


def test_a_note_of_the_form_copies_the_form() -> None:
    """A note the form writes after a placeholder's meaning, copied into a value (the
    demo's deadline on Qwen2.5-Coder-1.5B: ``Friday 15:00:00 (UTC) (optional) (may be``),
    fails the value; "optional" said otherwise, or a note the input holds, is text."""
    for junk in (
        "Friday 15:00:00 (UTC) (optional) (may be",
        "Lin Wu; optional",
        "Nobody yet, may be null",
        "Ada (only if it has a value)",
    ):
        _, events = run(Note, *note(heading=junk))
        assert rejected(events) == [("heading", "schema_copy", "retry")], junk
        event = next(e for e in events if isinstance(e, SlotRejected))
        assert event.reason == "copies a note from the form instead of a value taken from the input"
    for text in ("Optional export of large files", "Make the large-file export optional"):
        _, events = run(Note, *note(heading=text))
        assert rejected(events) == [], text
    said = "Ada: the export (optional) runs on Friday."
    _, events = run(Note, *note(heading="Export (optional) on Friday"), input_text=said)
    assert rejected(events) == []


@pytest.mark.parametrize("syntax", ["v1", "v2", "v3", "v4", "v4-quoted"])
def test_form_note_names_the_notes_every_form_writes(syntax: str) -> None:
    """:data:`FORM_NOTE` holds the notes the forms write (``prompts/*/prompt.j2``): each
    line of the form about an optional, nullable field holds one."""

    class Later(BaseModel):
        title: str
        deadline: str | None = Field(default=None, description="When a fix is needed")

    text = prompt(compile(Later), syntax)
    lines = [line for line in text.splitlines() if "deadline" in line or "When a fix" in line]
    assert lines
    assert all(FORM_NOTE.search(line) for line in lines), lines
    assert not FORM_NOTE.search(prompt(compile(Item), syntax))


def test_schema_words_found_in_the_input_are_answers() -> None:
    _, events = run(Note, *note(owner="Léa Martin"), input_text="Léa Martin called twice.")
    assert rejected(events) == []
    _, events = run(Note, *note(owner="billing team"))  # vocabulary, not a name
    assert rejected(events) == []


def test_needless_quotes_and_digit_runs() -> None:
    _, events = run(Note, *note(heading='"Lin looks at it"'))
    assert rejected(events) == [("heading", "quoted", "retry")]
    _, events = run(Note, *note(heading="1,3,2,1,1,2,…"))
    assert rejected(events) == [("heading", "digit_run", "retry")]


def test_every_check_code_has_a_minimal_case_above() -> None:
    assert set(CHECK_CODES) == {
        "placeholder",
        "quoted",
        "digit_run",
        "schema_copy",
        "list_repeat",
        "repeat",
    }


# --------------------------------------------------------------------------- configuration


def test_checks_none_and_a_list_of_codes() -> None:
    _, events = run(Note, *note(heading="1"), checks="none")
    assert rejected(events) == []
    _, events = run(Note, *note(heading="1"), checks=["quoted"])
    assert rejected(events) == []
    _, events = run(Note, *note(heading="1"), checks=["placeholder"])
    assert rejected(events) == [("heading", "placeholder", "retry")]
    with pytest.raises(ValueError, match="unknown check"):
        CheckSettings(checks=["nope"])
    with pytest.raises(TypeError):
        CheckSettings(checks="placeholder")


def test_field_extensions() -> None:
    _, events = run(Address, (1, "1 Main Street, Springfield"), (2, "1 Main Street, Springfield"))
    assert rejected(events) == []
    _, events = run(Loose, (1, "1"), (2, '"1"'))
    assert rejected(events) == []
    _, events = run(Loose, (1, '"AB-1"'), (2, "x"))
    assert rejected(events) == [("code", "quoted", "retry")]


def test_a_custom_check() -> None:
    def no_shouting(slot: Slot, value: Any, state: CheckState) -> CheckFailure | None:
        if isinstance(value, str) and value.isupper():
            return CheckFailure("shouting", "is written in capitals")
        return None

    _, events = run(Note, *note(heading="LIN LOOKS"), checks=["repeat", no_shouting])
    assert rejected(events) == [("heading", "shouting", "retry")]


def test_a_custom_check_that_raises_fails_the_value_not_the_run() -> None:
    def broken(slot: Slot, value: Any, state: CheckState) -> CheckFailure | None:
        raise RuntimeError("bug")

    assembler, events = run(Note, *note(), checks=[broken])
    assert {code for _, code, _ in rejected(events)} == {"check_error"}
    assert not assembler.outcome.ok


def test_a_custom_check_returning_something_else_fails_the_value_not_the_run() -> None:
    def sloppy(slot: Slot, value: Any, state: CheckState) -> Any:
        return "looks wrong"  # not a CheckFailure

    _, events = run(Note, *note(), checks=[sloppy])
    assert {code for _, code, _ in rejected(events)} == {"check_error"}
    assert not any(isinstance(event, PassFailed) for event in events)  # not a fault


class _AsyncCheck:
    async def __call__(self, slot: Slot, value: Any, state: CheckState) -> None:
        return None


def test_an_async_check_is_refused_up_front() -> None:
    async def later(slot: Slot, value: Any, state: CheckState) -> None:
        return None

    for check in (later, _AsyncCheck()):
        with pytest.raises(TypeError, match="coroutine function"):
            CheckSettings(checks=[check])


# --------------------------------------------------------------------------- regeneration


def _retry(assembler: Assembler, model: type[BaseModel], *frames: tuple[Any, ...]) -> list[Event]:
    _, events = assembler.begin_retry()
    return events + assembler.feed(written(model, *frames)) + assembler.close()


def test_a_retry_is_held_to_the_same_checks() -> None:
    """With ``error`` a retry that fails its checks again is asked for again, up to the
    last attempt; with ``accept`` (the default) it is settled on the retry: kept,
    flagged, with no third request."""
    assembler, _ = run(Note, *note(heading="1"), on_failure="error")
    events = _retry(assembler, Note, (2, "[Heading]"))
    assert rejected(events) == [("heading", "placeholder", "retry")]
    events = _retry(assembler, Note, (2, "Lin looks at it"))
    assert rejected(events) == []
    assert assembler.outcome.ok
    assembler, _ = run(Note, *note(heading="1"))
    events = _retry(assembler, Note, (2, "[Heading]"))
    assert rejected(events) == []
    assert [(e.slot, e.flagged) for e in events if isinstance(e, SlotComplete)] == [
        ("heading", True)
    ]
    assert assembler.outcome.ok and list(assembler.flagged()) == ["/heading"]
    assert assembler.retry_request() is None


class Count(BaseModel):
    summary: str
    count: int


@pytest.mark.parametrize("write_again", [True, False])
def test_accept_settles_check_failures_on_the_retry_while_schema_failures_get_every_attempt(
    write_again: bool,
) -> None:
    """``accept``: a value a check rejected is asked for again once. On the retry a value
    failing its checks again, or no value at all, settles the field (the rejected value
    kept, flagged); a schema failure beside it is still asked for on the third
    attempt, alone."""
    assembler, events = run(Count, (1, "1"), (2, "many"))
    assert rejected(events) == [("summary", "placeholder", "retry")]
    # The retry writes summary again (count is then missing), or count only.
    events = _retry(assembler, Count, (1, "[Summary]") if write_again else (2, "some"))
    assert rejected(events) == []
    kept = [(e.slot, e.value, e.attempt) for e in events if isinstance(e, SlotComplete)]
    assert kept == [("summary", "[Summary]" if write_again else "1", 2)]
    request = assembler.retry_request()
    assert request is not None and request.attempt == 3
    assert [t.slot.name for t in request.targets] == ["count"]
    events = _retry(assembler, Count, (2, 3))
    assert assembler.outcome.ok
    kept = "[Summary]" if write_again else "1"
    assert assembler.result == Count(summary=kept, count=3)
    assert list(assembler.flagged()) == ["/summary"]


class Copy(BaseModel):
    billing: str
    shipping: str


def test_the_same_value_written_again_is_accepted_with_a_diagnostic() -> None:
    """A shipping address rightly equal to the billing one stays writable: written
    again after the rejection, and found in the input, it is accepted."""
    same = "1 Main Street, Springfield"
    text = f"Bill and ship to {same}."
    assembler, events = run(Copy, (1, same), (2, same), input_text=text)
    assert rejected(events) == [("shipping", "repeat", "retry")]
    events = _retry(assembler, Copy, (2, same))
    assert rejected(events) == []
    assert [d.code for d in events if isinstance(d, Diagnostic)] == ["check_confirmed"]
    assert assembler.outcome.ok and assembler.result == Copy(billing=same, shipping=same)
    assert assembler.flagged() == {}


def test_the_same_value_written_again_that_the_input_does_not_hold_is_settled() -> None:
    """A value written again that the input does not bear out (a small model writes
    its own text again, right or not) is settled at once as on the last attempt: kept
    and flagged with ``accept``, left out or failed with ``error``."""
    same = "1 Main Street, Springfield"
    assembler, events = run(Copy, (1, same), (2, same))
    assert rejected(events) == [("shipping", "repeat", "retry")]
    events = _retry(assembler, Copy, (2, same))
    assert rejected(events) == []
    assert "check_confirmed" not in [d.code for d in events if isinstance(d, Diagnostic)]
    assert assembler.outcome.ok and list(assembler.flagged()) == ["/shipping"]
    assembler, events = run(Copy, (1, same), (2, same), on_failure="error")
    events = _retry(assembler, Copy, (2, same))
    assert rejected(events) == [("shipping", "repeat", "fail")]
    assert not assembler.outcome.ok


def test_last_attempt_optional_is_left_out() -> None:
    assembler, events = run(Note, *note(), (5, "[5]"), max_attempts=1, on_failure="error")
    assert rejected(events) == [("comment", "placeholder", "leave_out")]
    assert "check_left_out" in [d.code for d in events if isinstance(d, Diagnostic)]
    assert assembler.outcome.ok and assembler.result.comment is None


def test_last_attempt_required_fails_naming_the_values_tried() -> None:
    assembler, _ = run(Note, *note(heading="1"), max_attempts=2, on_failure="error")
    events = _retry(assembler, Note, (2, "[2]"))
    assert rejected(events) == [("heading", "placeholder", "fail")]
    error = assembler.failure()
    assert [e.slot for e in error.errors] == ["heading"]
    assert "values tried: '1', '[2]'" in error.errors[0].message


def test_last_attempt_accept_flags_the_value() -> None:
    """``accept`` is the default: a required value failing its checks at the last
    attempt is kept, flagged, and the object stays valid."""
    assert CheckSettings().on_failure == "accept"
    assembler, events = run(Note, *note(heading="1"), max_attempts=1)
    assert rejected(events) == []
    complete = next(e for e in events if isinstance(e, SlotComplete) and e.slot == "heading")
    assert complete.flagged
    assert complete.to_json()["status"] == "flagged"
    assert complete.to_json()["code"] == "placeholder"
    assert assembler.outcome.ok
    assert list(assembler.flagged()) == ["/heading"]


def test_last_attempt_accept_keeps_the_rejected_value_of_a_field_it_left_empty() -> None:
    """The last attempt writes no acceptable value for a required field a check
    rejected before (the model wrote other lines instead): with ``accept`` the last
    rejected value is kept, flagged, and the object stays valid; with ``error`` the
    object fails as before. An optional field is not brought back."""
    for on_failure, ok in (("accept", True), ("error", False)):
        assembler, events = run(
            Note, *note(heading="1"), (5, "[5]"), max_attempts=2, on_failure=on_failure
        )
        assert rejected(events) == [
            ("heading", "placeholder", "retry"),
            ("comment", "placeholder", "retry"),
        ]
        events = _retry(assembler, Note, (4, "export", 0))  # neither field written again
        assert assembler.outcome.ok is ok, on_failure
        if ok:
            assert assembler.result.heading == "1" and assembler.result.comment is None
            assert list(assembler.flagged()) == ["/heading"]
            complete = [e for e in events if isinstance(e, SlotComplete) and e.slot == "heading"]
            assert complete[0].flagged and complete[0].attempt == 2


def test_last_attempt_accept_keeps_repeated_list_items_flagged() -> None:
    """On the last attempt with ``accept`` a repeating item is kept, flagged, and the
    list goes on (a list cut there could fall short of its ``minItems``), for a list of
    strings and a list of objects alike; with ``error`` it stops as on any attempt."""
    frames = [(1, "export", 0), (1, "Export", 1), (1, "billing", 2)]
    assembler, events = run(Labels, *frames, max_attempts=1, on_failure="accept")
    assert rejected(events) == []
    assert assembler.state == {"names": ["export", "Export", "billing"]}
    assert list(assembler.flagged()) == ["/names/1"]
    board = [(1, "Release plan"), (2, "Write the notes", 0), (3, "Bob", 0)]
    board += [(2, "Write the Notes", 1), (3, "Ann", 1)]
    assembler, events = run(Board, *board, max_attempts=1, on_failure="accept")
    assert rejected(events) == []
    assert len(assembler.state["items"]) == 2
    assert list(assembler.flagged()) == ["/items/1/task"]
    assembler, events = run(Board, *board, max_attempts=1, on_failure="error")
    assert rejected(events) == [("items[1].task", "list_repeat", "stop")]


# --------------------------------------------------------------------------- invariants


TEXT = written(
    Note, *note(heading="Export fails on large files"), (4, "a", 0), (4, "a", 1), (4, "b", 2)
)


def _events(chunks: list[str]) -> tuple[list[dict[str, Any]], Any]:
    assembler = Assembler(compile(Note), checks=CheckSettings(input_text=INPUT))
    events: list[Event] = []
    for chunk in chunks:
        events += assembler.feed(chunk)
    events += assembler.close()
    return [e.to_json() for e in events if not isinstance(e, SlotDelta)], assembler.state


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=len(TEXT)), max_size=12))
def test_chunk_invariance_with_checks(cuts: list[int]) -> None:
    whole = _events([TEXT])
    assert _events(split_at(TEXT, sorted(cuts))) == whole
    assert any(e["type"] == "slot-rejected" for e in whole[0])


TASKS = load_tasks(TASKS_DIR)


@pytest.mark.parametrize("task", TASKS, ids=[t.id for t in TASKS])
def test_gold_objects_pass_every_check(task: Any) -> None:
    model = SCHEMAS[task.schema]
    plan = compile(model)
    text = render_frames(plan, model.model_validate(task.gold))
    assembler = Assembler(plan, checks=CheckSettings(input_text=task.input))
    events = assembler.feed(text) + assembler.close()
    assert [e for e in events if isinstance(e, SlotRejected | SlotFailed)] == []
    assert assembler.flagged() == {}
    assert assembler.outcome.ok


_WORD = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=2, max_size=9)


@settings(max_examples=80, deadline=None)
@given(
    st.lists(_WORD, min_size=1, max_size=6),
    st.lists(_WORD, min_size=1, max_size=6),
    st.lists(st.lists(_WORD, min_size=1, max_size=3), max_size=5, unique_by=tuple),
)
def test_distinct_plain_texts_pass(
    title: list[str], heading: list[str], tags: list[list[str]]
) -> None:
    """Gold-like values (words, no field repeating another, list items distinct) pass."""
    frames: list[tuple[Any, ...]] = [(1, "T " + " ".join(title)), (2, "H " + " ".join(heading))]
    frames.append((3, "Lin Wu"))
    frames += [(4, " ".join(words), i) for i, words in enumerate(tags)]
    texts = [f[1] for f in frames]
    distinct = len({t.casefold() for t in texts}) == len(texts)
    _, events = run(Note, *frames)
    found = rejected(events)
    if distinct:
        # a tag may be a near copy of another (the same words in another order)
        assert [r for r in found if r[1] != "list_repeat" and r[1] != "schema_copy"] == []
    assert all(code in CHECK_CODES for _, code, _ in found)


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=300), st.lists(st.integers(min_value=0, max_value=300), max_size=6))
def test_any_text_with_checks_never_raises(text: str, cuts: list[int]) -> None:
    assembler = Assembler(compile(Note), checks=CheckSettings(input_text=text[:40]))
    body = TEXT[: len(TEXT) // 2] + text
    for piece in split_at(body, sorted(c for c in cuts if c <= len(body))):
        assembler.feed(piece)
    assembler.close()
    assert assembler.outcome is not None
