"""Quoted values (line syntaxes that write text as JSON strings): escapes and surrogate
pairs split across chunks, ``"null"`` as text, a stream cut inside a quoted value,
text after the closing quote, JSON slots holding a JSON string.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

from slotflight.assemble.events import Diagnostic, SlotFailed
from slotflight.plan.compiler import compile as compile_schema
from slotflight.syntax import SYNTAXES, grammar, render_frames
from slotflight.syntax.lines import LineSyntax
from tests.assembler_support import drive
from tests.grammar_support import PLAN_DATA, GrammarEngine, Plan

QUOTED = [n for n, s in SYNTAXES.items() if isinstance(s, LineSyntax) and s.quoted]


def test_a_quoted_syntax_is_registered() -> None:
    assert QUOTED


class Note(BaseModel):
    text: str
    comment: str | None
    data: Any = None


PLAN = compile_schema(Note)


def _head(syntax: str, path: str) -> str:
    chosen = SYNTAXES[syntax]
    assert isinstance(chosen, LineSyntax)
    return chosen.head(PLAN, PLAN.by_path(path), None)


def _codes(run: Any) -> list[str]:
    return [e.code for e in run.events if isinstance(e, Diagnostic)]


def _every_split(text: str, syntax: str, **kwargs: Any) -> Any:
    """Drive ``text`` whole, then cut in two at every character and every byte, and one
    character or byte at a time; every run must agree. Returns the whole run."""
    whole = drive([text], PLAN, syntax=syntax, **kwargs)
    data = text.encode("utf-8")
    splits: list[list[Any]] = [list(text), [data[i : i + 1] for i in range(len(data))]]
    splits += [[text[:i], text[i:]] for i in range(1, len(text))]
    splits += [[data[:i], data[i:]] for i in range(1, len(data))]
    for chunks in splits:
        run = drive(chunks, PLAN, syntax=syntax, check=False, **kwargs)
        assert run.non_delta() == whole.non_delta(), chunks
        assert run.deltas() == whole.deltas(), chunks
        assert run.final == whole.final, chunks
    return whole


VALUE = 'say "hi"\\ back\nslash / tab\t é 😀 \u2028 end'


@pytest.mark.parametrize("syntax", QUOTED)
@pytest.mark.parametrize("ascii_only", [False, True], ids=["utf8", "escaped"])
def test_escapes_and_surrogate_pairs_split_anywhere(syntax: str, ascii_only: bool) -> None:
    quoted = json.dumps(VALUE, ensure_ascii=ascii_only)
    if ascii_only:
        assert "\\ud83d\\ude00" in quoted  # the emoji as a surrogate pair
    text = f"{_head(syntax, 'text')} {quoted}\n{_head(syntax, 'comment')} null\nend\n"
    run = _every_split(text, syntax)
    assert run.final == {"text": VALUE.strip(), "comment": None, "data": None}
    assert _codes(run) == []


@pytest.mark.parametrize("syntax", QUOTED)
def test_writer_output_reads_back(syntax: str) -> None:
    # the text "null" is written quoted (the writer of every syntax refuses it, as a
    # raw syntax would read it back as null)
    value = {"text": VALUE, "comment": "PLACEHOLDER", "data": "a JSON string"}
    text = render_frames(PLAN, value, syntax).replace('"PLACEHOLDER"', '"null"')
    assert '"null"' in text
    run = _every_split(text, syntax)
    assert run.asm is not None and run.asm.outcome.ok, run.asm.outcome.errors
    assert run.final == {"text": VALUE.strip(), "comment": "null", "data": "a JSON string"}


@pytest.mark.parametrize("syntax", QUOTED)
def test_quoted_null_is_text_and_bare_null_is_null(syntax: str) -> None:
    text = f'{_head(syntax, "text")} "null"\n{_head(syntax, "comment")} "null"\nend\n'
    assert _every_split(text, syntax).final == {"text": "null", "comment": "null", "data": None}
    bare = f'{_head(syntax, "text")} "x"\n{_head(syntax, "comment")} null\nend\n'
    assert _every_split(bare, syntax).final == {"text": "x", "comment": None, "data": None}


@pytest.mark.parametrize("syntax", QUOTED)
def test_a_json_slot_keeps_a_json_string_as_written(syntax: str) -> None:
    text = f'{_head(syntax, "text")} "x"\n{_head(syntax, "data")} "a \\"b\\""\nend\n'
    run = _every_split(text, syntax)
    assert run.final["data"] == 'a "b"'


@pytest.mark.parametrize("syntax", QUOTED)
@pytest.mark.parametrize("complete", [True, False])
def test_a_stream_cut_inside_a_quoted_value_is_truncated(syntax: str, complete: bool) -> None:
    text = f'{_head(syntax, "comment")} "x"\n{_head(syntax, "text")} "cut here\\u00'
    run = _every_split(text, syntax, complete=complete)
    failed = [e for e in run.events if isinstance(e, SlotFailed)]
    assert [(e.path, e.error.code) for e in failed if e.error.code != "missing"] == [
        ("/text", "truncated")
    ]
    assert run.asm is not None and run.asm.completed() == {"/comment": "x"}
    assert "text" not in run.final


@pytest.mark.parametrize("syntax", QUOTED)
def test_text_after_the_closing_quote_is_ignored_and_reported(syntax: str) -> None:
    text = f'{_head(syntax, "text")} "kept" and "more"\n{_head(syntax, "comment")} null  \nend\n'
    run = _every_split(text, syntax)
    assert run.final == {"text": "kept", "comment": None, "data": None}
    assert _codes(run) == ["after_value"]
    assert "11 characters" in str(run.asm.diagnostics)  # type: ignore[union-attr]


@pytest.mark.parametrize("syntax", QUOTED)
def test_a_line_end_inside_a_quoted_value_ends_it_with_a_diagnostic(syntax: str) -> None:
    text = f'{_head(syntax, "text")} "no closing quote\n{_head(syntax, "comment")} null\nend\n'
    run = _every_split(text, syntax)
    assert run.final == {"text": "no closing quote", "comment": None, "data": None}
    assert _codes(run) == ["unterminated_string"]


@pytest.mark.parametrize("syntax", QUOTED)
def test_invalid_escapes_and_lone_surrogates_become_replacement_characters(syntax: str) -> None:
    # an invalid escape is replaced as a whole: "\\x", a lone half, "\\u12" before the quote
    body = '"a\\x b\\ud800 c\\udc00 d\\u12"'
    text = f"{_head(syntax, 'text')} {body}\n{_head(syntax, 'comment')} null\nend\n"
    run = _every_split(text, syntax)
    assert run.final["text"] == "a\ufffd b\ufffd c\ufffd d\ufffd"


@pytest.mark.parametrize("syntax", QUOTED)
def test_a_raw_value_is_one_line(syntax: str) -> None:
    text = f"{_head(syntax, 'text')} raw text\n|not a continuation\nend\n"
    run = _every_split(text, syntax)
    assert run.final == {"text": "raw text"}
    assert _codes(run) == ["noise"]


@pytest.mark.parametrize("syntax", QUOTED)
def test_a_bounded_string_may_start_with_an_escaped_character(
    syntax: str, engine: GrammarEngine
) -> None:
    """A one-line bounded string (compact mode, or ``maxLength``) starts with a character
    that is not blank; an escaped quote or backslash is such a character."""
    plan = compile_schema(Plan)
    for value in ('"quoted" first', "\\back first", "/ slash"):
        text = render_frames(plan, {**PLAN_DATA, "summary": value}, syntax)
        assert engine.accepts(grammar(plan, syntax, max_string_chars=40), text), value
    for value in (" blank first", "\nnewline first"):  # the writer refuses them: spliced in
        text = render_frames(plan, {**PLAN_DATA, "summary": "PLACEHOLDER"}, syntax)
        text = text.replace('"PLACEHOLDER"', json.dumps(value))
        assert not engine.accepts(grammar(plan, syntax, max_string_chars=40), text), value
