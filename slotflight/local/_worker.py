"""The processes that run llama.cpp for the local server (``python -m`` this module ROLE).

Everything llama.cpp does with a client's input happens here, never in the server's
process, so a crash or a hang costs the server a process restart, not its life:

``generate``
    loads the model once (a converted copy of its weights when asked:
    :mod:`~slotflight.local._weights`) and generates one request at a time. Its commands thread
    reads ``generate`` and ``cancel`` frames while the main thread generates; a
    cancel stops the generation at the next sampled token (a stopping criterion) or
    inside a decode (llama.cpp's abort callback, checked between graph nodes, so a
    long prompt stops within milliseconds). While it works it reports ``progress``
    (at most every :data:`PROGRESS_INTERVAL` seconds), so the server can tell a slow
    generation from a stuck one. It keeps prompt prefixes across requests
    (:class:`~slotflight.local._prefix.PrefixCache`).
``check``
    loads the vocabulary only, and for each request renders the chat template,
    tokenizes, converts a JSON schema to GBNF, bounds the grammar and has llama.cpp
    parse it. It announces each native step (``stage``) before it runs, so that if
    the process dies the server knows which part of the request killed it.

The first frame from the server is the configuration; the process answers ``ready``
(or ``failed``) and ends when its standard input closes. Frames travel on the original
standard output; file descriptor 1 is pointed at standard error, so whatever native
code prints cannot corrupt them.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import json
import math
import os
import queue
import sys
import threading
import time
from collections.abc import Callable, Generator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any, cast

import llama_cpp
import numpy as np
import numpy.typing as npt
from llama_cpp import llama_cpp as native
from llama_cpp._internals import LlamaModel
from llama_cpp.llama_grammar import LlamaGrammar

from .._errors import SlotflightError
from ._best_first import BestFirstSampling
from ._closed_choice import ClosedChoiceProcessor, ClosedField
from ._grammar import GrammarLimits, compile_check, precheck_grammar, schema_to_grammar
from ._list_end import RepeatedItemTokens
from ._opening import grammar_opening, opening_kept, opening_tokens
from ._prefix import PrefixCache, shared_prefix, with_written_tokens
from ._prompt import PromptTokenizer, special_tokens, token_piece
from ._value_start import ValueStartPenalty
from ._weights import discard_copy, weights_to_load
from ._wire import read_frame, write_frame

__all__ = ["MIN_SAVED_TOKENS", "PROGRESS_INTERVAL", "main"]

PROGRESS_INTERVAL = 0.5
"""Seconds between two ``progress`` reports of a generation that makes progress."""

MIN_SAVED_TOKENS = 32
"""A live sequence shorter than this is not worth saving in the prefix cache."""

MAX_PRIORS = 64
"""Content-free figures kept (one entry per content-free prompt, grammar and fields)."""

Send = Callable[[dict[str, Any]], None]

_set_abort_callback = native._lib.llama_set_abort_callback
_set_abort_callback.argtypes = [ctypes.c_void_p, llama_cpp.ggml_abort_callback, ctypes.c_void_p]
_set_abort_callback.restype = None


def main(argv: Sequence[str]) -> int:
    role = argv[1] if len(argv) > 1 else ""
    frames = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    def send(message: dict[str, Any]) -> None:
        write_frame(frames, message)

    commands = sys.stdin.buffer
    config = read_frame(commands)
    if config is None or role not in ("generate", "check"):
        return 2
    try:
        served: _Generator | _Checker = (
            _Generator(config, send) if role == "generate" else _Checker(config)
        )
    # Whatever stops the model from loading is reported to the server, which raises it.
    except Exception as exc:
        send({"event": "failed", "message": f"{type(exc).__name__}: {exc}"})
        return 1
    send({"event": "ready", **served.loaded})
    served.serve(commands, send)
    return 0


# -- generation -------------------------------------------------------------------------


class _Model(BestFirstSampling):
    """``Llama`` that applies a grammar to the likeliest tokens first (the same draws
    for a fraction of the checks: :mod:`~slotflight.local._best_first`), records how
    many tokens the first ``eval`` of a generation took (the prompt tokens not reused),
    saves and loads its sequence's KV state, and, when :attr:`sampled` is a list,
    records each sampled token with its log probability."""

    first_eval: int | None = None
    #: ``(token, logprob)`` of every token sampled since it was set to a list.
    sampled: list[tuple[int, float]] | None = None
    #: ``(token, logprob)`` a logits processor chose the next token by (a calibrated
    #: closed choice): recorded instead of the model's own figure when it is drawn.
    reported: tuple[int, float] | None = None
    #: Tokens the grammar fixed, read with the prompt (:mod:`~slotflight.local._opening`):
    #: the next generation's sampler chain accepts them before its first draw.
    opening: Sequence[int] = ()

    def _init_sampler(self, **settings: Any) -> Any:  # type: ignore[override]
        """The sampler chain, having accepted :attr:`opening` (its grammar advances past
        them and its penalties count them, as if they had been sampled)."""
        sampler = super()._init_sampler(**settings)
        for token in self.opening:
            native.llama_sampler_accept(sampler.sampler, token)
        return sampler

    def generate(self, *args: Any, **kwargs: Any) -> Generator[int, Any, None]:
        """``Llama.generate``, recording each token's log probability as it is sampled:
        from the model's own distribution (the logits the token was sampled from,
        before penalties, grammar and temperature), as OpenAI's ``logprobs`` are, or
        the one a processor chose it by (:attr:`reported`)."""
        for token in super().generate(*args, **kwargs):
            reported, self.reported = self.reported, None
            if self.sampled is not None:
                logprob = (
                    reported[1]
                    if reported is not None and reported[0] == int(token)
                    else self._logprob(int(token))
                )
                self.sampled.append((int(token), logprob))
            yield token

    def _logprob(self, token: int) -> float:
        """log softmax of the last logits at ``token``: O(vocabulary), no copy."""
        pointer = native.llama_get_logits_ith(self._ctx.ctx, -1)
        logits = np.ctypeslib.as_array(pointer, shape=(self.n_vocab(),))
        top = float(logits.max())
        total = float(np.exp(logits - top).sum())
        return float(logits[token]) - top - math.log(total)

    def eval(self, tokens: Sequence[int]) -> None:
        if self.first_eval is None:
            self.first_eval = len(tokens)
        super().eval(tokens)

    def forget(self) -> None:
        """Drop the live tokens and their KV: the next prompt is evaluated whole."""
        native.llama_memory_clear(native.llama_get_memory(self._ctx.ctx), True)
        self.n_tokens = 0

    @property
    def live(self) -> npt.NDArray[np.intc]:
        """The tokens whose KV the context holds."""
        return self.input_ids[: self.n_tokens]

    def save_sequence(self) -> bytes:
        """The KV state of the live tokens (cells past them are dropped first)."""
        self._ctx.kv_cache_seq_rm(-1, self.n_tokens, -1)
        context = self._ctx.ctx
        size = native.llama_state_seq_get_size(context, 0)
        buffer = (ctypes.c_uint8 * size)()
        written = native.llama_state_seq_get_data(context, buffer, size, 0)
        return bytes(memoryview(buffer)[:written])

    def load_sequence(self, tokens: npt.NDArray[np.intc], state: bytes) -> bool:
        """Make ``tokens`` (whose KV is ``state``) the live tokens; False if refused."""
        self.forget()
        buffer = (ctypes.c_uint8 * len(state)).from_buffer_copy(state)
        if native.llama_state_seq_set_data(self._ctx.ctx, buffer, len(state), 0) != len(state):
            self.forget()
            return False
        self.input_ids[: len(tokens)] = tokens
        self.n_tokens = len(tokens)
        self._requires_eval = True  # the logits of the last token were not saved
        return True


class _Cancelled(threading.Event):
    """Set when the running generation's client went away (or the server did)."""


