"""Accuracy metrics and degenerate-value detectors on hand-made cases."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slotflight.bench.accuracy import (
    MAX_NEAR_COPY_TEXTS,
    NEAR_COPY_F1,
    NEAR_COPY_MIN_WORDS,
    FieldSpec,
    align,
    detect_degenerate,
    normalize_text,
    schema_examples,
    schema_fields,
    schema_prose,
    score_object,
    score_value,
    set_f1,
    token_f1,
)
from slotflight.bench.models import SCHEMAS, MeetingNotes, OrderTicket, SupportTriage, load_tasks

TICKET = OrderTicket.model_json_schema()
TRIAGE = SupportTriage.model_json_schema()
MEETING = MeetingNotes.model_json_schema()

#: ticket-001's gold: Ingrid Solberg, LH-204518, a kettle damaged in transit, €59.90.
TICKET_GOLD: dict[str, Any] = dict(load_tasks(schemas=["ticket"])[0].gold or {})
TRIAGE_GOLD: dict[str, Any] = {
    "summary": "Export fails",
    "sentiment": "negative",
    "priority": 3,
    "needs_human": False,
    "product_area": "data_export",
    "tags": ["export"],
}


def scores(schema: dict[str, Any], predicted: Any, gold: Any) -> dict[str, float]:
    return {f.path: f.score for f in score_object(schema, predicted, gold)}


# --------------------------------------------------------------------------- text


def test_normalize_text_folds_case_width_and_spaces() -> None:
    assert normalize_text("  Ingrid\t SOLBERG \n") == "ingrid solberg"
    assert normalize_text("ＬＨ－２０４５１８") == "lh-204518"  # full-width forms (NFKC)
    assert normalize_text("Straße") == normalize_text("STRASSE")


def test_token_f1() -> None:
    assert token_f1("The cat sat", "the cat sat") == 1.0
    assert token_f1("cat", "dog") == 0.0
    # 2 of 3 predicted tokens are right, 2 of 4 gold tokens are found.
    assert token_f1("the cat sat", "the cat was here") == pytest.approx(
        2 * (2 / 3 * 0.5) / (2 / 3 + 0.5)
    )
    assert token_f1("", "") == 1.0
    assert token_f1("!!", "text") == 0.0
    assert token_f1("a a a", "a") == pytest.approx(0.5)  # multisets: repeats do not help


# --------------------------------------------------------------------------- fields


def test_schema_fields_of_the_benchmark_schemas() -> None:
    ticket = {f.path: f for f in schema_fields(TICKET)}
    assert ticket["customer_name"].kind == "short_text"  # maxLength 60
    assert ticket["order_id"].kind == "short_text"
    assert ticket["product"].kind == "enum"
    assert ticket["refund_requested"].kind == "boolean"
    assert ticket["amount"] == FieldSpec("amount", "number", decimals=2)  # multipleOf 0.01
    assert ticket["order_date"].kind == "date"  # nullable, anyOf with null
    triage = {f.path: f for f in schema_fields(TRIAGE)}
    assert triage["summary"].kind == "free_text"  # maxLength 200
    assert triage["priority"].kind == "integer"
    assert triage["tags[]"] == FieldSpec("tags[]", "list", "short_text")
    assert triage["action_items[].description"].kind == "free_text"  # maxLength 120
    assert triage["action_items[].owner"].kind == "short_text"
    assert triage["action_items[].due"].kind == "date"
    product = [f.path for f in schema_fields(SCHEMAS["product"].model_json_schema())]
    assert "dimensions.width_cm" in product and "dimensions" not in product


def test_schema_fields_rules_for_strings_and_odd_shapes() -> None:
    schema = {
        "type": "object",
        "properties": {
            "code": {"type": "string", "pattern": "^[A-Z]+$"},
            "email": {"type": "string", "format": "email"},
            "note": {"type": "string"},
            "when": {"type": "string", "format": "date-time"},
            "pair": {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}]},
            "grid": {"type": "array", "items": {"type": "array", "items": {"type": "integer"}}},
            "ref": {"$ref": "#/$defs/Level"},
            "price": {"type": "number", "multipleOf": 0.5},
        },
        "$defs": {"Level": {"enum": ["low", "high"]}},
    }
    kinds = {f.path: (f.kind, f.decimals) for f in schema_fields(schema)}
    assert kinds == {
        "code": ("short_text", None),
        "email": ("short_text", None),
        "note": ("free_text", None),
        "when": ("date", None),
        "pair": ("json", None),
        "grid": ("json", None),
        "ref": ("enum", None),
        "price": ("number", None),  # 0.5 is no power of ten: exact
    }
    with pytest.raises(ValueError):
        schema_fields({"type": "string"})


def test_schema_examples_collects_examples_and_scalar_defaults() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "string", "examples": ["Jane Doe", {"not": "scalar"}]},
            "b": {"type": "integer", "default": 7},
            "c": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
            "d": {"type": "array", "default": []},
        },
    }
    assert schema_examples(schema) == ["Jane Doe", 7]
    assert schema_examples(TICKET) == []


# --------------------------------------------------------------------------- values


@pytest.mark.parametrize(
    ("kind", "predicted", "gold", "decimals", "expected"),
    [
        ("enum", "negative", "negative", None, 1.0),
        ("enum", "neutral", "negative", None, 0.0),
        ("boolean", True, True, None, 1.0),
        ("boolean", 1, True, None, 0.0),  # 1 is no boolean
        ("integer", 4, 4, None, 1.0),
        ("integer", 4.0, 4, None, 1.0),
        ("integer", True, 1, None, 0.0),
        ("number", 59.9, 59.9, 2, 1.0),
        ("number", 59.904, 59.9, 2, 1.0),  # equal to the schema's precision
        ("number", 59.91, 59.9, 2, 0.0),
        ("number", 348, 348.0, None, 1.0),
        ("number", 348.01, 348.0, None, 0.0),
        ("number", "348", 348.0, None, 0.0),
        ("date", "2025-02-03", "2025-02-03", None, 1.0),
        ("date", "2025-01-31", "2025-02-03", None, 0.0),
        ("short_text", " ingrid  SOLBERG", "Ingrid Solberg", None, 1.0),
        ("short_text", "Ingrid", "Ingrid Solberg", None, 0.0),
        ("free_text", "Refund the charge", "Refund the duplicate charge", None, 2 * 0.75 / 1.75),
        ("json", {"a": [1, 2]}, {"a": [1, 2]}, None, 1.0),
        ("short_text", None, None, None, 1.0),  # both absent agree
        ("short_text", "x", None, None, 0.0),
        ("date", None, "2025-02-03", None, 0.0),
    ],
)
def test_score_value(
    kind: Any, predicted: Any, gold: Any, decimals: int | None, expected: float
) -> None:
    assert score_value(kind, predicted, gold, decimals) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("kind", "predicted", "gold"),
    [
        ("integer", 1_000_000_001, 1_000_000_000),  # off by one, however large
        ("integer", 4_000_000_000_000, 4_000_000_000_001),
        ("number", 1e-13, 0.0),  # no precision in the schema: equal or wrong
        ("number", 0.1 + 1e-12, 0.1),
        ("number", 348.0000001, 348),
        ("number", float("nan"), float("nan")),
    ],
)
def test_integers_and_numbers_without_a_precision_are_right_only_when_equal(
    kind: Any, predicted: Any, gold: Any
) -> None:
    assert score_value(kind, predicted, gold) == 0.0
    assert score_value(kind, gold, gold) == float(gold == gold)  # NaN equals nothing


@pytest.mark.parametrize(
    ("predicted", "expected"),
    [
        (12.35, 1.0),
        (12.3451, 1.0),
        (12.3549, 1.0),
        (12.345, 0.0),  # exactly half a step below: not closer than half
        (12.355, 0.0),  # exactly half a step above
        (-0.0, 0.0),
        (float("nan"), 0.0),
        (float("inf"), 0.0),
    ],
)
def test_a_number_to_the_schema_s_precision_is_judged_on_its_decimal_value(
    predicted: float, expected: float
) -> None:
    """``multipleOf`` 0.01: right when closer than 0.005 to the gold, on both sides alike
    (not as the binary floats' rounding error falls)."""
    assert score_value("number", predicted, 12.35, 2) == expected
    assert score_value("number", 0.004, 0.0, 2) == 1.0
    assert score_value("number", -0.0, 0.0, 2) == 1.0


@pytest.mark.parametrize("kind", ["integer", "number"])
def test_set_f1_drops_numbers_equal_as_numbers(kind: Any) -> None:
    """``12`` and ``12.0`` are one number (the kind's own rule), so one item."""
    assert set_f1([1, 1.0, 2], [1, 2], kind) == 1.0
    assert set_f1([1, 2], [1.0, 1, 2], kind) == 1.0
    assert set_f1([True, 1], [1], kind) == pytest.approx(2 * 0.5 * 1 / 1.5)  # True is no number


def test_set_f1_is_order_insensitive_and_drops_duplicates() -> None:
    gold = ["Hannah Schmidt", "Luis Ortega", "Aiko Tanaka", "Sam Patel"]
    assert set_f1(list(reversed(gold)), gold, "short_text") == 1.0
    assert set_f1(["hannah schmidt", "Hannah Schmidt"], gold, "short_text") == pytest.approx(
        2 * 1 * 0.25 / 1.25
    )
    assert set_f1(["Hannah Schmidt", "Bob"], gold, "short_text") == pytest.approx(
        2 * 0.5 * 0.25 / 0.75
    )
    assert set_f1([], [], "short_text") == 1.0
    assert set_f1([], gold, "short_text") == 0.0
    assert set_f1(["x"], [], "short_text") == 0.0


def test_set_f1_of_free_text_matches_items_softly() -> None:
    gold = ["Cured for 48 months", "Vacuum-packed"]
    predicted = ["Vacuum packed", "cured 48 months"]
    expected_pair = token_f1("cured 48 months", "Cured for 48 months")
    assert set_f1(predicted, gold, "free_text") == pytest.approx((1.0 + expected_pair) / 2)


def test_align_is_greedy_one_to_one() -> None:
    similarity = {("a", "A"): 0.9, ("a", "B"): 0.8, ("b", "A"): 0.85, ("b", "B"): 0.1}
    pairs = align(["a", "b"], ["A", "B"], lambda p, g: similarity[p, g])
    assert pairs == [(0, 0, 0.9), (1, 1, 0.1)]
    assert align(["a"], ["A"], lambda p, g: 0.0) == []


# --------------------------------------------------------------------------- objects


def test_a_perfect_object_scores_one_on_every_field() -> None:
    assert set(scores(TICKET, TICKET_GOLD, TICKET_GOLD).values()) == {1.0}


def test_a_missing_or_invalid_object_scores_zero_on_every_field() -> None:
    result = score_object(TICKET, None, TICKET_GOLD)
    assert [f.path for f in result] == [f.path for f in schema_fields(TICKET)]
    assert {f.score for f in result} == {0.0}


def test_a_degenerate_object_that_validates_scores_zero() -> None:
    # Slot ids and the prompt's example values, as a small model writes them.
    degenerate = {
        "customer_name": "2",
        "order_id": "3 4 5 6",
        "product": "desk_lamp",
        "issue_type": "not_delivered",
        "sentiment": "positive",
        "refund_requested": False,
        "amount": 1.0,
        "order_date": "2025-01-31",
    }
    OrderTicket.model_validate_json(json.dumps(degenerate), strict=True)
    assert set(scores(TICKET, degenerate, TICKET_GOLD).values()) == {0.0}
    found = detect_degenerate(
        TICKET,
        degenerate,
        TICKET_GOLD,
        identifiers={str(i) for i in range(1, 9)},
        examples=["Example customer name", "desk_lamp", 1.0, "2025-01-31"],
    )
    assert found.flags["slot_id"] == {"customer_name", "order_id"}
    assert found.flags["example_copy"] == {"amount", "order_date"}  # enum fields skipped
    assert found.fields == 8


def test_absent_optional_values_agree_with_absent_gold() -> None:
    gold = {**TICKET_GOLD, "amount": None, "order_date": None}
    predicted = {k: v for k, v in TICKET_GOLD.items() if k not in ("amount", "order_date")}
    assert scores(TICKET, predicted, gold)["amount"] == 1.0
    assert scores(TICKET, predicted, gold)["order_date"] == 1.0
    assert scores(TICKET, TICKET_GOLD, gold)["amount"] == 0.0  # an answer where none was given


def test_nested_objects_score_per_leaf() -> None:
    schema = SCHEMAS["product"].model_json_schema()
    gold = {
        "name": "Lamp",
        "price": 10.0,
        "currency": "EUR",
        "in_stock": True,
        "dimensions": {"width_cm": 84, "height_cm": 83, "depth_cm": 85},
        "features": [],
    }
    predicted = {**gold, "dimensions": {"width_cm": 84, "height_cm": 85, "depth_cm": 83}}
    result = scores(schema, predicted, gold)
    assert result["dimensions.width_cm"] == 1.0
    assert result["dimensions.height_cm"] == result["dimensions.depth_cm"] == 0.0
    assert result["brand"] == result["rating"] == 1.0  # absent in both
    assert result["features[]"] == 1.0  # both empty
    no_dimensions = scores(schema, {**gold, "dimensions": None}, gold)
    assert no_dimensions["dimensions.width_cm"] == 0.0


def test_arrays_of_objects_are_aligned_by_item() -> None:
    gold = {
        "title": "Weekly product sync",
        "date": "2024-03-12",
        "attendees": ["Hannah Schmidt", "Luis Ortega"],
        "decisions": ["Ship the fix in 5.13"],
        "action_items": [
            {"task": "Merge the fix", "owner": "Luis Ortega", "due": "2024-03-14"},
            {"task": "Send feedback to Aiko", "owner": "Hannah Schmidt", "due": "2024-03-15"},
        ],
        "next_meeting": "2024-03-19",
    }
    swapped = {**gold, "action_items": list(reversed(gold["action_items"]))}
    assert set(scores(MEETING, swapped, gold).values()) == {1.0}  # order does not matter
    one = {**gold, "action_items": gold["action_items"][:1]}
    result = scores(MEETING, one, gold)
    # One of two items, right: precision 1, recall 1/2.
    assert result["action_items[].owner"] == pytest.approx(2 / 3)
    wrong_due = {
        **gold,
        "action_items": [{**gold["action_items"][0], "due": "2025-01-31"}, gold["action_items"][1]],
    }
    result = scores(MEETING, wrong_due, gold)
    assert result["action_items[].due"] == pytest.approx(0.5)
    assert result["action_items[].owner"] == 1.0
    assert scores(MEETING, {**gold, "action_items": []}, gold)["action_items[].task"] == 0.0


def test_missing_keys_read_as_schema_defaults() -> None:
    gold = {**TRIAGE_GOLD, "action_items": []}
    assert set(scores(TRIAGE, TRIAGE_GOLD, gold).values()) == {1.0}


JSON_SCALARS = (
    st.none() | st.booleans() | st.integers(-5, 5) | st.floats(-5, 5) | st.text(max_size=8)
)
TEXT = st.text(max_size=12)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.fixed_dictionaries(
        {},
        optional={
            "summary": JSON_SCALARS,
            "priority": JSON_SCALARS,
            "tags": st.lists(JSON_SCALARS, max_size=4) | JSON_SCALARS,
            "action_items": st.lists(
                st.fixed_dictionaries({}, optional={"owner": JSON_SCALARS, "due": JSON_SCALARS}),
                max_size=3,
            )
            | JSON_SCALARS,
        },
    )
)
def test_any_object_scores_within_zero_and_one(obj: dict[str, Any]) -> None:
    gold = {"summary": "x", "priority": 3, "tags": ["a"], "action_items": []}
    for field in score_object(TRIAGE, obj, gold):
        assert 0.0 <= field.score <= 1.0
    detect_degenerate(TRIAGE, obj, gold, identifiers={"1"}, examples=["x", 1])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.fixed_dictionaries(
        {
            "summary": TEXT,
            "priority": st.integers(1, 5),
            "tags": st.lists(TEXT, max_size=4),
            "action_items": st.lists(
                st.fixed_dictionaries(
                    {"description": TEXT, "owner": TEXT, "due": st.none() | st.just("2025-01-31")}
                ),
                max_size=3,
            ),
        }
    )
)
def test_a_well_typed_object_matches_itself(obj: dict[str, Any]) -> None:
    for field in score_object(TRIAGE, obj, obj):
        assert field.score == pytest.approx(1.0), field
    assert not detect_degenerate(TRIAGE, obj, obj, identifiers={"1"}, examples=["x"]).any


