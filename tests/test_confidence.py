"""Confidence: token logprobs attributed to the values they wrote (sans-I/O), through the
SDK and the real ``openai`` client against the scripted server, and the benchmark's
threshold table."""

from __future__ import annotations

import asyncio
import math
import re
from typing import Any

import openai
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

import slotflight
from slotflight.assemble.assembler import Assembler
from slotflight.assemble.confidence import (
    TokenLedger,
    TokenLogprob,
    confidence,
    tokens_from_openai,
)
from slotflight.assemble.events import SlotComplete
from slotflight.bench.calibration import (
    FieldConfidence,
    display_path,
    field_confidences,
    render,
    threshold_rows,
)
from slotflight.plan.compiler import compile
from slotflight.testing import RandomChunks, Reply, ScriptedServer


class Ticket(BaseModel):
    title: str
    tags: list[str]
    priority: int


PLAN = compile(Ticket)
TEXT = "title: Export job failed\ntags: bug\ntags: export\npriority: 3\nend\n"
TOKENS = re.findall(r" ?[^ \n]+|\n", TEXT)
LOGPROBS = [-0.05 * (i % 7) for i in range(len(TOKENS))]
#: The tokens of each value, by hand: " Export job failed", " bug", " export", " 3".
EXPECTED = {
    "/title": math.exp(sum(LOGPROBS[1:4])),
    "/tags/0": math.exp(LOGPROBS[6]),
    "/tags/1": math.exp(LOGPROBS[9]),
    "/priority": math.exp(LOGPROBS[12]),
}
MESSAGES = [{"role": "user", "content": "Triage: the export fails."}]


def tokens(pairs: list[tuple[str, float]]) -> list[TokenLogprob]:
    return [TokenLogprob(text, lp) for text, lp in pairs]


def completes(assembler: Assembler, pieces: list[tuple[str, list[TokenLogprob] | None]]) -> dict:
    found: dict[str, float | None] = {}
    for text, toks in pieces:
        for event in assembler.feed(text, toks):
            if isinstance(event, SlotComplete):
                found[event.path] = event.confidence
    for event in assembler.close():
        if isinstance(event, SlotComplete):
            found[event.path] = event.confidence
    return found


def test_each_value_gets_the_least_probability_of_the_tokens_that_wrote_it() -> None:
    assert "".join(TOKENS) == TEXT
    asm = Assembler(PLAN, confidence=True)
    pairs = list(zip(TOKENS, LOGPROBS, strict=True))
    found = completes(asm, [(t, tokens([(t, lp)])) for t, lp in pairs])
    assert found == pytest.approx(EXPECTED)
    assert asm.confidence() == pytest.approx(EXPECTED)
    assert asm.value_logprobs()["/title"] == pytest.approx(tuple(LOGPROBS[1:4]))


def test_without_the_option_or_without_logprobs_there_is_no_figure() -> None:
    pairs = list(zip(TOKENS, LOGPROBS, strict=True))
    off = completes(Assembler(PLAN), [(t, tokens([(t, lp)])) for t, lp in pairs])
    assert off and all(v is None for v in off.values())
    missing = completes(Assembler(PLAN, confidence=True), [(TEXT, None)])
    assert missing and all(v is None for v in missing.values())


def _split(items: list[Any], cuts: list[int]) -> list[list[Any]]:
    points = sorted({c % (len(items) + 1) for c in cuts})
    out, start = [], 0
    for p in [*points, len(items)]:
        out.append(items[start:p])
        start = p
    return out


