"""Reading a prompted JSON answer as an application does: an object in a Markdown code
fence is read without the fence; any other start than ``{`` is no object."""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slotflight.bench.fences import MAX_START, not_json_object, unfenced

OBJECT = json.dumps({"name": "Kettle", "tags": ["a ``` b"], "price": 59.9}, indent=2)


@pytest.mark.parametrize(
    ("start", "hopeless"),
    [
        ("", False),
        ("  \n", False),
        (" {", False),
        ('{"a"', False),
        ("`", False),
        ("``", False),
        ("```", False),
        ("```json", False),
        ("```json\n", False),
        ("```json\n  {", False),
        ("```\n{", False),
        ("``` json \n{", False),
        ("```json\n[1]", True),
        ("```json\nHere", True),
        ("```json\n```", True),
        ("```Here is the JSON", True),
        ("`x", True),
        ("Sure", True),
        ('"Sony"', True),
        ("[1]", True),
    ],
)
def test_an_answer_is_hopeless_once_it_opens_with_anything_but_an_object(
    start: str, hopeless: bool
) -> None:
    assert not_json_object(start) is hopeless


def test_the_start_is_decided_within_a_bounded_text() -> None:
    """Blanks, or a fence followed by blanks, go on being undecided only up to
    ``MAX_START`` characters: the reading never holds an unbounded start."""
    for opening in ("", "```json\n"):
        blanks = opening + " \n" * (MAX_START // 2)
        assert not_json_object(blanks[:MAX_START]) is False
        assert not_json_object(blanks + " ") is True
        assert not_json_object(blanks + "{") is False


@pytest.mark.parametrize(
    ("text", "body", "fenced"),
    [
        (OBJECT, OBJECT, False),
        ("```json\n" + OBJECT + "\n```", OBJECT + "\n", True),
        ("\n```\n" + OBJECT + "\n```\nEvery field is filled in.", OBJECT + "\n", True),
        ("```json\n" + OBJECT[:20], OBJECT[:20], True),  # cut before the fence closed
        ("```json", "", True),
    ],
)
def test_a_fenced_object_is_read_without_its_fence(text: str, body: str, fenced: bool) -> None:
    chunks, was_fenced = unfenced(((1.0, text),))
    assert "".join(piece for _, piece in chunks) == body
    assert was_fenced is fenced


@given(
    st.lists(st.integers(min_value=0, max_value=200), max_size=12),
    st.sampled_from(
        [("", ""), ("```json\n", ""), ("  ```\n", "\n```"), ("```json\n", "\n```\nDone.")]
    ),
)
def test_every_chunking_reads_the_same_object_at_the_same_times(
    cuts: list[int], fence: tuple[str, str]
) -> None:
    """However the text arrives, the object's text is the same, every piece keeps the
    time of the chunk it came in, and the times do not decrease."""
    opening, closing = fence
    text = opening + OBJECT + closing
    bounds = sorted({0, len(text), *(min(c, len(text)) for c in cuts)})
    chunks = tuple((float(i), text[a:b]) for i, (a, b) in enumerate(itertools.pairwise(bounds)))
    out, fenced = unfenced(chunks)
    assert fenced is bool(opening)
    body = "".join(piece for _, piece in out)
    assert json.loads(body) == json.loads(OBJECT)
    assert all(piece for _, piece in out)
    times = dict(chunks)
    for t, piece in out:
        assert piece in times[t]
    assert [t for t, _ in out] == sorted(t for t, _ in out)