# --------------------------------------------------------------------------- detectors


def test_slot_id_detector_reads_runs_of_ids_and_names() -> None:
    gold = {**TICKET_GOLD}
    ids = {"1", "2", "3", "customer_name", "order_id"}
    for value in ("5", "2 3", "<3>", "3:1", "1, 2, 3", "ORDER_ID"):
        found = detect_degenerate(
            TICKET, {**gold, "customer_name": value}, gold, identifiers=ids | {"5"}
        )
        assert found.flags["slot_id"] == {"customer_name"}, value
    found = detect_degenerate(TICKET, {**gold, "customer_name": "2 apples"}, gold, identifiers=ids)
    assert found.flags["slot_id"] == frozenset()
    # A value that is the gold answer is never flagged, whatever it looks like.
    odd_gold = {**gold, "customer_name": "2"}
    assert not detect_degenerate(TICKET, odd_gold, odd_gold, identifiers=ids).any


def test_example_copy_detector() -> None:
    examples = ["Example customer name", "Example order id", 1.0, "2025-01-31", "positive", True]
    flagged = detect_degenerate(
        TICKET,
        {**TICKET_GOLD, "customer_name": "Example", "order_id": "example order id"},
        TICKET_GOLD,
        examples=examples,
    )
    assert flagged.flags["example_copy"] == {"customer_name", "order_id"}
    # Enum and boolean values equal to the example are not counted; nor are short prefixes.
    quiet = detect_degenerate(
        TICKET,
        {**TICKET_GOLD, "sentiment": "positive", "refund_requested": False, "customer_name": "Ex"},
        TICKET_GOLD,
        examples=examples,
    )
    assert quiet.flags["example_copy"] == frozenset()
    right = {**TICKET_GOLD, "order_date": "2025-01-31"}
    assert not detect_degenerate(TICKET, right, right, examples=examples).any


