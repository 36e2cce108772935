"""Index diagnostics of a list of objects count the list's items, not each field's: a
field an earlier item left out may first come at a later index without
``index_skipped``, while a skipped item still gets one."""

from __future__ import annotations

from typing import Any

import pytest

from slotflight.assemble.events import Diagnostic
from slotflight.plan.compiler import compile as compile_schema
from slotflight.syntax import render_frames
from tests.assembler_support import SYNTAXES, drive, frames

PLAN = compile_schema(
    {
        "type": "object",
        "properties": {
            "rows": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"name": {"type": "string"}, "note": {"type": "string"}},
                    "required": ["name"],
                    "additionalProperties": False,
                },
            }
        },
        "required": ["rows"],
    }
)
NAME, NOTE = (next(s.id for s in PLAN.slots if s.path == f"rows[].{f}") for f in ("name", "note"))


def _diagnostics(run: Any) -> list[tuple[str, str]]:
    return [(e.code, e.message) for e in run.events if isinstance(e, Diagnostic)]


@pytest.mark.parametrize("syntax", SYNTAXES)
@pytest.mark.parametrize(
    "value",
    [
        {"rows": [{"name": "a"}, {"name": "b", "note": "n"}]},
        {"rows": [{"name": "a"}, {"name": "b"}, {"name": "c", "note": "n"}]},
        {"rows": [{"name": "a", "note": "m"}, {"name": "b"}, {"name": "c", "note": "n"}]},
    ],
)
def test_canonical_text_of_a_valid_instance_has_no_diagnostic(
    syntax: str, value: dict[str, Any]
) -> None:
    text = render_frames(PLAN, value, syntax)
    run = drive([text], PLAN, syntax=syntax)
    assert run.final == value
    assert _diagnostics(run) == [], text


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_a_skipped_item_of_a_list_of_objects_is_still_reported(syntax: str) -> None:
    pairs = [(f"{NAME}:0", "a"), (f"{NAME}:1", "b"), (f"{NOTE}:3", "n")]
    run = drive([frames(pairs, syntax, PLAN)], PLAN, syntax=syntax)
    skipped = [m for code, m in _diagnostics(run) if code == "index_skipped"]
    assert skipped == ["rows[].note index 3 came where 2 was expected"]
    assert run.final == {"rows": [{"name": "a"}, {"name": "b"}, {"note": "n"}]}
