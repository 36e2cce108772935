"""Closed choices calibrated against a content-free answer, in the sampler.

A request may name *closed fields* (``closed_choices``: :mod:`slotflight.syntax.closed_choices`
writes them for a plan): the text a field's line begins with (``priority:``) and its
options as written after it (``" 1"`` ... ``" 5"``). :class:`ClosedChoiceProcessor` is a
logits processor that watches the text the model writes; where a field's line has just
begun, it scores every option whole (the sum of its tokens' log probabilities, one
decode per option, the live sequence left as it was) and then

- **records** the figures, normalised over the options (the *content-free* pass: the
  same prompt with every user message ``N/A``), or
- **chooses** the option with the best probability over its content-free figure
  (contextual calibration) and has it written, a token at a time, by raising its
  tokens far above the rest. A token the grammar refuses all the same (a client's
  options that its grammar does not allow) is simply not written: sampling goes on
  as if nothing had been asked.

Each field is acted on once, where its line first begins (at the start of the answer
or after a line break). Scoring costs one decode per option of the option's tokens,
bounded by the request's limits (``_request``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
from llama_cpp import llama_cpp as native

__all__ = [
    "FORCED_BOOST",
    "ClosedChoiceProcessor",
    "ClosedField",
    "calibrated_choice",
    "calibrated_figures",
]

#: Added to a chosen option's next token: far above any logit, so it is drawn at every
#: temperature, and still a finite number for the samplers after.
FORCED_BOOST = 1.0e4


@dataclass(frozen=True)
class ClosedField:
    """A closed field as the request names it (see the module's docstring)."""

    after: str
    options: tuple[str, ...]
    end: str = ""

    @property
    def lead(self) -> str:
        """What every option begins with (``" "``): text that may already be written
        when the field is seen (a token holding ``:`` and the blank after it)."""
        first = self.options[0]
        size = 0
        while all(len(o) > size + 1 and o[size] == first[size] for o in self.options):
            size += 1
        return first[:size]


def calibrated_choice(
    figures: Mapping[str, float], prior: Mapping[str, float] | None
) -> str | None:
    """The option with the best probability over its prior (both normalised); an
    option the prior does not hold is given the prior's smallest figure. Without a
    prior, the likeliest option. ``None`` when no option has a probability."""
    p = _normalised(figures)
    if not p:
        return None
    q = _normalised(prior or {})
    if not q:
        return max(p, key=lambda option: p[option])
    floor = min(v for v in q.values() if v > 0) if any(v > 0 for v in q.values()) else 1.0
    return max(
        p,
        key=lambda option: math.log(max(p[option], 1e-300)) - math.log(q.get(option) or floor),
    )


def calibrated_figures(
    figures: Mapping[str, float], prior: Mapping[str, float] | None
) -> dict[str, float]:
    """Each option's probability over its prior, normalised over the options (the
    prior's smallest figure for an option it does not hold); ``figures`` normalised
    when there is no prior."""
    p = _normalised(figures)
    q = _normalised(prior or {})
    if not p or not q:
        return p
    floor = min(v for v in q.values() if v > 0) if any(v > 0 for v in q.values()) else 1.0
    return _normalised({o: v / (q.get(o) or floor) for o, v in p.items()})


def _normalised(figures: Mapping[str, float]) -> dict[str, float]:
    total = sum(figures.values())
    return {k: v / total for k, v in figures.items()} if total > 0 else {}


@dataclass
class _State:
    """What happened at one field."""

    figures: dict[str, float] | None = None
    logprobs: dict[str, float | None] | None = None
    calibrated: dict[str, float] | None = None
    chosen: str | None = None


@dataclass
class ClosedChoiceProcessor:
    """The logits processor of one generation (see the module's docstring).

    ``model`` is the ``Llama`` generating; ``prompt_tokens`` how many of its tokens are
    the prompt; ``priors`` the content-free figures per field (``None``: record them
    instead, in :attr:`states`); ``restore_logits`` re-reads the last token after
    scoring, for a caller that reads the context's last logits after sampling.
    """

    model: Any
    fields: Sequence[ClosedField]
    prompt_tokens: int
    priors: Sequence[Mapping[str, float] | None] | None = None
    restore_logits: bool = False
    states: list[_State] = field(default_factory=list)
    _text: bytearray = field(default_factory=bytearray)
    _seen: int = 0
    _pending: list[int] = field(default_factory=list)
    #: The log probability each pending token is reported with (``logprobs``).
    _pending_logprobs: list[float] = field(default_factory=list)
    _expected: int | None = None
    _tokenize: Callable[[str], list[int]] | None = None

    def __post_init__(self) -> None:
        self.states = [_State() for _ in self.fields]

    @property
    def done(self) -> bool:
        """Every field has been scored (a content-free pass may stop here)."""
        return all(s.figures is not None for s in self.states)

    def report(self) -> list[dict[str, Any]]:
        """What each field chose: its options' figures (normalised over the options),
        their log probabilities (each option whole, ``end`` included), the prior, the
        choice; ``None`` where the field was not seen."""
        return [
            {
                "after": f.after,
                "figures": s.figures,
                "logprobs": s.logprobs,
                "prior": None if self.priors is None else self.priors[i],
                "calibrated": s.calibrated,
                "chosen": s.chosen,
            }
            for i, (f, s) in enumerate(zip(self.fields, self.states, strict=True))
        ]

    def __call__(
        self, input_ids: npt.NDArray[np.intc], scores: npt.NDArray[np.single]
    ) -> npt.NDArray[np.single]:
        written = input_ids[self.prompt_tokens :]
        new = written[self._seen :]
        if len(new):
            if self._expected is not None and int(new[-1]) != self._expected:
                self._pending.clear()  # the forced token was not written
                self._pending_logprobs.clear()
            for token in new:
                self._text += self.model.detokenize([int(token)])
            self._seen = len(written)
        self._expected = None
        if self._pending:
            return self._force(scores, self._pending.pop(0), self._pending_logprobs.pop(0))
        for index, closed in enumerate(self.fields):
            if self.states[index].figures is not None:
                continue
            lead = self._lead_written(closed)
            if lead is None:
                continue
            return self._at_field(index, closed, lead, scores)
        return scores

    def _lead_written(self, closed: ClosedField) -> str | None:
        """How much of the options' common beginning is written, when the field's line
        has just begun; ``None`` when it has not."""
        text = self._text
        head = closed.after.encode()
        lead = closed.lead
        for size in range(len(lead), -1, -1):
            marker = head + lead[:size].encode()
            if text.endswith(marker) and (
                len(text) == len(marker) or text[len(text) - len(marker) - 1] == 0x0A
            ):
                return lead[:size]
        return None

    def _at_field(
        self, index: int, closed: ClosedField, lead: str, scores: npt.NDArray[np.single]
    ) -> npt.NDArray[np.single]:
        raw = np.asarray(scores, dtype=np.float64)
        top = float(raw.max())
        first = raw - top - math.log(float(np.exp(raw - top).sum()))
        totals: dict[str, float] = {}
        for option in closed.options:
            tokens = self._tokens(option[len(lead) :] + closed.end)
            totals[option] = float(first[tokens[0]]) + self._rest(tokens) if tokens else -math.inf
        if self.restore_logits:
            self._reread_last()
        best = max(totals.values())
        state = self.states[index]
        state.logprobs = {o: v if math.isfinite(v) else None for o, v in totals.items()}
        state.figures = (
            _normalised({o: math.exp(v - best) for o, v in totals.items()})
            if math.isfinite(best)
            else {}
        )
        if self.priors is None:
            return scores
        state.chosen = calibrated_choice(state.figures, self.priors[index])
        state.calibrated = calibrated_figures(state.figures, self.priors[index])
        if state.chosen is None:
            return scores
        chosen = self._tokens(state.chosen[len(lead) :])
        if not chosen:
            return scores
        # The option is reported with the probability it was chosen by: its calibrated
        # one, on its first token (the others 0), so a value's confidence says how
        # strongly the input, against the content-free answer, points to it.
        figure = state.calibrated.get(state.chosen, 0.0)
        chosen_logprob = math.log(max(figure, 1e-300))
        self._pending = chosen[1:]
        self._pending_logprobs = [0.0] * len(self._pending)
        return self._force(scores, chosen[0], chosen_logprob)

    def _force(
        self, scores: npt.NDArray[np.single], token: int, logprob: float
    ) -> npt.NDArray[np.single]:
        if 0 <= token < len(scores):
            scores[token] = float(np.max(scores)) + FORCED_BOOST
            self._expected = token
            self.model.reported = (token, logprob)
        else:
            self._pending.clear()
            self._pending_logprobs.clear()
        return scores

    def _tokens(self, text: str) -> list[int]:
        tokens = self.model.tokenize(text.encode(), add_bos=False, special=False)
        return [int(t) for t in tokens]

    def _rest(self, tokens: Sequence[int]) -> float:
        """The log probability of ``tokens[1:]`` after the live sequence and
        ``tokens[0]``: one decode, its logits read at every position; the live
        sequence's cache is cut back to where it was."""
        if len(tokens) < 2:
            return 0.0
        model = self.model
        live = model.n_tokens
        context = model._ctx
        context.kv_cache_seq_rm(-1, live, -1)
        batch = model._batch
        batch.set_batch(batch=list(tokens[:-1]), n_past=live, logits_all=True)
        context.decode(batch)
        total = 0.0
        vocabulary = model.n_vocab()
        for at, token in enumerate(tokens[1:]):
            pointer = native.llama_get_logits_ith(context.ctx, at)
            logits = np.ctypeslib.as_array(pointer, shape=(vocabulary,)).astype(np.float64)
            top = float(logits.max())
            total += float(logits[token]) - top - math.log(float(np.exp(logits - top).sum()))
        context.kv_cache_seq_rm(-1, live, -1)
        return total

    def _reread_last(self) -> None:
        """Decode the live sequence's last token again, so that the context's last
        logits are those the current token is drawn from."""
        model = self.model
        live = model.n_tokens
        model._ctx.kv_cache_seq_rm(-1, live - 1, -1)
        model._batch.set_batch(
            batch=[int(model.input_ids[live - 1])], n_past=live - 1, logits_all=False
        )
        model._ctx.decode(model._batch)