def test_schema_prose_is_every_title_and_description() -> None:
    prose = schema_prose(MEETING)
    assert "meetingnotes" in prose
    assert "minutes of one meeting, taken from its transcript." in prose
    assert "what will be done." in prose  # a field's description
    assert all(p == normalize_text(p) for p in prose)


def test_example_copy_counts_the_schema_s_own_words() -> None:
    """A value that copies the form's name or a field's meaning, as a small model
    writes it, is an example copy: the schema's titles and descriptions are the text
    the prompt shows."""
    gold = {
        "title": "Weekly sync",
        "date": "2024-03-12",
        "attendees": ["Hannah Schmidt"],
        "action_items": [{"task": "Merge the fix", "owner": "Hannah Schmidt", "due": "2024-03-14"}],
    }
    copied = {
        **gold,
        "title": "MeetingNotes. Minutes of one meeting, taken from its transcript.",
        "attendees": ["Names of the people present"],  # a description, whole
        "action_items": [
            {"task": "What will be done.", "owner": "Hannah Schmidt", "due": "2024-03-14"}
        ],
    }
    found = detect_degenerate(MEETING, copied, gold)
    assert found.flags["example_copy"] == {"title", "attendees[]", "action_items[].task"}
    # Its first words are a copy too; one or two words, or a real value that begins
    # with a short title ("Date" is the title of `date`), are not.
    words = {**gold, "title": "Minutes of one", "attendees": ["Names"]}
    assert detect_degenerate(MEETING, words, gold).flags["example_copy"] == {"title"}
    real = {**gold, "title": "Date review", "attendees": ["Hannah Schmidt", "Minutes Man"]}
    assert detect_degenerate(MEETING, real, gold).flags["example_copy"] == frozenset()
    # The right answer is never flagged, whatever it looks like.
    odd = {**gold, "title": "MeetingNotes"}
    assert not detect_degenerate(MEETING, odd, odd).any