class _StopCheck:
    """The stopping criterion llama.cpp calls after sampling each token.

    ``input_ids`` holds the prompt and every token evaluated so far; the token just
    sampled is not in it yet, so its length tells how many tokens were sampled.
    """

    def __init__(
        self,
        prompt_tokens: int,
        cancelled: _Cancelled,
        progress: Callable[[], None],
        enough: Callable[[], bool] | None = None,
    ):
        self.sampled = 0
        self._prompt_tokens = prompt_tokens
        self._cancelled = cancelled
        self._progress = progress
        self._enough = enough

    def __call__(self, input_ids: npt.NDArray[np.intc], logits: npt.NDArray[np.single]) -> bool:
        self.sampled = max(self.sampled, len(input_ids) - self._prompt_tokens + 1)
        self._progress()
        return self._cancelled.is_set() or (self._enough is not None and self._enough())


class _Generator:
    def __init__(self, config: Mapping[str, Any], send: Send) -> None:
        threads = int(config["n_threads"])
        weights, converted, note = _weights_file(config, threads)
        try:
            self.model = _load_model(config, weights, threads)
        except ValueError:  # llama.cpp could not load the file
            if converted or weights == Path(config["model_path"]):
                raise
            # A kept copy, damaged since it was written: write it again from its source.
            discard_copy(weights)
            weights, converted, note = _weights_file(config, threads)
            self.model = _load_model(config, weights, threads)
        lone_space = float(config["lone_space_penalty"])
        bracket = float(config["bracket_penalty"])
        repeated_item = float(config.get("repeated_item_penalty", 0.0))
        # The vocabulary is read only when a penalty is on: off, they are inactive anyway.
        pieces = (
            [self.model.detokenize([t]) for t in range(self.model.n_vocab())]
            if lone_space or bracket or repeated_item
            else []
        )
        self.value_start = ValueStartPenalty(pieces, lone_space, bracket)
        #: The control tokens, which a message's text never stands for, and their text.
        self.special = {
            token: token_piece(self.model._model, token)
            for token in special_tokens(self.model._model)
        }
        self.repeated_item = RepeatedItemTokens(pieces, repeated_item)
        flash_attn = (
            self.model.context_params.flash_attn_type == llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED
        )
        self.loaded: dict[str, Any] = {
            "n_ctx": self.model.n_ctx(),
            "flash_attn": flash_attn,
            "weights": str(weights),
            "converted": converted,
            "weights_note": note,
            "lone_space_penalty": self.value_start.lone_space_in_effect,
            "bracket_penalty": self.value_start.bracket_in_effect,
            "repeated_item_penalty": self.repeated_item.penalty_in_effect,
        }
        self.cache = PrefixCache(int(config["prompt_cache_bytes"]))
        #: Content-free figures of closed fields, by content-free prompt, grammar and fields.
        self.priors: dict[str, list[dict[str, float] | None]] = {}
        #: Where the tokens the model wrote begin in the live sequence (its length when
        #: it holds none: a prompt only, or a saved prefix loaded back).
        self._written_from = 0
        self.cancelled = _Cancelled()
        self._send = send
        self._current: str | None = None
        self._cancel_request: str | None = None
        self._current_lock = threading.Lock()
        self._last_progress = 0.0
        self._jobs: queue.SimpleQueue[dict[str, Any] | None] = queue.SimpleQueue()
        # Kept on the instance: the C side holds only a pointer to it.
        self._abort = llama_cpp.ggml_abort_callback(self._abort_requested)
        _set_abort_callback(self.model._ctx.ctx, self._abort, None)

    def serve(self, commands: IO[bytes], send: Send) -> None:
        threading.Thread(target=self._read_commands, args=(commands,), daemon=True).start()
        while (job := self._jobs.get()) is not None:
            send(self._generate(job))

    def _read_commands(self, commands: IO[bytes]) -> None:
        try:
            while (command := read_frame(commands)) is not None:
                if command.get("op") == "generate":
                    self._jobs.put(command)
                elif command.get("op") == "cancel":
                    with self._current_lock:
                        self._cancel_request = command.get("id")
                        if self._cancel_request == self._current:
                            self.cancelled.set()
        finally:  # the server is gone: stop what runs and end
            self.cancelled.set()
            self._jobs.put(None)

    def _abort_requested(self, _data: ctypes.c_void_p) -> bool:
        self._progress()
        return self.cancelled.is_set()

    def _progress(self) -> None:
        now = time.monotonic()
        if now - self._last_progress >= PROGRESS_INTERVAL:
            self._last_progress = now
            self._send({"event": "progress"})

    def _generate(self, job: Mapping[str, Any]) -> dict[str, Any]:
        job_id = str(job["id"])
        tokens = [int(t) for t in job["tokens"]]
        if job.get("cache_prompt", True):
            tokens = self._written_tokens(tokens, job.get("max_tokens"))
        with self._current_lock:
            self._current = job_id
            if self._cancel_request == job_id:  # cancelled before it started
                self.cancelled.set()
            else:
                self.cancelled.clear()
        check = _StopCheck(len(tokens), self.cancelled, self._progress)
        finish = "length"
        error: str | None = None
        logprobs = _PieceTokens(self.model) if job.get("logprobs") else None
        opening, opening_text = self._opening(job, len(tokens))
        if logprobs is not None:  # the grammar left no other token: probability 1
            logprobs.sampled.extend((token, 0.0) for token in opening)
        closed = _closed_fields(job)
        calibration = _NO_CALIBRATION
        processor: ClosedChoiceProcessor | None = None
        try:
            if closed:
                calibration = self._calibration(job, closed)
                processor = ClosedChoiceProcessor(
                    self.model,
                    closed,
                    len(tokens),
                    priors=calibration.priors,
                    restore_logits=logprobs is not None,
                )
            self.model.first_eval = None
            self.model.sampled = None if logprobs is None else logprobs.sampled
            self._place(
                np.array([*tokens, *opening], dtype=np.intc), bool(job.get("cache_prompt", True))
            )
            self._written_from = len(tokens)  # what the live sequence holds past it is written
            chunks = self._chunks(tokens, job, check, processor, opening)
            with contextlib.closing(chunks):
                for chunk in chunks:
                    if opening_text:  # read with the prompt: written once it was read
                        check.sampled = max(check.sampled, len(opening))
                        self._send_piece(job_id, opening_text, check.sampled, logprobs)
                        opening_text = ""
                    choice = chunk["choices"][0]
                    if choice["text"]:
                        self._send_piece(job_id, choice["text"], check.sampled, logprobs)
                    if choice["finish_reason"] in ("stop", "length"):
                        finish = choice["finish_reason"]
        # Whatever llama.cpp raises (a failed or aborted decode, a full KV cache) ends
        # this generation only; the process goes on serving.
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
        self.model.sampled = None
        with self._current_lock:
            self._current = None
            cancelled = self.cancelled.is_set()
        first_eval = self.model.first_eval
        cached = _reused(len(tokens), len(opening), first_eval)
        return {
            "event": "done",
            "id": job_id,
            "finish_reason": "cancelled" if cancelled else ("error" if error else finish),
            "error": None if cancelled else error,
            # a content-free pass run for this request is counted with it
            "prompt_tokens": len(tokens) + calibration.prompt_tokens,
            "completion_tokens": check.sampled + calibration.completion_tokens,
            "cached_tokens": cached + calibration.cached_tokens,
            "closed_choices": None if processor is None else processor.report(),
        }

    def _send_piece(
        self, job_id: str, text: str, sampled: int, logprobs: _PieceTokens | None
    ) -> None:
        piece: dict[str, Any] = {"event": "piece", "id": job_id, "text": text, "sampled": sampled}
        if logprobs is not None:
            piece["logprobs"] = logprobs.take(text)
        self._send(piece)

    def _opening(self, job: Mapping[str, Any], prompt_tokens: int) -> tuple[list[int], str]:
        """The tokens the job's grammar fixes at the start, to be read with its prompt
        of ``prompt_tokens``, and their text; none when a stop sequence could meet them,
        or they would use up ``max_tokens`` or the context window."""
        tokens = [int(t) for t in job.get("opening") or ()]
        if not tokens or not isinstance(job.get("grammar"), str):
            return [], ""
        if prompt_tokens + len(tokens) >= self.model.n_ctx():
            return [], ""
        max_tokens = job.get("max_tokens")
        if max_tokens is not None and int(max_tokens) <= len(tokens):
            return [], ""
        text = self.model.detokenize(tokens).decode("utf-8", "replace")
        if not opening_kept(text, [str(s) for s in job.get("stop", ())]):
            return [], ""
        return tokens, text

    def _calibration(self, job: Mapping[str, Any], closed: list[ClosedField]) -> _Calibration:
        """The content-free figures of ``closed``: kept from an earlier request with
        the same content-free prompt, grammar and fields, else read from a content-free
        pass run now (greedy, under the request's grammar, stopped once every field has
        been scored). A pass that did not end well keeps no figures."""
        spec = job["closed_choices"]
        free = [int(t) for t in spec.get("content_free") or ()]
        key = json.dumps([free, job.get("grammar"), spec.get("fields")])
        kept = self.priors.pop(key, None)
        if kept is not None:
            self.priors[key] = kept  # the most recently used last
            return _Calibration(kept)
        if not free:
            return _Calibration([None] * len(closed))
        recorder = ClosedChoiceProcessor(self.model, closed, len(free))
        check = _StopCheck(len(free), self.cancelled, self._progress, lambda: recorder.done)
        self.model.first_eval = None
        self.model.sampled = None
        opening, _ = self._opening(job, len(free))
        self._place(np.array([*free, *opening], dtype=np.intc), bool(job.get("cache_prompt", True)))
        pass_job = {**job, "temperature": 0.0, "top_p": 1.0, "seed": 0, "logprobs": False}
        chunks = self._chunks(free, pass_job, check, recorder, opening)
        with contextlib.closing(chunks):
            for _ in chunks:
                pass
        first_eval = self.model.first_eval
        priors = [s.figures for s in recorder.states]
        if not self.cancelled.is_set():
            self.priors[key] = priors
            while len(self.priors) > MAX_PRIORS:
                self.priors.pop(next(iter(self.priors)))
        self._written_from = self.model.n_tokens  # nothing written is worth splicing
        return _Calibration(
            priors,
            prompt_tokens=len(free),
            completion_tokens=check.sampled,
            cached_tokens=_reused(len(free), len(opening), first_eval),
        )

    def _written_tokens(self, tokens: list[int], max_tokens: int | None) -> list[int]:
        """``tokens`` with the text the model just wrote in the tokens it wrote it in
        (:func:`with_written_tokens`), so that a follow-up repeating an answer reuses its
        KV; unchanged when that would no longer leave room for ``max_tokens`` (at least
        one), or when llama.cpp refuses to cut the text (the prompt is then read as the
        checking process cut it)."""
        model = self.model
        try:
            spliced = with_written_tokens(
                model.live,
                np.array(tokens, dtype=np.intc),
                lambda token: model.detokenize([token], special=True),
                lambda data: model.tokenize(data, add_bos=False, special=True),
                self._written_from,
                self.special,
                lambda data: model.tokenize(data, add_bos=False, special=False),
            )
        except (RuntimeError, ValueError):
            return tokens
        if len(spliced) > len(tokens) and len(spliced) + (max_tokens or 1) > model.n_ctx():
            return tokens
        return [int(t) for t in spliced]

    def _place(self, prompt: npt.NDArray[np.intc], cache_prompt: bool) -> None:
        """Put the best saved prefix for ``prompt`` into the context (saving the live
        sequence first when the switch would discard most of it)."""
        if not cache_prompt:
            self._save_live(kept=0)
            self.model.forget()
            return
        kept = shared_prefix(self.model.live, prompt)
        best = self.cache.best(prompt)
        if best is None or best[1] <= kept:
            self._save_live(kept)
            return
        tokens, state = self.cache.take(best[0])
        self._save_live(kept=0)
        self.model.load_sequence(tokens, state)

    def _save_live(self, kept: int) -> None:
        live = self.model.n_tokens
        if live >= MIN_SAVED_TOKENS and 2 * kept < live and self.cache.capacity_bytes:
            self.cache.put(self.model.live.copy(), self.model.save_sequence())

    def _chunks(
        self,
        tokens: list[int],
        job: Mapping[str, Any],
        check: _StopCheck,
        closed: ClosedChoiceProcessor | None = None,
        opening: Sequence[int] = (),
    ) -> Generator[dict[str, Any], None, None]:
        """The chunks of a generation of ``tokens`` followed by ``opening`` (tokens its
        grammar fixed, read with the prompt and counted among the written ones)."""
        grammar_text = job.get("grammar")
        grammar = (
            LlamaGrammar.from_string(grammar_text, verbose=False)
            if isinstance(grammar_text, str)
            else None
        )
        max_tokens = job.get("max_tokens")
        self.model.opening = opening
        chunks = self.model.create_completion(
            prompt=[*tokens, *opening],
            max_tokens=None if max_tokens is None else int(max_tokens) - len(opening),
            temperature=float(job["temperature"]),
            top_p=float(job["top_p"]),
            frequency_penalty=float(job.get("frequency_penalty", 0.0)),
            presence_penalty=float(job.get("presence_penalty", 0.0)),
            seed=job.get("seed"),
            stop=[str(s) for s in job.get("stop", ())],
            stream=True,
            stopping_criteria=llama_cpp.StoppingCriteriaList([check]),
            grammar=grammar,
            logits_processor=logits_processors(
                self.value_start, grammar, self.repeated_item, len(tokens), closed
            ),
        )
        return cast(Generator[dict[str, Any], None, None], chunks)


