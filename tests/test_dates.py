"""A ``date`` slot written out with a month name (``12 March 2024``) is read as ISO.

The reading on its own (:func:`iso_date`), through the assembler in every syntax (the
state holds ISO text, never the written form), and through llama.cpp's grammar engine
(the grammar admits the written forms for ``date`` slots only).
"""

from __future__ import annotations

import calendar
import re
from datetime import date, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from slotflight._dates import MONTH_NAMES, iso_date
from slotflight.plan.compiler import compile as compile_schema
from slotflight.syntax import SYNTAXES, grammar, render_frames
from tests.grammar_support import GrammarEngine, grammar_engine
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


@pytest.fixture(scope="module")
def engine() -> GrammarEngine:
    return grammar_engine()


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