def test_example_copy_flags_a_value_equal_to_a_short_title() -> None:
    """Equal to a title or description counts whatever its length (``Owner`` in
    ``owner``, ``Title`` in ``title``); only beginning with one needs eight characters."""
    gold = {
        "title": "Weekly sync",
        "date": "2024-03-12",
        "attendees": ["Hannah Schmidt"],
        "decisions": [],
        "action_items": [{"task": "Merge the fix", "owner": "Hannah Schmidt", "due": "2024-03-14"}],
    }
    copied = {
        **gold,
        "title": "Title",
        "action_items": [{"task": "Task", "owner": "owner", "due": "2024-03-14"}],
    }
    found = detect_degenerate(MEETING, copied, gold)
    assert found.flags["example_copy"] == {"title", "action_items[].task", "action_items[].owner"}
    real = {**gold, "title": "Title review", "attendees": ["Hannah Schmidt", "Owen Ownership"]}
    assert detect_degenerate(MEETING, real, gold).flags["example_copy"] == frozenset()


def test_repeated_value_detector() -> None:
    gold = {
        "title": "Weekly sync",
        "date": "2024-03-12",
        "attendees": ["Hannah Schmidt", "Luis Ortega"],
        "decisions": ["Ship it"],
        "action_items": [{"task": "Merge", "owner": "Luis Ortega", "due": "2024-03-14"}],
    }
    copied = {
        **gold,
        "attendees": ["2025-01-31"],
        "decisions": ["2025-01-31"],
        "action_items": [{"task": "2025-01-31", "owner": "Luis Ortega", "due": "2025-01-31"}],
    }
    found = detect_degenerate(MEETING, copied, gold)
    assert found.flags["repeated"] == {
        "attendees[]",
        "decisions[]",
        "action_items[].task",
        "action_items[].due",
    }
    # Right values do not count, even repeated: the owner is also an attendee in the
    # gold, and a right item repeated is still right.
    assert not detect_degenerate(MEETING, gold, gold).any
    assert not detect_degenerate(MEETING, {**gold, "decisions": ["Ship it"] * 3}, gold).any
    # Items of one list of strings repeating each other do count...
    same_list = {**gold, "decisions": ["Merge the fix", "Ship it", "merge  the FIX"]}
    assert detect_degenerate(MEETING, same_list, gold).flags["repeated"] == {"decisions[]"}
    # ...but the fields of two action items may share a value (one owner, one due date).
    shared = [
        {"task": "Merge", "owner": "Ana Lopez", "due": "2024-03-20"},
        {"task": "Deploy", "owner": "Ana Lopez", "due": "2024-03-20"},
    ]
    assert not detect_degenerate(MEETING, {**gold, "action_items": shared}, gold).any
    # Enum fields are no source of repetition: a tag equal to the product area is fine.
    triage = {**TRIAGE_GOLD, "product_area": "billing", "tags": ["billing"]}
    assert not detect_degenerate(TRIAGE, triage, {**triage, "tags": ["refund"]}).flags["repeated"]


