"""A grammar applied to the likeliest candidate tokens first.

llama.cpp's grammar sampler checks every token of the vocabulary against the grammar
before each token is sampled (49,152 tokens for SmolLM2, 151,936 for Qwen2.5), which
adds 40-74 % to the embedded model's time per token (``benchmarks/grammar_cost.py``). Yet what the rest of the sampler chain keeps of them
is small: top-k keeps the ``k`` likeliest tokens the grammar allows (greedy: the
likeliest one), top-p the likeliest of those holding ``top_p`` of their weight, and
min-p only those within ``ln(min_p)`` of the likeliest allowed one.

:class:`BestFirstGrammar` stands where the grammar sampler stood in llama-cpp-python's
chain (after the logits processors and penalties, before top-k) and checks the
candidates in order of their logits, a batch at a time (64, then four times as many
each round), until the allowed tokens found settle what the chain draws from
(:meth:`Cuts.settled`): ``k`` of them; or the next candidate lies :data:`SPREAD`
below the likeliest allowed one (it then weighs under ``e**-25`` of it, below what a
``float32`` sum of 1 or more can hold); or the next candidate lies below min-p's
floor and the tokens not yet checked, however many of the ``k`` they are, cannot move
top-p's cut. Every other token is set to ``-inf``, as the grammar sets a token it
rejects, so top-k, top-p, min-p, the temperature and the draw keep the same tokens with
the same logits and draw the same token from the same seed. A decision within
:data:`MARGIN` of a cut is not taken: checking goes on. When the batches would reach
a quarter of the vocabulary (the grammar allows few of the likely tokens), the grammar
is applied to the whole vocabulary as before.

The token drawn is accepted by the grammar (its state advances) through the chain's
``accept``, as the grammar sampler's own.
"""

from __future__ import annotations

import ctypes
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import llama_cpp
import numpy as np
import numpy.typing as npt
from llama_cpp import _internals as internals
from llama_cpp.llama_grammar import LlamaGrammar

__all__ = [
    "SPREAD",
    "TOKEN_DATA",
    "BestFirstGrammar",
    "BestFirstSampling",
    "best_first_chain",
    "token_data",
]

SPREAD = 25.0
"""Logits this far below the likeliest allowed token no longer change a draw."""

MARGIN = 1e-4
"""Relative margin (and, for min-p's floor, in logits) kept from a cut before the
tokens found are taken to settle it, far above ``float32`` rounding."""

FIRST_BATCH = 64
"""Candidates checked in the first round (each round checks four times as many)."""

TOKEN_DATA = np.dtype([("id", np.intc), ("logit", np.single), ("p", np.single)], align=True)
"""``llama_token_data`` as a NumPy record."""


def token_data(candidates: Any) -> npt.NDArray[Any]:
    """The records of a ``llama_token_data_array`` pointer, as a writable NumPy view."""
    array = candidates.contents
    size = int(array.size)
    address = ctypes.addressof(array.data.contents)
    records = (llama_cpp.llama_token_data * size).from_address(address)
    return np.frombuffer(memoryview(records), TOKEN_DATA)


def candidate_array(records: npt.NDArray[Any]) -> tuple[Any, npt.NDArray[Any]]:
    """A ``llama_token_data_array`` holding a copy of ``records`` (:data:`TOKEN_DATA`),
    and a writable view of its records."""
    data = (llama_cpp.llama_token_data * len(records))()
    view = np.frombuffer(memoryview(data), TOKEN_DATA)
    view[:] = records
    holder = llama_cpp.llama_token_data_array(
        data=data, size=len(records), selected=-1, sorted=False
    )
    return holder, view


