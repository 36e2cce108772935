"""A reasoning block before the frames (``<think>…</think>``, as reasoning models write
it when the server leaves it in the content): not read as frames, in every syntax,
however the stream is chunked, with confidence placed past it, through the SDK."""

from __future__ import annotations

import asyncio
import math
import re

import openai
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

import slotflight
from slotflight.assemble.assembler import Assembler
from slotflight.assemble.confidence import TokenLogprob
from slotflight.assemble.events import Diagnostic, Event
from slotflight.assemble.reasoning import MAX_LEADING_BLANKS, OPENING_TAGS, ReasoningBlock
from slotflight.plan.compiler import compile
from slotflight.syntax import SYNTAXES, render_frames
from slotflight.testing import RandomChunks, Reply, ScriptedServer
from tests.test_confidence import completes


class Ticket(BaseModel):
    title: str
    tags: list[str]
    priority: int


PLAN = compile(Ticket)
ANSWER = Ticket(title="Export job failed", tags=["bug", "export"], priority=3)
THOUGHT = Ticket(title="thinking out loud", tags=["maybe"], priority=5)


def frames(ticket: Ticket, syntax: str) -> str:
    return render_frames(PLAN, ticket.model_dump(), syntax)


def run(chunks: list[str], syntax: str, *, complete: bool = True) -> tuple[Assembler, list[Event]]:
    asm = Assembler(PLAN, syntax=syntax)
    events: list[Event] = []
    for chunk in chunks:
        events += asm.feed(chunk)
    events += asm.close(complete=complete)
    return asm, events


def codes(events: list[Event]) -> list[str]:
    return [e.code for e in events if isinstance(e, Diagnostic)]


@pytest.mark.parametrize("syntax", sorted(SYNTAXES))
@pytest.mark.parametrize("tag", OPENING_TAGS)
def test_frames_inside_a_reasoning_block_are_not_read(syntax: str, tag: str) -> None:
    closing = "</" + tag[1:]
    text = f"  \n{tag}\n{frames(THOUGHT, syntax)}{closing}\n\n{frames(ANSWER, syntax)}"
    asm, events = run([text], syntax)
    assert asm.outcome.ok
    assert asm.result == ANSWER
    assert codes(events) == ["reasoning"]
    assert not any(isinstance(e, Diagnostic) and e.code == "duplicate_frame" for e in events)


@pytest.mark.parametrize("syntax", sorted(SYNTAXES))
def test_without_a_block_nothing_changes(syntax: str) -> None:
    text = frames(ANSWER, syntax)
    asm, events = run([text], syntax)
    assert asm.result == ANSWER
    assert "reasoning" not in codes(events)


def test_the_answer_may_follow_the_closing_tag_on_its_line() -> None:
    asm, _ = run(["<think>hmm</think>" + frames(ANSWER, "v4")], "v4")
    assert asm.result == ANSWER


def test_a_block_never_closed_leaves_the_pass_without_frames() -> None:
    asm, events = run(["<think>\n", frames(ANSWER, "v4")], "v4", complete=False)
    assert not asm.outcome.ok
    assert asm.state == {}
    assert codes(events) == ["reasoning"]
    assert "ended inside a reasoning block" in next(
        e.message for e in events if isinstance(e, Diagnostic)
    )


@pytest.mark.parametrize(
    "lead",
    ["<thinker>\n", "<Think>\n", "x<think>\n", " " * (MAX_LEADING_BLANKS + 1) + "<think>\n"],
)
def test_only_the_exact_tag_near_the_start_opens_a_block(lead: str) -> None:
    """Anything else is read as it is: the frames after it count, the first of a kind."""
    asm, events = run([lead + frames(ANSWER, "v4"), "</think>\n", frames(THOUGHT, "v4")], "v4")
    assert asm.result == ANSWER
    assert "reasoning" not in codes(events)


_PIECES = st.sampled_from(
    ["<", "/", "think", "thinking", ">", "</think>", "<think>", "\n", " ", "title: x", "end"]
)