@dataclasses.dataclass(frozen=True)
class _Calibration:
    """The content-free figures a generation's closed fields are calibrated against,
    and the tokens of the content-free pass run to read them (0 when they were kept)."""

    priors: list[dict[str, float] | None]
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0


_NO_CALIBRATION = _Calibration([])


def _reused(prompt_tokens: int, opening: int, first_eval: int | None) -> int:
    """The prompt tokens reused from the cache, when the first ``eval`` of a generation
    of ``prompt_tokens`` and ``opening`` tokens took ``first_eval`` (the opening's are
    counted as written, not as prompt)."""
    if first_eval is None:
        return 0
    return min(prompt_tokens, prompt_tokens + opening - first_eval)


def _closed_fields(job: Mapping[str, Any]) -> list[ClosedField]:
    spec = job.get("closed_choices")
    if not isinstance(spec, Mapping):
        return []
    return [
        ClosedField(str(after), tuple(str(o) for o in options), str(end))
        for after, options, end in spec.get("fields") or ()
    ]


class _PieceTokens:
    """Which sampled tokens wrote each text piece ``create_completion`` yields.

    A piece is the text of the tokens sampled since the previous piece, or of a first
    part of them (the rest held back while it may still be a stop sequence or an
    unfinished character). :meth:`take` returns ``[text, bytes, logprob]`` for the
    tokens whose bytes make up the piece, or ``None`` when they do not (never a guess).
    """

    def __init__(self, model: _Model) -> None:
        self.model = model
        self.sampled: list[tuple[int, float]] = []
        self._taken = 0

    def take(self, text: str) -> list[list[Any]] | None:
        want = text.encode("utf-8")
        found: list[list[Any]] = []
        size = 0
        position = self._taken
        while size < len(want) and position < len(self.sampled):
            token, logprob = self.sampled[position]
            data = self.model.detokenize([token])
            found.append([data.decode("utf-8", "replace"), list(data), logprob])
            size += len(data)
            position += 1
        if b"".join(bytes(t[1]) for t in found) != want:
            self._taken = len(self.sampled)  # lost track: later pieces say nothing either
            return None
        self._taken = position
        return found