@dataclass(frozen=True)
class Cuts:
    """What the chain after the grammar keeps: top-k's ``keep`` (1 for greedy), then
    top-p and min-p (1.0 and 0.0: no cut)."""

    keep: int
    top_p: float = 1.0
    min_p: float = 0.0

    def settled(self, found: npt.NDArray[np.float64], following: float) -> bool:
        """Whether the allowed tokens ``found`` (their logits, highest first) settle
        what the chain draws from, when no token left to check is above ``following``."""
        if len(found) == 0:
            return False
        if len(found) >= self.keep:
            return True
        best = float(found[0])
        if following < best - SPREAD:
            return True
        if self.min_p <= 0:
            return False
        floor = best + math.log(self.min_p)
        if following >= floor - MARGIN or bool(np.any(np.abs(found - floor) < MARGIN)):
            return False
        if self.top_p >= 1:
            return True
        weights = np.exp(found - best)
        cumulative = np.cumsum(weights)
        total = float(cumulative[-1])
        unseen = (self.keep - len(found)) * math.exp(following - best)
        above_floor = int(np.count_nonzero(found > floor))

        def cut(weight: float) -> int:
            # top-p keeps tokens up to the first whose cumulative weight reaches its share
            return int(np.searchsorted(cumulative, self.top_p * weight)) + 1

        low = cut(total * (1 - MARGIN))
        high = cut((total + unseen) * (1 + MARGIN))
        return min(low, above_floor) == min(high, above_floor)


class BestFirstGrammar:
    """A llama.cpp sampler that applies ``grammar`` to the likeliest candidates first,
    until the allowed tokens found settle what ``cuts`` keep (module docstring)."""

    def __init__(self, vocab: Any, grammar: LlamaGrammar, cuts: Cuts) -> None:
        self.native = llama_cpp.llama_sampler_init_grammar(
            vocab, grammar._grammar.encode("utf-8"), grammar._root.encode("utf-8")
        )
        if not self.native:
            raise ValueError("llama.cpp refused the grammar")
        self.cuts = cuts
        #: Candidates checked and whole-vocabulary applications, for measurements.
        self.checked = 0
        self.whole = 0

        def apply(_sampler: Any, candidates: Any) -> None:
            # An exception cannot cross into llama.cpp: the whole vocabulary is checked
            # instead, so no token the grammar refuses is ever left to the draw.
            try:
                self.apply(candidates)
            except Exception:
                self.whole += 1
                llama_cpp.llama_sampler_apply(self.native, candidates)

        def accept(_sampler: Any, token: int) -> None:
            llama_cpp.llama_sampler_accept(self.native, token)

        interface = llama_cpp.llama_sampler_i()
        interface.apply = llama_cpp.llama_sampler_i_apply(apply)
        interface.accept = llama_cpp.llama_sampler_i_accept(accept)
        interface.name = llama_cpp.llama_sampler_i_name(0)
        interface.reset = llama_cpp.llama_sampler_i_reset(0)
        interface.clone = llama_cpp.llama_sampler_i_clone(0)
        interface.free = llama_cpp.llama_sampler_i_free(0)
        self._callbacks = (apply, accept, interface)  # alive as long as the sampler
        self.sampler = llama_cpp.llama_sampler()
        self.sampler.iface = ctypes.pointer(interface)
        self.sampler.ctx = None

    def apply(self, candidates: Any) -> None:
        records = token_data(candidates)
        logits = records["logit"]
        size = len(logits)
        found: list[npt.NDArray[np.intp]] = []
        start, batch = 0, FIRST_BATCH
        order = np.empty(0, dtype=np.intp)
        while True:
            end = min(size, start + batch)
            if end > size // 4:
                self.whole += 1
                self.checked += size
                llama_cpp.llama_sampler_apply(self.native, candidates)
                return
            if end >= len(order):
                order = _likeliest(logits, min(size, 4 * end))
            found.append(self._allowed(records, order[start:end]))
            self.checked += end - start
            following = float(logits[order[end]])  # end <= size // 4: a token follows
            allowed = np.concatenate(found)[: self.cuts.keep]
            if self.cuts.settled(logits[allowed].astype(np.float64), following):
                break
            start, batch = end, 4 * batch
        values = logits[allowed].copy()
        logits[:] = -np.inf
        logits[allowed] = values

    def _allowed(self, records: npt.NDArray[Any], rows: npt.NDArray[np.intp]) -> Any:
        """Which of ``rows`` (indexes into ``records``, likeliest first) the grammar
        allows, in the same order: the grammar sampler applied to those rows alone."""
        holder, view = candidate_array(records[rows])
        llama_cpp.llama_sampler_apply(self.native, ctypes.byref(holder))
        return rows[np.isfinite(view["logit"])]

    def close(self) -> None:
        if self.native:
            llama_cpp.llama_sampler_free(self.native)
            self.native = None