@settings(max_examples=60, deadline=None)
@given(
    text_cuts=st.lists(st.integers(0, 200), max_size=12),
    leads=st.lists(st.integers(0, 4), max_size=12),
    logprobs=st.lists(st.floats(-30, 0), min_size=len(TOKENS), max_size=len(TOKENS)),
)
def test_confidence_does_not_depend_on_chunking(
    text_cuts: list[int], leads: list[int], logprobs: list[float]
) -> None:
    """The text split anywhere; the tokens in other places, each no later than the
    text it wrote (a server sends a token with its text, or before)."""
    whole = tokens(list(zip(TOKENS, logprobs, strict=True)))
    reference = completes(Assembler(PLAN, confidence=True), [(TEXT, whole)])
    texts = ["".join(part) for part in _split(list(TEXT), text_cuts)]
    ends = [sum(len(t) for t in TOKENS[: i + 1]) for i in range(len(TOKENS))]
    pieces: list[tuple[str, list[TokenLogprob] | None]] = []
    sent = position = 0
    for i, text in enumerate(texts):
        position += len(text)
        due = sum(end <= position for end in ends)  # tokens whose text has come
        due = min(len(whole), max(due, sent) + (leads[i] if i < len(leads) else 0))
        pieces.append((text, whole[sent:due] or None))
        sent = max(sent, due)
    found = completes(Assembler(PLAN, confidence=True), pieces)
    assert found == reference
    assert all(v is not None and 0.0 <= v <= 1.0 for v in found.values())


def test_a_character_split_across_tokens_counts_both_and_crlf_is_one_break() -> None:
    text = "title: café\r\npriority: 2\r\nend\r\n"
    data = "é".encode()
    toks = [
        TokenLogprob("title:", -0.1),
        TokenLogprob(" caf", -0.2),
        TokenLogprob("bytes:\\xc3", -0.5, data[:1]),
        TokenLogprob("bytes:\\xa9", -0.25, data[1:]),
        TokenLogprob("\r", -0.01),
        TokenLogprob("\npriority:", -0.02),
        TokenLogprob(" 2", -1.5),
        TokenLogprob("\r\nend\r\n", -0.03),
    ]
    found = completes(Assembler(PLAN, confidence=True), [(text, toks)])
    assert found["/title"] == pytest.approx(math.exp(-0.95))  # " caf", then "é": two tokens
    assert found["/priority"] == pytest.approx(math.exp(-1.5))


def test_tokens_that_do_not_match_the_text_stop_the_figures_never_invent_them() -> None:
    pairs = list(zip(TOKENS, LOGPROBS, strict=True))
    pairs[8] = ("\ntags:X", pairs[8][1])  # differs from the text from the second tag on
    found = completes(Assembler(PLAN, confidence=True), [(TEXT, tokens(pairs))])
    assert found["/title"] == pytest.approx(EXPECTED["/title"])
    assert found["/tags/0"] == pytest.approx(EXPECTED["/tags/0"])
    assert found["/tags/1"] is None and found["/priority"] is None


def test_a_token_without_a_usable_logprob_leaves_only_its_value_without_a_figure() -> None:
    asm = Assembler(PLAN, confidence=True)
    content = [
        {"token": t, "logprob": "high" if i == 2 else lp, "bytes": None}
        for i, (t, lp) in enumerate(zip(TOKENS, LOGPROBS, strict=True))
    ]
    found = completes(asm, [(TEXT, tokens_from_openai(content))])
    assert found["/title"] is None
    assert found["/tags/0"] == pytest.approx(EXPECTED["/tags/0"])


@pytest.mark.parametrize(
    "content",
    [
        None,
        "tokens",
        [None, 3, {"token": 5}, {"bytes": "x"}],
        [{"token": "title:", "logprob": float("nan")}, {"token": "x", "logprob": True}],
        [{"token": "t" * 5000, "logprob": -1.0}],
        [{"token": "", "bytes": [300, -1], "logprob": -1.0}],
        [{"token": "\ud800", "bytes": [0xFF, 0xFE], "logprob": -1e308}],
    ],
)
def test_malformed_logprobs_never_raise_nor_break_the_run(content: Any) -> None:
    asm = Assembler(PLAN, confidence=True)
    toks = tokens_from_openai(content)
    events = asm.feed("", toks) + asm.feed(TEXT, toks) + asm.close()
    assert asm.outcome.ok
    assert not any(e.type == "pass-failed" for e in events)
    assert all(0.0 <= v <= 1.0 for v in asm.confidence().values())


def test_the_ledger_bounds_what_waits_for_the_other_side() -> None:
    ledger = TokenLedger()
    ledger.tokens([TokenLogprob("x" * 1000, -1.0)] * 1100)
    assert ledger.stopped
    ledger.text("x" * 10)
    assert ledger.logprobs(0, 5) is None