def logits_processors(
    value_start: ValueStartPenalty,
    grammar: LlamaGrammar | None,
    repeated_item: RepeatedItemTokens | None = None,
    prompt_tokens: int = 0,
    closed: ClosedChoiceProcessor | None = None,
) -> llama_cpp.LogitsProcessorList | None:
    """What changes a generation's logits: first the closed choices, when the request
    named closed fields (they read the model's own logits), then, under a grammar only
    (free text is left alone), the lone-space and bracket penalties, and the
    repeated-item penalty (a processor of its own per generation, which reads the
    generated text)."""
    processors: list[Any] = [] if closed is None else [closed]
    if grammar is None:
        return llama_cpp.LogitsProcessorList(processors) if processors else None
    if value_start.active:
        processors.append(value_start)
    if repeated_item is not None and repeated_item.penalty_in_effect > 0:
        processors.append(repeated_item.for_generation(prompt_tokens))
    return llama_cpp.LogitsProcessorList(processors) if processors else None


def _load_model(config: Mapping[str, Any], weights: Path, threads: int) -> _Model:
    """The model of ``weights`` in its context (``ValueError`` when llama.cpp cannot
    load the file)."""
    return _Model(
        model_path=str(weights),
        n_ctx=int(config["n_ctx"]),
        n_threads=threads,
        n_threads_batch=threads,
        flash_attn=bool(config["flash_attn"]),
        seed=int(config["seed"]),
        verbose=False,
    )