@settings(max_examples=150, deadline=None)
@given(
    syntax=st.sampled_from(sorted(SYNTAXES)),
    lead=st.lists(_PIECES, max_size=8).map("".join),
    cuts=st.lists(st.integers(0, 400), max_size=12),
)
def test_reading_does_not_depend_on_chunking(syntax: str, lead: str, cuts: list[int]) -> None:
    """Any text before the answer (blocks, partial tags, stray closings), split anywhere:
    the same events as in one piece."""
    text = lead + frames(ANSWER, syntax)
    points = sorted({c % (len(text) + 1) for c in cuts})
    chunks = [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True)]
    whole = [e.to_json() for e in run([text], syntax)[1] if e.type != "slot-delta"]
    split = [e.to_json() for e in run(chunks, syntax)[1] if e.type != "slot-delta"]
    assert split == whole


def test_what_is_held_back_inside_a_block_stays_small() -> None:
    block = ReasoningBlock()
    assert block.feed("<think>") == ""
    for _ in range(1000):
        assert block.feed("</thin" + "k" * 997) == ""
        assert len(block._held) < len("</think>")
    assert block.inside and block.skipped >= 1000 * 1000 - len("</think>")
    assert block.feed("</think>done") == "done"
    assert block.closed and block.feed("more") == "more"


def test_confidence_is_placed_past_the_block() -> None:
    """The server's tokens cover the block too: each value still gets its own tokens."""
    answer = "title: Export job failed\ntags: bug\ntags: export\npriority: 3\nend\n"
    lead = "<think>\nThe user wants a ticket.\ntitle: no\n</think>\n\n"
    parts = re.findall(r" ?[^ \n]+|\n", lead + answer)
    logprobs = [-0.03 * (i % 5) for i in range(len(parts))]
    first = len(re.findall(r" ?[^ \n]+|\n", lead))

    def figures(pairs: list[tuple[str, float]]) -> dict[str, float | None]:
        asm = Assembler(PLAN, syntax="v3", confidence=True)
        return completes(asm, [(text, [TokenLogprob(text, lp)]) for text, lp in pairs])

    pairs = list(zip(parts, logprobs, strict=True))
    with_block = figures(pairs)
    without = figures(pairs[first:])
    assert with_block == without
    assert with_block["/title"] == pytest.approx(math.exp(sum(logprobs[first + 1 : first + 4])))


def test_the_sdk_returns_the_answer_not_the_thinking() -> None:
    text = f"<think>\nLet me see.\n{frames(THOUGHT, 'v4')}</think>\n\n{frames(ANSWER, 'v4')}"
    with ScriptedServer([Reply(text, chunks=RandomChunks(seed=4))]) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="test", max_retries=0)
        with slotflight.stream(
            client, model="m", messages=[{"role": "user", "content": "x"}], output=Ticket
        ) as s:
            events = list(s)
            assert s.final() == ANSWER
        assert len(server.requests) == 1
    assert [e.code for e in events if isinstance(e, Diagnostic)] == ["reasoning"]


def test_thinking_in_a_field_of_its_own_is_not_read() -> None:
    """A server that parses the thinking out (``reasoning_content``): only the content is
    read, in the sync and the async stream."""
    thought = f"Let me see.\n{frames(THOUGHT, 'v4')}"
    reply = Reply(frames(ANSWER, "v4"), reasoning=thought, chunks=RandomChunks(seed=2))
    with ScriptedServer([reply, reply, reply]) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="test", max_retries=0)
        stream = client.chat.completions.create(model="m", messages=[], stream=True)
        deltas = [c.choices[0].delta for c in stream if c.choices]
        assert (
            "".join((d.model_extra or {}).get("reasoning_content", "") for d in deltas) == thought
        )
        assert "".join(d.content or "" for d in deltas) == frames(ANSWER, "v4")
        messages = [{"role": "user", "content": "x"}]
        got = slotflight.complete(client, model="m", messages=messages, output=Ticket)
        assert got == ANSWER
        aclient = openai.AsyncOpenAI(base_url=server.base_url, api_key="test", max_retries=0)
        coroutine = slotflight.acomplete(aclient, model="m", messages=messages, output=Ticket)
        assert asyncio.run(coroutine) == ANSWER
        assert len(server.requests) == 3


def test_a_non_streaming_answer_carries_the_thinking_beside_the_content() -> None:
    with ScriptedServer([Reply("done", reasoning="hmm")]) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="test", max_retries=0)
        message = client.chat.completions.create(model="m", messages=[]).choices[0].message
        assert message.content == "done"
        assert (message.model_extra or {}).get("reasoning_content") == "hmm"


def test_reply_reasoning_must_be_text() -> None:
    with pytest.raises(TypeError, match="reasoning"):
        Reply("x", reasoning=3)  # type: ignore[arg-type]