def test_repeated_detector_finds_near_copies() -> None:
    gold = {
        "title": "Three days in Lisbon on a budget",
        "date": "2024-03-12",
        "attendees": ["Hannah Schmidt"],
        "decisions": ["Book the hostel near Alfama", "Buy the Lisboa card"],
        "action_items": [],
    }
    title = "A beginner-friendly guide to making kimchi (김치) at home."
    near = {
        **gold,
        "title": title,
        "decisions": ["A beginner-friendly guide to making kimchi at home", "Buy the card"],
    }
    found = detect_degenerate(MEETING, near, gold).flags["repeated"]
    assert found == {"title", "decisions[]"}
    assert token_f1(title, near["decisions"][0]) >= NEAR_COPY_F1
    # Sharing words is not copying: below the F1 bound, or below three words (compared
    # for equality only), nothing is flagged.
    apart = {**near, "decisions": ["A guide to cooking rice at home", "Buy the card"]}
    assert token_f1(title, apart["decisions"][0]) < NEAR_COPY_F1
    assert not detect_degenerate(MEETING, apart, gold).flags["repeated"]
    short = {**gold, "title": "Lisbon trip", "decisions": ["Lisbon trip!", "Buy the card"]}
    assert detect_degenerate(MEETING, short, gold).flags["repeated"] == set()
    assert NEAR_COPY_MIN_WORDS == 3


