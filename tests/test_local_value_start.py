"""The value-start penalties of the local server: their rule on any vocabulary, and their
effect on the real SmolLM2 model (a value under a grammar starts with a word, not with
the lone space after which the model writes a digit, nor with a bracket)."""

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
from slotflight.local._value_start import (  # noqa: E402
    DEFAULT_BRACKET_PENALTY,
    DEFAULT_LONE_SPACE_PENALTY,
    ValueStartPenalty,
)
from slotflight.local._worker import logits_processors  # noqa: E402

PIECES = [b"tags", b":", b" ", b"1", b" refund", b'":', b"  ", b" :", b"a", b" [", b'["', b"a["]


def _logits() -> np.ndarray:
    return np.zeros(len(PIECES), dtype=np.single)


def test_only_a_lone_space_right_after_a_colon_token_is_lowered() -> None:
    penalty = ValueStartPenalty(PIECES, 5.0)
    assert penalty.spaces.tolist() == [2]  # two blanks are not a lone space
    for last in (1, 5, 7):  # ":", '":' and " :" end with a colon
        scores = penalty(np.array([0, last], dtype=np.intc), _logits())
        assert scores[2] == -5.0
        assert np.count_nonzero(scores) == 1
    for tokens in ([0], [1, 0], [1, 2], []):  # not right after a colon
        assert not penalty(np.array(tokens, dtype=np.intc), _logits()).any()


def test_tokens_beginning_with_a_bracket_are_lowered_after_a_colon() -> None:
    penalty = ValueStartPenalty(PIECES, 2.0, 3.0)
    assert penalty.brackets.tolist() == [9, 10]  # " [" and '["'; "a[" begins with a letter
    scores = penalty(np.array([0, 1], dtype=np.intc), _logits())
    assert scores.tolist() == [0, 0, -2, 0, 0, 0, 0, 0, 0, -3, -3, 0]
    assert not penalty(np.array([1, 4], dtype=np.intc), _logits()).any()
    # Each penalty alone: the other's tokens are left as they are.
    only_brackets = ValueStartPenalty(PIECES, 0.0, 3.0)
    assert only_brackets.active and only_brackets.lone_space_in_effect == 0
    scores = only_brackets(np.array([0, 1], dtype=np.intc), _logits())
    assert scores.tolist() == [0, 0, 0, 0, 0, 0, 0, 0, 0, -3, -3, 0]
    no_brackets = ValueStartPenalty([p for p in PIECES if b"[" not in p], 0.0, 3.0)
    assert not no_brackets.active and no_brackets.bracket_in_effect == 0


def test_no_penalty_or_no_lone_space_changes_nothing() -> None:
    after_colon = np.array([0, 1], dtype=np.intc)
    off = ValueStartPenalty(PIECES, 0.0)
    assert not off.active
    assert not off(after_colon, _logits()).any()
    no_space = ValueStartPenalty([p for p in PIECES if p != b" "], 5.0)
    assert not no_space.active
    assert not no_space(after_colon, np.zeros(len(PIECES) - 1, dtype=np.single)).any()
    assert not ValueStartPenalty(PIECES, 0.0, 0.0).active


def test_a_token_outside_the_vocabulary_changes_nothing() -> None:
    penalty = ValueStartPenalty(PIECES, 5.0)
    assert not penalty(np.array([len(PIECES) + 3], dtype=np.intc), _logits()).any()


def test_only_a_generation_under_a_grammar_is_changed() -> None:
    grammar = LlamaGrammar.from_string('root ::= "a"', verbose=False)
    penalty = ValueStartPenalty(PIECES, 2.0)
    assert logits_processors(penalty, None) is None
    assert list(logits_processors(penalty, grammar) or []) == [penalty]
    assert logits_processors(ValueStartPenalty(PIECES, 0.0), grammar) is None


@pytest.mark.parametrize("bad", [-1.0, math.inf, math.nan])
def test_a_negative_or_infinite_penalty_is_refused(bad: float) -> None:
    with pytest.raises(SlotflightError) as raised:
        ValueStartPenalty(PIECES, bad)
    assert raised.value.code == "invalid_option"
    assert "lone_space_penalty" in str(raised.value)
    with pytest.raises(SlotflightError) as raised:
        ValueStartPenalty(PIECES, 2.0, bad)
    assert raised.value.code == "invalid_option"
    assert "bracket_penalty" in str(raised.value)


