"""The slot prompt's size in tokens of the embedded model's tokenizer, per benchmark
schema: it stays within a budget, and below what a ``json_schema`` request carries (the
schema itself), so slots cost no more prompt than native structured output."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from slotflight.bench.models import SCHEMAS
from slotflight.plan.compiler import compile as compile_schema
from slotflight.prompting.prompt import prompt
from tests.local_support import require_local_model

require_local_model()

#: Tokens the slot prompt (grammar on, the SDK's default with the embedded model) may take
#: for one benchmark schema; the largest measured 316 (ticket) when this was set.
BUDGET_TOKENS = 350


@pytest.fixture(scope="module")
def tokens() -> Callable[[str], int]:
    import llama_cpp

    from slotflight.local import default_model_path

    llm = llama_cpp.Llama(model_path=str(default_model_path()), vocab_only=True, verbose=False)
    return lambda text: len(llm.tokenize(text.encode("utf-8"), add_bos=False, special=False))


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_the_slot_prompt_fits_its_budget_and_costs_less_than_the_schema(
    name: str, tokens: Callable[[str], int]
) -> None:
    model = SCHEMAS[name]
    plan = compile_schema(model)
    with_grammar = tokens(prompt(plan, grammar=True))
    without_grammar = tokens(prompt(plan))
    schema = tokens(json.dumps(model.model_json_schema()))
    assert with_grammar <= BUDGET_TOKENS, with_grammar
    assert with_grammar < without_grammar  # with a grammar it leaves out what is enforced
    assert with_grammar < schema, (with_grammar, schema)