def test_near_copies_are_compared_among_a_bounded_number_of_texts() -> None:
    gold = {"title": "Weekly sync", "date": "2024-03-12", "attendees": [], "decisions": []}
    # The title and MAX_NEAR_COPY_TEXTS - 1 items fill the texts compared pairwise; an
    # item after them that nearly copies the title is compared for equality only.
    items = [f"a{i} b{i} c{i}" for i in range(MAX_NEAR_COPY_TEXTS - 1)]  # no two alike
    title = "the budget for the offsite was approved"
    copy = {**gold, "title": title, "decisions": [*items, "The budget for the offsite approved"]}
    assert not detect_degenerate(MEETING, copy, gold).flags["repeated"]
    # Within the bound the same near copy is found.
    early = {**copy, "decisions": ["The budget for the offsite approved", *items]}
    assert detect_degenerate(MEETING, early, gold).flags["repeated"] == {"title", "decisions[]"}


def test_empty_detector_needs_a_gold_answer() -> None:
    gold = TRIAGE_GOLD
    empty = {**gold, "summary": "", "tags": [" "]}
    assert detect_degenerate(TRIAGE, empty, gold).flags["empty"] == {"summary", "tags[]"}
    assert not detect_degenerate(TRIAGE, empty, None).flags["empty"]
    assert detect_degenerate(TRIAGE, None, gold).fields == len(schema_fields(TRIAGE))
    assert not detect_degenerate(TRIAGE, None, gold).any