# --------------------------------------------------------------------------- real model


OFF, ON, NO_BRACKET, DEFAULT = "off", "on", "no bracket", "default"


@pytest.fixture(scope="module")
def clients() -> Iterator[dict[str, tuple[OpenAI, str]]]:
    """Servers (same seed) without either penalty, with the default penalties, and
    with the default lone-space penalty but no bracket penalty, all sampling the text
    a grammar fixes at its start (``read_opening=False``): the penalties act after a
    colon the model wrote, here the answer's first, which the default server reads
    with the prompt instead (every later field's colon it samples); and the default
    server."""
    engines = {
        OFF: LocalEngine(seed=7, lone_space_penalty=0, bracket_penalty=0, read_opening=False),
        ON: LocalEngine(seed=7, read_opening=False),
        NO_BRACKET: LocalEngine(seed=7, bracket_penalty=0, read_opening=False),
        DEFAULT: LocalEngine(seed=7),
    }
    assert engines[ON].lone_space_penalty == DEFAULT_LONE_SPACE_PENALTY
    assert engines[ON].bracket_penalty == DEFAULT_BRACKET_PENALTY
    assert engines[OFF].lone_space_penalty == engines[OFF].bracket_penalty == 0
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


def _answer(
    client: tuple[OpenAI, str], user: str, grammar: str | None, syntax: str | None = None
) -> str:
    openai_client, model = client
    reply = openai_client.chat.completions.create(
        model=model,
        messages=[
            {"role": "system", "content": prompt(compile(SupportTriage), syntax, grammar=True)},
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
    clients: dict[str, tuple[OpenAI, str]],
) -> None:
    """The triage form's summary, first line: without the penalty the model takes the
    lone space and numbers the value (``summary: 1. The customer's…``) on some
    tickets; with it, no value starts with a digit."""
    grammar = 'root ::= "summary: " [^\\n]{1,60} "\\n"'
    off = [_answer(clients[OFF], user, grammar) for user in _tickets()]
    on = [_answer(clients[ON], user, grammar) for user in _tickets()]
    on += [_answer(clients[DEFAULT], user, grammar) for user in _tickets()]
    starts = [line.removeprefix("summary: ")[:1] for line in on]
    assert any(line.removeprefix("summary: ")[:1].isdigit() for line in off), off
    assert not any(c.isdigit() for c in starts), on


@pytest.mark.local_model
def test_a_value_that_must_start_with_a_digit_is_still_written(
    clients: dict[str, tuple[OpenAI, str]],
) -> None:
    grammar = 'root ::= "priority: " [1-5] "\\n"'
    for user in _tickets():
        line = _answer(clients[DEFAULT], user, grammar)
        assert line.rstrip("\n") in {f"priority: {n}" for n in range(1, 6)}


@pytest.mark.local_model
def test_under_a_grammar_a_text_value_does_not_start_as_an_array(
    clients: dict[str, tuple[OpenAI, str]],
) -> None:
    """Without the bracket penalty the model writes the triage form's summary as
    ``[Triage]`` on some tickets under the v3 form (the default form, v4, happens not
    to draw a bracket on these four tickets); with it, no summary starts with a bracket."""
    grammar = 'root ::= "summary:" [^\\n]{1,60} "\\n"'
    off = [_answer(clients[NO_BRACKET], user, grammar, "v3") for user in _tickets()]
    on = [_answer(clients[ON], user, grammar, "v3") for user in _tickets()]
    on += [_answer(clients[ON], user, grammar) for user in _tickets()]
    on += [_answer(clients[DEFAULT], user, grammar, "v3") for user in _tickets()]
    assert any(line.removeprefix("summary:").lstrip().startswith("[") for line in off), off
    assert not any(line.removeprefix("summary:").lstrip().startswith("[") for line in on), on


@pytest.mark.local_model
def test_a_value_that_must_be_an_array_is_still_written(
    clients: dict[str, tuple[OpenAI, str]],
) -> None:
    grammar = 'root ::= "tags: [" [a-z]{1,8} "]" "\\n"'
    for user in _tickets()[:2]:
        line = _answer(clients[DEFAULT], user, grammar)
        assert line.startswith("tags: [") and line.rstrip("\n").endswith("]"), line