def _likeliest(logits: npt.NDArray[np.single], count: int) -> npt.NDArray[np.intp]:
    """The rows of the ``count`` highest logits, highest first (ties: lowest row)."""
    if count >= len(logits):
        rows = np.arange(len(logits))
    else:
        rows = np.argpartition(-logits, count - 1)[:count]
        rows.sort()
    return rows[np.argsort(-logits[rows], kind="stable")]


def best_first_chain(
    model: Any,
    *,
    grammar: LlamaGrammar,
    top_k: int,
    top_p: float,
    min_p: float,
    typical_p: float,
    temp: float,
    repeat_penalty: float,
    frequency_penalty: float,
    presence_penalty: float,
    logits_processor: Sequence[Callable[[Any, Any], Any]] | None,
    **_unused: Any,
) -> internals.LlamaSampler:
    """The sampler chain ``Llama._init_sampler`` builds (logits processors, penalties,
    grammar, then greedy or top-k, typical, top-p, min-p, temperature and the draw),
    with :class:`BestFirstGrammar` in the grammar's place. ``model`` is the ``Llama``;
    the settings are ``Llama._init_sampler``'s (those of mirostat and ``tfs_z`` unused)."""
    sampler = internals.LlamaSampler()  # type: ignore[no-untyped-call]
    if logits_processor:
        processors = list(logits_processor)

        def process(candidates: Any) -> None:
            logits = token_data(candidates)["logit"]
            for processor in processors:
                logits[:] = processor(model._input_ids, logits)

        sampler.add_custom(process)
    sampler.add_penalties(
        n_vocab=model._n_vocab,
        penalty_last_n=model.last_n_tokens_size,
        penalty_repeat=repeat_penalty,
        penalty_freq=frequency_penalty,
        penalty_present=presence_penalty,
    )
    if temp == 0.0:
        cuts = Cuts(keep=1)
    elif typical_p < 1.0:
        cuts = Cuts(keep=top_k)  # typical sampling's cut is not followed: k tokens
    else:
        cuts = Cuts(keep=top_k, top_p=top_p, min_p=min_p)
    constraint = BestFirstGrammar(model._model.vocab, grammar, cuts)
    llama_cpp.llama_sampler_chain_add(sampler.sampler, ctypes.pointer(constraint.sampler))
    # The chain must not free a sampler it does not own: it is removed first, as
    # llama-cpp-python's own custom samplers are; the grammar is freed after.
    position = llama_cpp.llama_sampler_chain_n(sampler.sampler) - 1
    sampler.custom_samplers.append((position, constraint))  # type: ignore[arg-type]
    sampler._exit_stack.callback(constraint.close)
    if temp == 0.0:
        sampler.add_greedy()  # type: ignore[no-untyped-call]
    else:
        sampler.add_top_k(top_k)
        sampler.add_typical(typical_p, 1)
        sampler.add_top_p(top_p, 1)
        sampler.add_min_p(min_p, 1)
        sampler.add_temp(temp)
        sampler.add_dist(model._seed)
    return sampler


class BestFirstSampling(llama_cpp.Llama):
    """``Llama`` whose grammar is applied best first (:func:`best_first_chain`) when
    :attr:`best_first` is on and the sampling is greedy or top-k without mirostat;
    otherwise llama-cpp-python's own chain."""

    best_first = True

    def _init_sampler(self, **settings: Any) -> internals.LlamaSampler:  # type: ignore[override]
        # llama-cpp-python names every setting (``sample`` and ``generate`` both do)
        grammar: LlamaGrammar | None = settings.get("grammar")
        temp = float(settings.get("temp", 0.8))
        top_k = int(settings.get("top_k", 40))
        ordinary = (
            settings.get("mirostat_mode")
            or temp < 0
            or (temp > 0 and not 0 < top_k < self._n_vocab)
        )
        if grammar is None or not self.best_first or ordinary:
            stock: internals.LlamaSampler = super()._init_sampler(**settings)
            return stock
        return best_first_chain(self, **settings)
