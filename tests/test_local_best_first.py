"""The grammar applied to the likeliest tokens first, on the real SmolLM2 model: at every
step it keeps the tokens the whole-vocabulary grammar would have left to top-k, and a
generation draws the same tokens as with llama-cpp-python's own chain (greedy and
sampled, with penalties and logits processors), for slots' and json_schema's grammars."""

from __future__ import annotations

import ctypes
from collections.abc import Iterator
from typing import Any, ClassVar

import numpy as np
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from tests.local_support import require_local_model

require_local_model()

import llama_cpp  # noqa: E402
from llama_cpp.llama_grammar import LlamaGrammar  # noqa: E402

from slotflight import compile, grammar  # noqa: E402
from slotflight.bench.models import SCHEMAS, TASKS_DIR, load_tasks  # noqa: E402
from slotflight.bench.runner import _user_text  # noqa: E402
from slotflight.local import _best_first, default_model_path  # noqa: E402
from slotflight.local._best_first import (  # noqa: E402
    SPREAD,
    TOKEN_DATA,
    BestFirstGrammar,
    BestFirstSampling,
    Cuts,
    candidate_array,
    token_data,
)
from slotflight.local._grammar import schema_to_grammar  # noqa: E402
from slotflight.local._value_start import ValueStartPenalty  # noqa: E402

TOKENS = 40


def _drawn_from(holder: Any, view: Any, cuts: Cuts) -> dict[int, float]:
    """The tokens (and their logits) top-k, top-p and min-p leave to the draw."""
    chain = llama_cpp.llama_sampler_chain_init(llama_cpp.llama_sampler_chain_default_params())
    for sampler in (
        llama_cpp.llama_sampler_init_top_k(cuts.keep),
        llama_cpp.llama_sampler_init_top_p(cuts.top_p, 1),
        llama_cpp.llama_sampler_init_min_p(cuts.min_p, 1),
    ):
        llama_cpp.llama_sampler_chain_add(chain, sampler)
    llama_cpp.llama_sampler_apply(chain, ctypes.byref(holder))
    llama_cpp.llama_sampler_free(chain)
    left = view[: holder.size]
    return {int(r["id"]): float(r["logit"]) for r in left if np.isfinite(r["logit"])}


class _Checked(BestFirstGrammar):
    """Checks each step against the grammar applied to the whole vocabulary: the same
    tokens, with the same logits, are left to the draw."""

    steps: ClassVar[list[tuple[dict[int, float], dict[int, float]]]] = []

    def apply(self, candidates: Any) -> None:
        whole, everything = candidate_array(token_data(candidates))
        clone = llama_cpp.llama_sampler_clone(self.native)
        llama_cpp.llama_sampler_apply(clone, ctypes.byref(whole))
        llama_cpp.llama_sampler_free(clone)
        super().apply(candidates)
        best_first, records = candidate_array(token_data(candidates))
        expected = _drawn_from(whole, everything, self.cuts)
        _Checked.steps.append((expected, _drawn_from(best_first, records, self.cuts)))


def _array(ids: list[int], logits: list[float]) -> tuple[Any, Any]:
    records = np.zeros(len(ids), TOKEN_DATA)
    records["id"] = ids
    records["logit"] = logits
    return candidate_array(records)


@settings(max_examples=300, deadline=None)
@given(
    logits=st.lists(
        st.floats(-1, 1, allow_nan=False, width=32), min_size=1, max_size=120, unique=True
    ),
    scale=st.sampled_from([1.0, 4.0, 16.0, 40.0]),
    allowed_bits=st.lists(st.booleans(), min_size=120, max_size=120),
    keep=st.integers(1, 50),
    top_p=st.sampled_from([0.3, 0.9, 0.95, 1.0]),
    min_p=st.sampled_from([0.0, 0.05, 0.2]),
)
@example(  # the allowed tokens below min-p's floor still move top-p's cut
    logits=[0.0, -0.025, -0.05, *(-0.78 - i / 1000 for i in range(30))],
    scale=4.0,
    allowed_bits=[True] * 120,
    keep=40,
    top_p=0.3,
    min_p=0.05,
)
def test_allowed_tokens_that_settle_the_cuts_leave_the_draw_what_all_of_them_leave(
    logits: list[float],
    scale: float,
    allowed_bits: list[bool],
    keep: int,
    top_p: float,
    min_p: float,
) -> None:
    cuts = Cuts(keep=keep, top_p=top_p, min_p=min_p)
    size = len(logits)
    values = np.unique(np.array(logits, dtype=np.single) * np.single(scale))
    values = np.random.default_rng(size).permutation(values)
    size = len(values)
    allowed = [bool(a) for a in allowed_bits[:size]]
    assume(any(allowed))
    everything = np.where(allowed, values, -np.inf).astype(np.single)
    expected = _drawn_from(*_array(list(range(size)), everything.tolist()), cuts)
    order = np.argsort(-values, kind="stable")
    found: list[int] = []
    for checked, token in enumerate(order, start=1):
        if allowed[token]:
            found.append(int(token))
        following = float(values[order[checked]]) if checked < size else -np.inf
        kept = found[: cuts.keep]
        if cuts.settled(values[kept].astype(np.float64), following):
            left = np.full(size, -np.inf, dtype=np.single)
            left[kept] = values[kept]
            drawn = _drawn_from(*_array(list(range(size)), left.tolist()), cuts)
            # a token SPREAD below the best weighs under e**-25 of it: it may be left out
            floor = max(expected.values()) - SPREAD
            assert drawn.items() <= expected.items()
            assert {t: v for t, v in expected.items() if v >= floor}.items() <= drawn.items()
            return
    raise AssertionError("checking every token settles the cuts")


