"""Values as people write them: a ``date`` with a month name (``12 March 2024``) is read
as ISO, a ``number`` with digit groups or a currency sign (``$1,899.99``) as the number.

The readings on their own (:func:`iso_date`, :func:`plain_number`), through the
assembler in every syntax (the state holds the plain value, never the written form),
and through llama.cpp's grammar engine (the grammar admits the written forms where it
says).
"""

from __future__ import annotations

import calendar
import json
import re
from datetime import date, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, Field

from slotflight._written import MONTH_NAMES, iso_date, plain_number
from slotflight.plan.compiler import compile as compile_schema
from slotflight.syntax import SYNTAXES, grammar, render_frames
from tests.grammar_support import GrammarEngine
from tests.schema_support import assemble

_NAMES_OF = {n: [name for name, m in MONTH_NAMES.items() if m == n] for n in range(1, 13)}


@given(day=st.dates(min_value=date(1000, 1, 1)), data=st.data())
def test_every_written_form_of_a_real_day_reads_as_its_iso_text(
    day: date, data: st.DataObject
) -> None:
    month = data.draw(st.sampled_from(_NAMES_OF[day.month]))
    case = data.draw(st.sampled_from([str, str.lower, str.upper]))
    for text in (f"{day.day} {month} {day.year}", f"{month} {day.day}, {day.year}"):
        assert iso_date(case(text)) == day.isoformat(), text


@pytest.mark.parametrize(
    "text",
    [
        "31 February 2024",
        "29 Feb 2023",
        "31 April 2025",
        "0 March 2024",
        "March 2024",
        "12 March 24",
        "12 Marchy 2024",
        "12  March 2024",
        "March 12 2024",
        "2024-03-12",
        "12/03/2024",
        "",
    ],
)
def test_anything_else_is_not_a_written_date(text: str) -> None:
    assert iso_date(text) is None


def test_every_month_has_its_full_and_abbreviated_english_name() -> None:
    assert [MONTH_NAMES[calendar.month_name[n]] for n in range(1, 13)] == list(range(1, 13))
    assert [MONTH_NAMES[calendar.month_abbr[n]] for n in range(1, 13)] == list(range(1, 13))


class Meeting(BaseModel):
    title: str
    day: date
    follow_up: date | None = None
    starts: datetime


_MEETING = {"title": "Sync", "day": "2024-03-12", "starts": "2024-03-12T10:00:00Z"}


def _frames(syntax: str, day: str) -> str:
    text = render_frames(compile_schema(Meeting), _MEETING, syntax)
    return re.sub("2024-03-12(?!T)", day, text, count=1)


@pytest.mark.parametrize("syntax", SYNTAXES)
@pytest.mark.parametrize(
    "written", ["12 March 2024", "March 12, 2024", "12 Mar 2024", "12 march 2024"]
)
def test_the_state_holds_the_iso_date_of_a_written_one(syntax: str, written: str) -> None:
    text = _frames(syntax, written)
    assert written in text
    fed = assemble(compile_schema(Meeting), text, syntax)
    assert fed.asm.outcome.ok, fed.asm.outcome.errors
    assert fed.state["day"] == "2024-03-12"
    assert all(state.get("day") in (None, "2024-03-12") for state in fed.states)


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_a_written_date_of_no_real_day_fails_its_slot(syntax: str) -> None:
    fed = assemble(compile_schema(Meeting), _frames(syntax, "31 February 2024"), syntax)
    assert not fed.asm.outcome.ok
    assert "day" not in fed.state
    assert [e.path for e in fed.of_type("slot-failed")] == ["/day"]  # type: ignore[attr-defined]


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_the_grammar_admits_a_date_written_out_and_nothing_else(
    engine: GrammarEngine, syntax: str
) -> None:
    g = grammar(compile_schema(Meeting), syntax)
    for good in [
        "2024-03-12",
        "12 March 2024",
        "March 12, 2024",
        "3 Sept 2025",
        "Sep 3, 2025",
        "1 May 2025",
    ]:
        assert engine.accepts(g, _frames(syntax, good)), good
    for bad in [
        "12 march 2024",
        "12 Marc 2024",
        "March 2024",
        "32 March 2024",
        "12 March 24",
        "12-03-2024",
        "03 March 2024",
    ]:
        assert not engine.accepts(g, _frames(syntax, bad)), bad
    starts = render_frames(compile_schema(Meeting), _MEETING, syntax)
    assert not engine.accepts(g, starts.replace("2024-03-12T", "12 March 2024T"))


# -- numbers ------------------------------------------------------------------------------


