"""The lone-space penalty of the local server: its rule on any vocabulary, and its effect
on the real SmolLM2 model (a value under a grammar starts with a word, not with the lone
space after which the model writes a digit)."""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np
import pytest
from llama_cpp.llama_grammar import LlamaGrammar
from openai import OpenAI

from tests.local_support import require_local_model

require_local_model()

from slotflight import SlotflightError, compile, prompt  # noqa: E402
from slotflight.bench.models import SupportTriage, load_tasks  # noqa: E402
from slotflight.local import LocalEngine, start_local_server  # noqa: E402
from slotflight.local._spacing import (  # noqa: E402
    DEFAULT_LONE_SPACE_PENALTY,
    LoneSpacePenalty,
)
from slotflight.local._worker import logits_processors  # noqa: E402

PIECES = [b"tags", b":", b" ", b"1", b" refund", b'":', b"  ", b" :", b"a"]


def _logits() -> np.ndarray:
    return np.zeros(len(PIECES), dtype=np.single)


def test_only_a_lone_space_right_after_a_colon_token_is_lowered() -> None:
    penalty = LoneSpacePenalty(PIECES, 5.0)
    assert penalty.spaces.tolist() == [2]  # two blanks are not a lone space
    for last in (1, 5, 7):  # ":", '":' and " :" end with a colon
        scores = penalty(np.array([0, last], dtype=np.intc), _logits())
        assert scores[2] == -5.0
        assert np.count_nonzero(scores) == 1
    for tokens in ([0], [1, 0], [1, 2], []):  # not right after a colon
        assert not penalty(np.array(tokens, dtype=np.intc), _logits()).any()


def test_no_penalty_or_no_lone_space_changes_nothing() -> None:
    after_colon = np.array([0, 1], dtype=np.intc)
    off = LoneSpacePenalty(PIECES, 0.0)
    assert not off.active
    assert not off(after_colon, _logits()).any()
    no_space = LoneSpacePenalty([p for p in PIECES if p != b" "], 5.0)
    assert not no_space.active
    assert not no_space(after_colon, np.zeros(len(PIECES) - 1, dtype=np.single)).any()


def test_a_token_outside_the_vocabulary_changes_nothing() -> None:
    penalty = LoneSpacePenalty(PIECES, 5.0)
    assert not penalty(np.array([len(PIECES) + 3], dtype=np.intc), _logits()).any()


def test_only_a_generation_under_a_grammar_is_changed() -> None:
    grammar = LlamaGrammar.from_string('root ::= "a"', verbose=False)
    penalty = LoneSpacePenalty(PIECES, 2.0)
    assert logits_processors(penalty, None) is None
    assert list(logits_processors(penalty, grammar) or []) == [penalty]
    assert logits_processors(LoneSpacePenalty(PIECES, 0.0), grammar) is None


@pytest.mark.parametrize("bad", [-1.0, math.inf, math.nan])
def test_a_negative_or_infinite_penalty_is_refused(bad: float) -> None:
    with pytest.raises(SlotflightError) as raised:
        LoneSpacePenalty(PIECES, bad)
    assert raised.value.code == "invalid_option"


# --------------------------------------------------------------------------- real model


@pytest.fixture(scope="module")
def clients() -> Iterator[dict[float, tuple[OpenAI, str]]]:
    """One server with the default penalty, one without it (same seed)."""
    engines = {
        p: LocalEngine(seed=7, lone_space_penalty=p) for p in (0.0, DEFAULT_LONE_SPACE_PENALTY)
    }
    servers = {p: start_local_server(engine=e) for p, e in engines.items()}
    try:
        yield {
            p: (OpenAI(base_url=s.base_url, api_key="local", max_retries=0), s.model)
            for p, s in servers.items()
        }
    finally:
        for s in servers.values():
            s.close()
        for e in engines.values():
            e.close()


def _answer(client: tuple[OpenAI, str], user: str, grammar: str | None) -> str:
    openai_client, model = client
    reply = openai_client.chat.completions.create(
        model=model,
        messages=[
            {"role": "system", "content": prompt(compile(SupportTriage), grammar=True)},
            {"role": "user", "content": user},
        ],
        temperature=0,
        max_tokens=16,
        extra_body={} if grammar is None else {"grammar": grammar},
    )
    return reply.choices[0].message.content or ""


def _tickets() -> list[str]:
    tasks = load_tasks(schemas=["triage"])[:4]
    return [f"{t.instructions}\n\n{t.input}" for t in tasks]


@pytest.mark.local_model
def test_under_a_grammar_a_text_value_starts_with_a_word(
    clients: dict[float, tuple[OpenAI, str]],
) -> None:
    """The triage form's summary, first line: without the penalty the model takes the
    lone space and numbers the value (``summary: 1. The customer's…``) on some
    tickets; with it, no value starts with a digit."""
    grammar = 'root ::= "summary: " [^\\n]{1,60} "\\n"'
    off = [_answer(clients[0.0], user, grammar) for user in _tickets()]
    on = [_answer(clients[DEFAULT_LONE_SPACE_PENALTY], user, grammar) for user in _tickets()]
    starts = [line.removeprefix("summary: ")[:1] for line in on]
    assert any(line.removeprefix("summary: ")[:1].isdigit() for line in off), off
    assert not any(c.isdigit() for c in starts), on


@pytest.mark.local_model
def test_a_value_that_must_start_with_a_digit_is_still_written(
    clients: dict[float, tuple[OpenAI, str]],
) -> None:
    grammar = 'root ::= "priority: " [1-5] "\\n"'
    for user in _tickets():
        line = _answer(clients[DEFAULT_LONE_SPACE_PENALTY], user, grammar)
        assert line.rstrip("\n") in {f"priority: {n}" for n in range(1, 6)}
