"""``slotflight demo`` against a scripted server: a value kept although a slot check
failed on it again is shown as doubtful, never as an answer like the others."""

from __future__ import annotations

import io
import json

from rich.console import Console

from slotflight.cli.demo import run_demo
from slotflight.testing import Reply, ScriptedServer

FIRST = (
    "customer: Dana Whitfield\n"
    "company: Harbor Freight Logistics\n"
    "summary: The nightly CSV export fails for files over 2 GB\n"
    "area: export\n"
    "sentiment: negative\n"
    "deadline: Friday (optional) (may be\n"
    "end\n"
)
AGAIN = "deadline: Friday (optional) (may be\nend\n"


def test_the_demo_marks_a_flagged_value_and_says_why() -> None:
    with ScriptedServer([Reply(text=FIRST), Reply(text=AGAIN)]) as server:
        out = io.StringIO()
        code = run_demo(
            model="m",
            base_url=server.base_url,
            api_key="k",
            console=Console(file=out, width=10_000, force_terminal=False),
        )
        requests = len(server.requests)
    text = out.getvalue()
    assert code == 0
    assert requests == 2  # the note was asked for again once, then kept flagged
    assert (
        "? /deadline: The value copies a note from the form instead of a value taken from "
        "the input. (schema_copy)"
    ) in text
    rows = [line for line in text.splitlines() if "/deadline" in line and "│" in line]
    assert rows and all("?" in row.rsplit("│", 2)[1] for row in rows)
    assert json.loads(text.strip().splitlines()[-1])["deadline"] == "Friday (optional) (may be"