@given(
    amount=st.decimals(min_value=0, max_value=10**12, places=2),
    sign=st.sampled_from(["", "-"]),
    currency=st.sampled_from(["", "$", "€", "£", "¥"]),
)
def test_a_number_with_digit_groups_and_a_currency_sign_reads_as_the_number(
    amount: Any, sign: str, currency: str
) -> None:
    assert plain_number(f"{sign}{currency}{amount:,.2f}") == f"{sign}{amount:.2f}"
    assert plain_number(f"{sign}{currency}{amount:.2f}") == f"{sign}{amount:.2f}"


@pytest.mark.parametrize(
    "text",
    ["1,89.99", "1,8999", "12,3456", ",123", "1,234,", "$$5", "5$", "$-5", "1e5", "$", "", "abc"],
)
def test_any_other_text_is_left_as_it_is(text: str) -> None:
    assert plain_number(text) == text


class Offer(BaseModel):
    price: float = Field(ge=0)
    change: float
    rating: float = Field(ge=0, le=5)


_OFFER = {"price": 12.5, "change": -3.25, "rating": 4.5}


def _offer(syntax: str, **written: str) -> str:
    """The frames of :data:`_OFFER` with some values written as given."""
    text = render_frames(compile_schema(Offer), _OFFER, syntax)
    for field, value in written.items():
        shown = re.escape(json.dumps(_OFFER[field]))
        text, found = re.subn(rf"(?<![0-9.]){shown}(?![0-9])", value, text, count=1)
        assert found == 1, (field, text)
    return text


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_the_state_holds_the_number_of_a_written_one(syntax: str) -> None:
    text = _offer(syntax, price="$1,899.99", change="-€1,000.25")
    fed = assemble(compile_schema(Offer), text, syntax)
    assert fed.asm.outcome.ok, fed.asm.outcome.errors
    assert fed.state == {"price": 1899.99, "change": -1000.25, "rating": 4.5}


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_the_grammar_admits_written_numbers_where_the_integer_part_is_unbounded(
    engine: GrammarEngine, syntax: str
) -> None:
    g = grammar(compile_schema(Offer), syntax)
    for price in ["1899.99", "1,899.99", "$1,899.99", "€59.90", "£325", "¥3,240", "1,234,567.5"]:
        assert engine.accepts(g, _offer(syntax, price=price)), price
    for price in ["1,89.99", "1,8999", "$$5", "5$", "-$5", "$1e3,000", "01,000"]:
        assert not engine.accepts(g, _offer(syntax, price=price)), price
    assert engine.accepts(g, _offer(syntax, change="-$1,000.5"))
    assert not engine.accepts(g, _offer(syntax, rating="$4.5"))


class Ledger(BaseModel):
    total: float
    count: int


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_a_number_s_unbounded_integer_part_stops_at_a_double_s_digits(
    engine: GrammarEngine, syntax: str
) -> None:
    """A number whose integer part has no bound takes at most 17 digits (18 in digit
    groups), a double's precision: a small model writing `84,000,000,…` to the token
    limit has to end the value; a larger number still fits, with an exponent. Its
    fraction takes at most 24 digits and its exponent 3. An integer (exact at any size)
    keeps every digit."""
    plan = compile_schema(Ledger)
    g = grammar(plan, syntax)
    text = render_frames(plan, {"total": 12.5, "count": 7}, syntax)

    def frames(total: str = "12.5", count: str = "7") -> str:
        out, found = re.subn(r"(?<![0-9.])12\.5(?![0-9])", total, text, count=1)
        out, also = re.subn(r"(?<![0-9.<])7(?![0-9>])", count, out, count=1)
        assert found == also == 1, out
        return out

    for total in ["9" * 17, "9" * 17 + ".25", "1e30", "1.5E+300", "999,999,999,999,999,999"]:
        assert engine.accepts(g, frames(total=total)), total
    for total in ["9" * 18, "1,000,000,000,000,000,000", "$" + "9" * 18]:
        assert not engine.accepts(g, frames(total=total)), total
    assert engine.accepts(g, frames(count="9" * 30))
    # the fraction and the exponent are bounded as well: every float's shortest form
    # fits (0.000 then 17 digits, an exponent of 3), a run of zeros does not go on
    for total in [repr(0.00012345678901234567), "0." + "0" * 23 + "1", "2.5e-308"]:
        assert engine.accepts(g, frames(total=total)), total
    for total in ["0." + "0" * 25, "1e0308", "0." + "0" * 24 + "1"]:
        assert not engine.accepts(g, frames(total=total)), total
