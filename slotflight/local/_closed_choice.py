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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
from llama_cpp import llama_cpp as native

from ..syntax.closed_choices import calibrated_choice, calibrated_figures, normalised

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


def _log_softmax(logits: npt.NDArray[Any]) -> npt.NDArray[np.float64]:
    """The log probabilities of ``logits`` (a copy in float64)."""
    values = np.asarray(logits, dtype=np.float64)
    top = float(values.max())
    return values - top - math.log(float(np.exp(values - top).sum()))


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
    #: Per field, the texts its line may have just begun with (``after`` and as much
    #: of the options' common beginning as a token may hold), the longest first.
    _markers: list[list[tuple[bytes, str]]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.states = [_State() for _ in self.fields]
        self._markers = [
            [
                (closed.after.encode() + closed.lead[:size].encode(), closed.lead[:size])
                for size in range(len(closed.lead), -1, -1)
            ]
            for closed in self.fields
        ]

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
            lead = self._lead_written(index)
            if lead is None:
                continue
            return self._at_field(index, closed, lead, scores)
        return scores

    def _lead_written(self, index: int) -> str | None:
        """How much of the options' common beginning is written, when field
        ``index``'s line has just begun; ``None`` when it has not."""
        text = self._text
        for marker, lead in self._markers[index]:
            if text.endswith(marker) and (
                len(text) == len(marker) or text[len(text) - len(marker) - 1] == 0x0A
            ):
                return lead
        return None

    def _at_field(
        self, index: int, closed: ClosedField, lead: str, scores: npt.NDArray[np.single]
    ) -> npt.NDArray[np.single]:
        first = _log_softmax(scores)
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
            normalised({o: math.exp(v - best) for o, v in totals.items()})
            if math.isfinite(best)
            else {}
        )
        if self.priors is None:
            return scores
        state.calibrated = calibrated_figures(state.figures, self.priors[index])
        if not state.calibrated:
            return scores
        state.chosen = max(state.calibrated, key=state.calibrated.__getitem__)
        chosen = self._tokens(state.chosen[len(lead) :])
        if not chosen:
            return scores
        # The option is reported with the probability it was chosen by: its calibrated
        # one, on its first token (the others 0), so a value's confidence says how
        # strongly the input, against the content-free answer, points to it.
        chosen_logprob = math.log(max(state.calibrated[state.chosen], 1e-300))
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
            logits = np.ctypeslib.as_array(pointer, shape=(vocabulary,))
            total += float(_log_softmax(logits)[token])
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
