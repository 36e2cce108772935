"""The embedded server's ``closed_choices`` extension: how a request names closed
fields (``parse_chat_request``), the calibrated choice, and what a field's options
share."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from slotflight._errors import SlotflightError
from slotflight.local._closed_choice import ClosedField, calibrated_choice
from slotflight.local._request import (
    MAX_CLOSED_FIELDS,
    MAX_CLOSED_OPTION_CHARS,
    MAX_CLOSED_OPTIONS,
    MAX_CLOSED_TEXT,
    ChatRequest,
    ClosedChoices,
    parse_chat_request,
)

MESSAGES = [{"role": "user", "content": "Triage: the export fails."}]


def spec() -> dict[str, Any]:
    """A valid ``closed_choices``: two fields and a content-free conversation."""
    return {
        "fields": [
            {"after": "priority:", "options": [" 1", " 2", " 3"], "end": ""},
            {"after": "rank:", "options": [" 1", " 10"], "end": "\n"},
        ],
        "content_free": [
            {"role": "developer", "content": "Answer in frames."},
            {"role": "user", "content": "N/A"},
        ],
    }


def parse(closed: Any) -> ChatRequest:
    body = {"model": "m", "messages": MESSAGES, "closed_choices": closed}
    return parse_chat_request(json.dumps(body).encode())


def test_a_valid_closed_choices_is_read() -> None:
    chat = parse(spec())
    assert chat.closed_choices == ClosedChoices(
        fields=(("priority:", (" 1", " 2", " 3"), ""), ("rank:", (" 1", " 10"), "\n")),
        content_free=(
            {"role": "system", "content": "Answer in frames."},
            {"role": "user", "content": "N/A"},
        ),
    )
    assert chat.messages == ({"role": "user", "content": "Triage: the export fails."},)


def test_end_may_be_left_out_and_closed_choices_may_be_null() -> None:
    closed = spec()
    del closed["fields"][0]["end"]
    chat = parse(closed)
    assert chat.closed_choices is not None
    assert chat.closed_choices.fields[0][2] == ""
    assert parse(None).closed_choices is None
    without = parse_chat_request(json.dumps({"messages": MESSAGES}).encode())
    assert without.closed_choices is None


def test_content_free_text_parts_are_joined() -> None:
    closed = spec()
    closed["content_free"] = [
        {"role": "user", "content": [{"type": "text", "text": "N/"}, {"type": "text", "text": "A"}]}
    ]
    chat = parse(closed)
    assert chat.closed_choices is not None
    assert chat.closed_choices.content_free == ({"role": "user", "content": "N/A"},)


def test_the_bounds_themselves_are_accepted() -> None:
    fitting = MAX_CLOSED_OPTION_CHARS // MAX_CLOSED_OPTIONS
    closed = {
        "fields": [
            {
                "after": "a" * MAX_CLOSED_TEXT,
                "options": [f"{i:0{fitting}d}" for i in range(MAX_CLOSED_OPTIONS)],
            }
        ],
        "content_free": [{"role": "user", "content": "N/A"}],
    }
    chat = parse(closed)
    assert chat.closed_choices is not None
    assert len(chat.closed_choices.fields[0][1]) == MAX_CLOSED_OPTIONS
    many = {
        "fields": [{"after": f"f{i}:", "options": [" a", " b"]} for i in range(MAX_CLOSED_FIELDS)],
        "content_free": [{"role": "user", "content": "N/A"}],
    }
    found = parse(many).closed_choices
    assert found is not None and len(found.fields) == MAX_CLOSED_FIELDS


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """An edit of :func:`spec` that puts ``value`` at ``path`` (``/``-separated)."""

    def edit(closed: dict[str, Any]) -> None:
        *parents, last = path.split("/")
        node: Any = closed
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node[key]
        if isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value

    return edit


def _drop(key: str) -> Callable[[dict[str, Any]], None]:
    return lambda closed: closed.pop(key)


def _drop_in(path: str, key: str) -> Callable[[dict[str, Any]], None]:
    def edit(closed: dict[str, Any]) -> None:
        node: Any = closed
        for part in path.split("/"):
            node = node[int(part)] if isinstance(node, list) else node[part]
        del node[key]

    return edit


def _over_total(closed: dict[str, Any]) -> None:
    """Two fields whose options hold more characters than allowed in all (each field
    alone within bounds)."""
    width = MAX_CLOSED_TEXT
    count = MAX_CLOSED_OPTION_CHARS // (2 * width) + 1
    options = [f"{i:0{width}d}" for i in range(count)]
    assert count <= MAX_CLOSED_OPTIONS and count * width <= MAX_CLOSED_OPTION_CHARS
    closed["fields"] = [{"after": "a:", "options": options}, {"after": "b:", "options": options}]


def _over_total_with_end(closed: dict[str, Any]) -> None:
    """The options fit, but not once ``end`` is counted after each."""
    count = MAX_CLOSED_OPTIONS
    width = MAX_CLOSED_OPTION_CHARS // count
    closed["fields"] = [
        {"after": "a:", "options": [f"{i:0{width}d}" for i in range(count)], "end": "\n"}
    ]


MALFORMED: list[tuple[str, Any, str, str]] = [
    # (case, edit or replacement of the whole spec, code, location)
    ("not-an-object", ["fields"], "invalid_value", "/closed_choices"),
    ("a-text", "fields", "invalid_value", "/closed_choices"),
    ("fields-missing", _drop("fields"), "invalid_value", "/closed_choices/fields"),
    ("fields-empty", _set("fields", []), "invalid_value", "/closed_choices/fields"),
    (
        "fields-not-a-list",
        _set("fields", {"after": "a:"}),
        "invalid_value",
        "/closed_choices/fields",
    ),
    (
        "too-many-fields",
        _set(
            "fields",
            [{"after": f"f{i}:", "options": [" a", " b"]} for i in range(MAX_CLOSED_FIELDS + 1)],
        ),
        "invalid_value",
        "/closed_choices/fields",
    ),
    ("field-not-an-object", _set("fields/1", "rank:"), "invalid_value", "/closed_choices/fields/1"),
    (
        "after-missing",
        _drop_in("fields/0", "after"),
        "invalid_value",
        "/closed_choices/fields/0/after",
    ),
    ("after-empty", _set("fields/0/after", ""), "invalid_value", "/closed_choices/fields/0/after"),
    (
        "after-too-long",
        _set("fields/0/after", "a" * (MAX_CLOSED_TEXT + 1)),
        "invalid_value",
        "/closed_choices/fields/0/after",
    ),
    (
        "after-not-text",
        _set("fields/1/after", 3),
        "invalid_value",
        "/closed_choices/fields/1/after",
    ),
    ("end-not-text", _set("fields/1/end", 10), "invalid_value", "/closed_choices/fields/1/end"),
    ("end-null", _set("fields/0/end", None), "invalid_value", "/closed_choices/fields/0/end"),
    ("end-false", _set("fields/0/end", False), "invalid_value", "/closed_choices/fields/0/end"),
    (
        "end-too-long",
        _set("fields/0/end", "\n" * (MAX_CLOSED_TEXT + 1)),
        "invalid_value",
        "/closed_choices/fields/0/end",
    ),
    (
        "options-missing",
        _drop_in("fields/0", "options"),
        "invalid_value",
        "/closed_choices/fields/0/options",
    ),
    (
        "one-option",
        _set("fields/0/options", [" 1"]),
        "invalid_value",
        "/closed_choices/fields/0/options",
    ),
    (
        "options-not-a-list",
        _set("fields/0/options", " 1 2"),
        "invalid_value",
        "/closed_choices/fields/0/options",
    ),
    (
        "too-many-options",
        _set("fields/1/options", [f" {i}" for i in range(MAX_CLOSED_OPTIONS + 1)]),
        "invalid_value",
        "/closed_choices/fields/1/options",
    ),
    (
        "duplicate-options",
        _set("fields/0/options", [" 1", " 2", " 1"]),
        "invalid_value",
        "/closed_choices/fields/0/options",
    ),
    (
        "option-not-text",
        _set("fields/0/options", [" 1", 2]),
        "invalid_value",
        "/closed_choices/fields/0/options/1",
    ),
    (
        "option-empty",
        _set("fields/1/options", ["", " 1"]),
        "invalid_value",
        "/closed_choices/fields/1/options/0",
    ),
    (
        "option-too-long",
        _set("fields/0/options", [" 1", "x" * (MAX_CLOSED_TEXT + 1)]),
        "invalid_value",
        "/closed_choices/fields/0/options/1",
    ),
    ("over-total", _over_total, "invalid_value", "/closed_choices/fields/1/options"),
    (
        "over-total-with-end",
        _over_total_with_end,
        "invalid_value",
        "/closed_choices/fields/0/options",
    ),
    (
        "content-free-missing",
        _drop("content_free"),
        "missing_field",
        "/closed_choices/content_free",
    ),
    (
        "content-free-empty",
        _set("content_free", []),
        "invalid_value",
        "/closed_choices/content_free",
    ),
    (
        "content-free-not-a-list",
        _set("content_free", {"role": "user", "content": "N/A"}),
        "invalid_value",
        "/closed_choices/content_free",
    ),
    (
        "content-free-not-an-object",
        _set("content_free/1", "N/A"),
        "invalid_value",
        "/closed_choices/content_free/1",
    ),
    (
        "content-free-bad-role",
        _set("content_free/1/role", "tool"),
        "invalid_value",
        "/closed_choices/content_free/1/role",
    ),
    (
        "content-free-bad-content",
        _set("content_free/0/content", 7),
        "invalid_value",
        "/closed_choices/content_free/0/content",
    ),
    (
        "content-free-image-part",
        _set("content_free/1/content", [{"type": "image_url", "image_url": {"url": "x"}}]),
        "invalid_value",
        "/closed_choices/content_free/1/content/0",
    ),
]


@pytest.mark.parametrize(
    ("edit", "code", "location"),
    [pytest.param(edit, code, location, id=case) for case, edit, code, location in MALFORMED],
)
def test_a_malformed_closed_choices_is_refused(edit: Any, code: str, location: str) -> None:
    if callable(edit):
        closed: Any = spec()
        edit(closed)
    else:
        closed = edit
    with pytest.raises(SlotflightError) as caught:
        parse(closed)
    assert (caught.value.code, caught.value.location) == (code, location)


def test_the_valid_spec_of_the_refusal_cases_is_accepted() -> None:
    """Each refusal above is due to its one edit: the spec it edits is valid."""
    assert parse(spec()).closed_choices is not None


# -- the calibrated choice ----------------------------------------------------------------


def test_without_a_prior_the_likeliest_option() -> None:
    figures = {" 1": 0.2, " 2": 0.5, " 3": 0.3}
    assert calibrated_choice(figures, None) == " 2"
    assert calibrated_choice(figures, {}) == " 2"
    assert calibrated_choice(figures, {" 1": 0.0, " 2": 0.0}) == " 2"  # no figure
    assert calibrated_choice({" a": 6.0, " b": 4.0}, None) == " a"  # not normalised


def test_a_prior_divides_each_figure() -> None:
    figures = {" a": 0.6, " b": 0.4}
    assert calibrated_choice(figures, None) == " a"
    # the model says " a" whatever the input: 0.6 / 0.9 < 0.4 / 0.1
    assert calibrated_choice(figures, {" a": 0.9, " b": 0.1}) == " b"
    # a prior in other units: only its proportions count
    assert calibrated_choice(figures, {" a": 9.0, " b": 1.0}) == " b"
    # a flat prior changes nothing
    assert calibrated_choice(figures, {" a": 0.5, " b": 0.5}) == " a"


def test_an_option_missing_from_the_prior_gets_its_smallest_figure() -> None:
    # prior floor 0.2: " a" 0.5 / 0.2 = 2.5 beats " c" 0.2 / 0.2 = 1 (a floor near
    # zero would choose " c")
    figures = {" a": 0.5, " b": 0.3, " c": 0.2}
    assert calibrated_choice(figures, {" a": 0.2, " b": 0.8}) == " a"
    # prior floor 0.1: " c" 0.35 / 0.1 = 3.5 beats " a" 0.2 / 0.1 = 2 (a floor of the
    # largest figure, 0.9, would choose " a")
    figures = {" a": 0.2, " b": 0.45, " c": 0.35}
    assert calibrated_choice(figures, {" a": 0.1, " b": 0.9}) == " c"
    # a zero in the prior counts as missing
    assert calibrated_choice(figures, {" a": 0.1, " b": 0.9, " c": 0.0}) == " c"


@pytest.mark.parametrize("figures", [{}, {" a": 0.0, " b": 0.0}])
def test_no_figure_no_choice(figures: dict[str, float]) -> None:
    assert calibrated_choice(figures, None) is None
    assert calibrated_choice(figures, {" a": 0.5, " b": 0.5}) is None


# -- what the options share ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "end", "lead"),
    [
        ((" true", " false"), "", " "),
        ((" 1", " 10"), "\n", " "),
        (tuple(f" {i}" for i in range(1, 11)), "\n", " "),
        ((" apple", " apricot"), "", " ap"),
        ((' "a"', ' "ab"'), "", ' "a'),
        ((" a", " a b"), "\n", " "),  # an option is never led whole
        (("a", "b"), "", ""),
        (("yes", " no"), "", ""),
    ],
)
def test_the_lead_of_a_closed_field(options: tuple[str, ...], end: str, lead: str) -> None:
    closed = ClosedField("field:", options, end)
    assert closed.lead == lead
    assert all(o.startswith(lead) and len(o) > len(lead) for o in options)


def test_calibrated_figures_are_the_ratios_normalised() -> None:
    from slotflight.local._closed_choice import calibrated_figures

    figures = {"a": 0.6, "b": 0.3, "c": 0.1}
    assert calibrated_figures(figures, None) == pytest.approx(figures)
    found = calibrated_figures(figures, {"a": 0.75, "b": 0.25})
    # c is given the prior's smallest figure (0.25): ratios 0.8, 1.2, 0.4
    assert found == pytest.approx({"a": 0.8 / 2.4, "b": 1.2 / 2.4, "c": 0.4 / 2.4})
    assert max(found, key=found.__getitem__) == calibrated_choice(figures, {"a": 0.75, "b": 0.25})
    assert calibrated_figures({}, {"a": 1.0}) == {}