@pytest.fixture(scope="module")
def llm() -> Iterator[BestFirstSampling]:
    model = BestFirstSampling(
        model_path=str(default_model_path()), n_ctx=2048, n_threads=2, verbose=False
    )
    yield model
    model.close()


def _grammars() -> list[tuple[str, str, str]]:
    tasks = {task.schema: task for task in reversed(load_tasks(TASKS_DIR))}
    cases = []
    for name, output in SCHEMAS.items():
        text = _user_text(tasks[name])
        cases.append((f"{name}-slots", text, grammar(compile(output))))
        json_grammar = schema_to_grammar(output.model_json_schema(), param="/schema")
        cases.append((f"{name}-json", text, json_grammar))
    return cases


CASES = _grammars()


def _generate(llm: BestFirstSampling, text: str, gbnf: str, best_first: bool, **kw: Any) -> str:
    llm.best_first = best_first
    llm.reset()  # the prompt is evaluated afresh, so both runs see the same logits
    answer = llm.create_chat_completion(
        messages=[{"role": "user", "content": text}],
        grammar=LlamaGrammar.from_string(gbnf, verbose=False),
        max_tokens=TOKENS,
        **kw,
    )
    return str(answer["choices"][0]["message"]["content"])


@pytest.mark.parametrize(("name", "text", "gbnf"), CASES, ids=[c[0] for c in CASES])
def test_each_step_leaves_the_draw_what_the_whole_grammar_leaves(
    llm: BestFirstSampling, name: str, text: str, gbnf: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_best_first, "BestFirstGrammar", _Checked)
    _Checked.steps = []
    _generate(llm, text, gbnf, True, temperature=0.8, seed=3)
    assert len(_Checked.steps) > 1
    for expected, left in _Checked.steps:
        assert left == expected


SAMPLINGS = {
    "greedy": {"temperature": 0.0},
    "sampled": {"temperature": 0.8, "top_p": 0.95, "seed": 7},
    "penalised": {
        "temperature": 0.8,
        "seed": 11,
        "frequency_penalty": 0.4,
        "presence_penalty": 0.3,
    },
}


@pytest.mark.parametrize("sampling", list(SAMPLINGS))
@pytest.mark.parametrize(("name", "text", "gbnf"), CASES[:4], ids=[c[0] for c in CASES[:4]])
def test_a_generation_draws_what_the_whole_grammar_draws(
    llm: BestFirstSampling, name: str, text: str, gbnf: str, sampling: str
) -> None:
    kw = SAMPLINGS[sampling]
    assert _generate(llm, text, gbnf, True, **kw) == _generate(llm, text, gbnf, False, **kw)


def test_logits_processors_run_before_the_grammar_as_in_the_stock_chain(
    llm: BestFirstSampling,
) -> None:
    pieces = [llm.detokenize([t], special=True) for t in range(llm.n_vocab())]
    processors = llama_cpp.LogitsProcessorList([ValueStartPenalty(pieces, 5.0)])
    _, text, gbnf = CASES[0]
    kw: dict[str, Any] = {"temperature": 0.8, "seed": 5, "logits_processor": processors}
    assert _generate(llm, text, gbnf, True, **kw) == _generate(llm, text, gbnf, False, **kw)


def _same_draws_recorded(
    llm: BestFirstSampling, monkeypatch: pytest.MonkeyPatch, kind: type[BestFirstGrammar]
) -> BestFirstGrammar:
    """The sampler of ``kind`` a generation used, after checking that it drew what the
    whole-vocabulary grammar draws."""
    made: list[BestFirstGrammar] = []

    class Recorded(kind):  # type: ignore[valid-type,misc]
        def __init__(self, *args: Any) -> None:
            super().__init__(*args)
            made.append(self)

    monkeypatch.setattr(_best_first, "BestFirstGrammar", Recorded)
    _, text, gbnf = CASES[0]
    kw: dict[str, Any] = {"temperature": 0.8, "seed": 2}
    assert _generate(llm, text, gbnf, True, **kw) == _generate(llm, text, gbnf, False, **kw)
    return made[0]


def test_past_a_quarter_of_the_vocabulary_the_grammar_is_applied_to_all_of_it(
    llm: BestFirstSampling, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_best_first, "FIRST_BATCH", llm.n_vocab() // 4 + 1)
    used = _same_draws_recorded(llm, monkeypatch, BestFirstGrammar)
    assert used.whole > 1
    assert used.checked == used.whole * llm.n_vocab()


def test_a_failure_inside_the_sampler_checks_the_whole_vocabulary_instead(
    llm: BestFirstSampling, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Failing(BestFirstGrammar):
        def _allowed(self, records: Any, rows: Any) -> Any:
            raise MemoryError("no room for a batch")

    assert _same_draws_recorded(llm, monkeypatch, Failing).whole == TOKENS


def test_settings_the_best_first_chain_does_not_cover_use_the_stock_chain(
    llm: BestFirstSampling, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[object] = []
    monkeypatch.setattr(_best_first, "best_first_chain", lambda *a, **k: made.append(a))
    _, text, gbnf = CASES[0]
    for kw in ({"temperature": 0.8, "top_k": 0}, {"temperature": 0.8, "mirostat_mode": 2}):
        _generate(llm, text, gbnf, True, **kw)
    assert made == []