def test_confidence_figure() -> None:
    assert confidence(()) is None
    assert confidence((-0.5, -2.0, 0.0)) == pytest.approx(math.exp(-2.5))
    assert confidence((-math.inf,)) == 0.0


# -- through the SDK and the real openai client -------------------------------------------


def _reply(**extra: Any) -> Reply:
    return Reply(logprobs=list(zip(TOKENS, LOGPROBS, strict=True)), **extra)


def test_the_sdk_asks_for_logprobs_and_reports_each_fields_confidence() -> None:
    replies = [_reply(), _reply(chunks=RandomChunks(seed=4, max_size=5))]
    with ScriptedServer(replies) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0)
        for _ in replies:
            with slotflight.stream(
                client, model="m", messages=MESSAGES, output=Ticket, confidence=True
            ) as s:
                seen = {e.path: e.confidence for e in s if isinstance(e, SlotComplete)}
                assert s.final() == Ticket(
                    title="Export job failed", tags=["bug", "export"], priority=3
                )
                assert seen == pytest.approx(EXPECTED)
                assert s.confidence() == pytest.approx(EXPECTED)
        assert all(r.body["logprobs"] is True for r in server.requests)


def test_by_default_no_logprobs_are_asked_and_no_figure_is_given() -> None:
    with ScriptedServer([_reply()]) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0)
        with slotflight.stream(client, model="m", messages=MESSAGES, output=Ticket) as s:
            events = [e for e in s if isinstance(e, SlotComplete)]
            s.final()
            assert s.confidence() == {}
        assert "logprobs" not in server.requests[0].body
    assert events and all(e.confidence is None for e in events)
    assert all("confidence" not in e.to_json() for e in events)


def test_a_server_that_returns_no_logprobs_gives_no_figure_and_the_run_goes_on() -> None:
    with ScriptedServer([Reply(TEXT, chunks=3)]) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0)
        result = slotflight.complete(
            client, model="m", messages=MESSAGES, output=Ticket, confidence=True
        )
    assert result.priority == 3


def test_the_async_stream_reports_confidence_too() -> None:
    async def run() -> dict[str, float]:
        with ScriptedServer([_reply(chunks=2)]) as server:
            client = openai.AsyncOpenAI(base_url=server.base_url, api_key="k", max_retries=0)
            async with slotflight.astream(
                client, model="m", messages=MESSAGES, output=Ticket, confidence=True
            ) as s:
                await s.final()
                return s.confidence()

    assert asyncio.run(run()) == pytest.approx(EXPECTED)


def test_confidence_must_be_a_bool() -> None:
    with pytest.raises(TypeError):
        slotflight.stream(
            openai.OpenAI(api_key="k"),
            model="m",
            messages=MESSAGES,
            output=Ticket,
            confidence="yes",  # type: ignore[arg-type]
        )


# -- the benchmark's threshold table ----------------------------------------------------


def test_display_paths_and_threshold_rows() -> None:
    assert display_path("/title") == "title"
    assert display_path("/tags/0") == "tags[]"
    assert display_path("/items/2/owner") == "items[].owner"
    run = {
        "task": "t1",
        "seed": 1,
        "final_valid": True,
        "accuracy": {
            "fields": [
                {"path": "title", "score": 1.0},
                {"path": "tags[]", "score": 0.0},
                {"path": "owner", "score": 0.0},
            ]
        },
        "value_logprobs": {"/title": [-0.1], "/tags/0": [-0.2], "/tags/1": [-3.0]},
    }
    fields = field_confidences(run)
    assert fields == [
        FieldConfidence("t1#1", "title", 1.0, pytest.approx(math.exp(-0.1))),
        FieldConfidence("t1#1", "tags[]", 0.0, pytest.approx(math.exp(-3.0))),
        FieldConfidence("t1#1", "owner", 0.0, None),
    ]
    row = threshold_rows(fields, [0.5])[0]
    assert (row.flagged, row.wrong_flagged, row.wrong, row.right_flagged, row.right) == (
        1,
        1,
        1,
        0,
        1,
    )
    assert row.recall == 1.0 and row.precision == 1.0 and row.right_share == 0.0
    assert field_confidences({**run, "final_valid": False}) is None
    assert "| < 0.5 | 1 | 100% (1/1) |" in render([run])