def _weights_file(config: Mapping[str, Any], threads: int) -> tuple[Path, bool, str]:
    """The file to load, whether it was converted just now, and why not the asked-for
    format when a conversion that was only preferred (``auto``) failed."""
    return weights_to_load(
        Path(config["model_path"]),
        config.get("quantization"),
        threads,
        required=bool(config.get("quantization_required")),
        directory=Path(config["cache_dir"]),
    )


# -- checking -----------------------------------------------------------------------------


class _Checker:
    def __init__(self, config: Mapping[str, Any]) -> None:
        params = native.llama_model_default_params()
        params.vocab_only = True
        self.model = LlamaModel(path_model=str(config["model_path"]), params=params, verbose=False)
        # No context: the vocabulary only, the same in every format of the weights.
        self.loaded: dict[str, Any] = {"n_ctx": int(config["n_ctx"]), "flash_attn": False}
        self.limits = GrammarLimits(**config["grammar_limits"])
        self.read_opening = bool(config.get("read_opening", True))
        self._prompts = PromptTokenizer(self.model)

    def serve(self, commands: IO[bytes], send: Send) -> None:
        while (request := read_frame(commands)) is not None:
            try:
                send({"event": "prepared", **self._prepare(request, send)})
            except SlotflightError as exc:
                send(
                    {
                        "event": "refused",
                        "code": exc.code,
                        "message": exc.message,
                        "location": exc.location,
                    }
                )

    def _prepare(self, request: Mapping[str, Any], send: Send) -> dict[str, Any]:
        send({"event": "stage", "stage": "messages"})
        tokens, stop = self._prompts(request["messages"])
        free = request.get("content_free")
        free_tokens = self._prompts(free)[0] if free else []
        grammar = None
        opening: list[int] = []
        constraint = request.get("constraint")
        if constraint is not None:
            send({"event": "stage", "stage": "grammar"})
            grammar = self._grammar(constraint)
            if self.read_opening:
                opening = opening_tokens(
                    grammar_opening(grammar),
                    lambda data: self.model.tokenize(data, add_bos=False, special=False),
                    lambda found: self.model.detokenize(list(found), special=False),
                )
        return {
            "tokens": tokens,
            "stop": [stop] if isinstance(stop, str) else list(stop or ()),
            "grammar": grammar,
            "opening_tokens": opening,
            "content_free_tokens": free_tokens,
        }

    def _grammar(self, constraint: Mapping[str, Any]) -> str:
        param = str(constraint["param"])
        if constraint["kind"] == "schema":
            text = schema_to_grammar(
                _load_json(constraint["text"], param), param=param, limits=self.limits
            )
            code = "invalid_schema"
        else:
            text = str(constraint["text"])
            precheck_grammar(text, param=param, limits=self.limits)
            code = "invalid_grammar"
        compile_check(self.model.vocab, text, param=param, code=code)
        return text


def _load_json(text: str, param: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        raise SlotflightError(
            "the JSON schema is nested too deeply", code="invalid_schema", location=param
        ) from None


if __name__ == "__main__":
    sys.exit(main(sys.argv))
