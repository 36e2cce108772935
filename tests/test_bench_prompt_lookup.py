"""The prompt lookup benchmark: its draft, where it sees a first field, and a real run
on the embedded model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.local_support import require_local_model

require_local_model()

from benchmarks.prompt_lookup import RecentLookup, first_field_end, main, ratios  # noqa: E402


def _ids(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.intc)


def test_the_draft_follows_the_latest_earlier_place_of_the_last_tokens() -> None:
    draft = RecentLookup(longest=4, shortest=3, size=4)
    #          0  1  2  3  4  5  6  7  8  9 10 11 12
    ids = _ids(1, 2, 3, 9, 9, 1, 2, 3, 7, 8, 5, 1, 2, 3)
    # the last 3 tokens (1 2 3) were last seen at 5: what came after them, 4 at most
    assert draft(ids).tolist() == [7, 8, 5, 1]
    assert draft.proposed == 4
    # a longer match wins over a later shorter one
    ids = _ids(4, 1, 2, 3, 6, 1, 2, 3, 7, 4, 1, 2, 3)
    assert draft(ids).tolist() == [6, 1, 2, 3]
    # the proposal stops at the end of the text
    assert draft(_ids(1, 2, 3, 1, 2, 3)).tolist() == [1, 2, 3]


def test_no_draft_without_a_match_of_the_shortest_length() -> None:
    draft = RecentLookup(longest=4, shortest=3, size=4)
    assert draft(_ids(1, 2, 5, 1, 2)).tolist() == []  # only 2 tokens repeat
    assert draft(_ids(1, 2)).tolist() == []
    assert draft.proposed == 0


@given(st.lists(st.integers(0, 3), max_size=40))
def test_a_draft_is_always_text_that_followed_the_same_tokens(values: list[int]) -> None:
    draft = RecentLookup(longest=4, shortest=2, size=5)(_ids(*values)).tolist()
    assert len(draft) <= 5
    end = len(values)
    places = [
        (start, n)
        for n in (2, 3, 4)
        if end > n
        for start in range(end - n)
        if values[start : start + n] == values[-n:]
    ]
    if not draft:
        assert not places
    else:
        assert any(values[start + n : start + n + len(draft)] == draft for start, n in places)


def test_the_first_field_ends_at_the_first_line_or_after_the_first_json_value() -> None:
    assert first_field_end("title: Q3 plan", "slots") is None
    assert first_field_end("title: Q3 plan\ndate:", "slots") == 14
    assert first_field_end('{"title": "a, \\"b\\"", "date"', "json") == 20
    assert first_field_end('{"tags": ["a", "b"], "x": 1}', "json") == 19
    assert first_field_end('{"n": {"a": 1, "b": 2}}', "json") == 22
    assert first_field_end('{"title": "still writing, ', "json") is None


def test_ratios_are_medians_over_the_answers_of_a_mode() -> None:
    def row(mode: str, plain: tuple[float | None, int], drafted: tuple[float, int]) -> Any:
        return {
            "mode": mode,
            "without": {"whole_s": plain[0], "tokens": plain[1]},
            "with_draft": {"whole_s": drafted[0], "tokens": drafted[1]},
        }

    rows = [
        row("slots", (2.0, 10), (1.0, 10)),  # 0.5, per token 0.5
        row("slots", (1.0, 10), (1.0, 20)),  # 1.0, per token 0.5
        row("slots", (1.0, 10), (3.0, 10)),  # 3.0, per token 3.0
        row("json_schema", (None, 10), (1.0, 10)),
    ]
    assert ratios(rows, "slots", "whole_s") == 1.0
    assert ratios(rows, "slots", "whole_s", per_token=True) == 0.5
    assert ratios(rows, "json_schema", "whole_s") is None


@pytest.mark.local_model
def test_the_benchmark_times_batches_and_answers_with_and_without_a_draft(
    tmp_path: Path,
) -> None:
    out = tmp_path / "lookup.json"
    main(
        [
            *("--tasks", "1", "--rounds", "1", "--context", "32"),
            *("--max-tokens", "48", "--json", str(out)),
        ]
    )
    figures = json.loads(out.read_text(encoding="utf-8"))["rows"][0]
    assert [row["batch"] for row in figures["batches"]][:2] == [1, 2]
    assert all(row["ms"] > 0 for row in figures["batches"])
    assert [(r["task"], r["mode"]) for r in figures["answers"]] == [
        ("meeting-001", "slots"),
        ("meeting-001", "json_schema"),
    ]
    for row in figures["answers"]:
        for side in ("without", "with_draft"):
            assert 0 < row[side]["tokens"] <= 48 and row[side]["passes"] >= 1
    assert set(figures["summary"]) == {"slots", "json_schema"}
    assert figures["summary"]["slots"]["answers"] == 1
