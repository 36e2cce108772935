"""Nothing cut is taken as complete, nothing missing is taken as empty (SDK, real HTTP).

A pass is whole only when the model ended it (``finish_reason: stop``) and, in a
syntax with an end marker, wrote it. A value cut by the token limit or a dropped
connection is regenerated, and a required list of objects the stream never reached is
asked for again as a whole.
"""

from __future__ import annotations

import pytest
from pydantic import BaseModel, Field

import slotflight
from slotflight.plan.instance import walk_instance
from slotflight.syntax import SYNTAXES, get_syntax
from slotflight.testing import Reply, ScriptedServer

MESSAGES = [{"role": "user", "content": "Summarise the incident."}]


class Report(BaseModel):
    summary: str
    severity: int = Field(ge=1, le=5)


class Action(BaseModel):
    owner: str
    task: str


class Followup(BaseModel):
    title: str
    priority: int
    actions: list[Action]


REPORT = Report(summary="Export job failed for large workspaces", severity=4)
FOLLOWUP = Followup(
    title="Fix export", priority=2, actions=[Action(owner="Ada", task="Raise the limit")]
)
#: The frames before the list (a number last: it is complete at its newline in every
#: syntax, unlike text, which may go on).
HEAD = ("/title", "/priority")


def _text(
    model: BaseModel, syntax: str, *, under: tuple[str, ...] = ("",), end: bool = True
) -> str:
    """The frames of ``model`` in ``syntax`` whose pointer starts with one of ``under``;
    with ``end=False``, without the end marker (what a stream cut after them carries)."""
    plan = slotflight.compile(type(model))
    frames = [f for f in walk_instance(plan, model) if f.pointer.startswith(under)]
    written = get_syntax(syntax).write(plan, frames)
    if not end and get_syntax(syntax).end_marker:
        written = written[: written.rindex("end\n")]
    return written


def _client(server: ScriptedServer) -> object:
    import openai

    return openai.OpenAI(base_url=server.base_url, api_key="test", max_retries=0)


@pytest.mark.parametrize("syntax", sorted(SYNTAXES))
def test_a_value_cut_by_the_token_limit_is_regenerated(syntax: str) -> None:
    whole = _text(REPORT, syntax)
    cut = whole[: whole.index("large")]  # inside the summary
    repaired = _text(Report(summary=REPORT.summary, severity=4), syntax)
    with ScriptedServer([Reply(cut, finish_reason="length"), Reply(repaired)]) as server:
        result = slotflight.complete(
            _client(server), model="m", messages=MESSAGES, output=Report, syntax=syntax
        )
        bodies = [r.body for r in server.requests]
    assert result == REPORT
    assert len(bodies) == 2, "the cut summary was accepted instead of being asked for again"


@pytest.mark.parametrize("syntax", sorted(SYNTAXES))
def test_a_dropped_connection_cuts_the_open_value(syntax: str) -> None:
    whole = _text(REPORT, syntax)
    cut_at = len(whole[: whole.index("large")].encode())
    with ScriptedServer(
        [Reply(whole, drop_after_bytes=cut_at), Reply(_text(REPORT, syntax))]
    ) as server:
        result = slotflight.complete(
            _client(server), model="m", messages=MESSAGES, output=Report, syntax=syntax
        )
        assert len(server.requests) == 2
    assert result.summary == REPORT.summary


@pytest.mark.parametrize("syntax", sorted(SYNTAXES))
def test_a_required_list_of_objects_the_stream_never_reached_is_asked_for(syntax: str) -> None:
    first = _text(FOLLOWUP, syntax, under=HEAD, end=False)  # then the stream is cut
    with ScriptedServer(
        [Reply(first, finish_reason="length"), Reply(_text(FOLLOWUP, syntax, under=("/actions",)))]
    ) as server:
        with slotflight.stream(
            _client(server), model="m", messages=MESSAGES, output=Followup, syntax=syntax
        ) as s:
            result = s.final()
        follow_up = server.requests[1].body["messages"][-1]["content"]
    assert result == FOLLOWUP
    assert "actions" in follow_up


@pytest.mark.parametrize("syntax", sorted(SYNTAXES))
def test_a_list_that_never_arrives_fails_instead_of_becoming_empty(syntax: str) -> None:
    first = _text(FOLLOWUP, syntax, under=HEAD, end=False)
    with (
        ScriptedServer([Reply(first, finish_reason="length")] * 3) as server,
        pytest.raises(slotflight.OutputValidationError) as caught,
    ):
        slotflight.complete(
            _client(server), model="m", messages=MESSAGES, output=Followup, syntax=syntax
        )
    assert any(e.location == "/actions" for e in caught.value.errors)
