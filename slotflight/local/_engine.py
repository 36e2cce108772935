"""One GGUF model served from llama.cpp processes, one generation at a time, in FIFO order.

llama.cpp runs in two child processes (see ``_worker``), never in the server's:

- the *checking* process (vocabulary only) renders, tokenizes and checks each request
  before it is queued (:meth:`LocalEngine.prepare`), so a bad request is answered at
  once and a grammar that crashes or hangs the parser costs that process, not the
  server. It gets ``check_timeout`` seconds per request.
- the *generating* process holds the model and its context. :meth:`LocalEngine.submit`
  puts a request in a FIFO queue (up to ``max_pending`` waiting, then
  ``server_busy``); a supervisor thread sends one request at a time to the process
  and hands its text to the event loop through the :class:`Generation`, which keeps
  what its reader has not taken yet. The supervisor never waits for a reader: the
  model is not held by a client that reads slowly or not at all, and what is kept is
  at most the generation's own text (``max_tokens``, at most the context window).

A reader that goes away calls :meth:`Generation.cancel`. The supervisor tells the
process, which stops at the next sampled token or inside the current decode. If it has
not stopped ``cancel_grace`` seconds later (a sampling step that takes minutes), the
process is killed. It is also killed when it shows no progress for ``stall_timeout``
seconds while its client waits. A process that dies or is killed fails only the request
it was running (``worker_crashed``, ``generation_stalled``) and is started again; the
queue goes on. A generation cancelled while still queued never runs: it is dropped from
the queue at the next submission (so it holds no place against ``max_pending``), or
skipped when the supervisor reaches it first.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import queue
import threading
import time
import uuid
import warnings
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import anyio.to_thread

try:
    import llama_cpp
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "slotflight.local needs llama-cpp-python: pip install 'slotflight[local]'"
    ) from exc

from .._errors import SlotflightError
from ..client.usage import TokenUsage
from ._grammar import DEFAULT_GRAMMAR_LIMITS, GrammarLimits
from ._list_end import DEFAULT_REPEATED_ITEM_PENALTY
from ._model import default_model_path, is_packaged_model
from ._process import ChildGone, ChildProcess
from ._request import ClosedChoices, Constraint
from ._value_start import DEFAULT_BRACKET_PENALTY, DEFAULT_LONE_SPACE_PENALTY, check_penalty
from ._weights import AUTO, cache_directory, resolve_quantization

_log = logging.getLogger("slotflight.local")

__all__ = [
    "DEFAULT_BRACKET_PENALTY",
    "DEFAULT_CANCEL_GRACE",
    "DEFAULT_CHECK_TIMEOUT",
    "DEFAULT_LONE_SPACE_PENALTY",
    "DEFAULT_N_CTX",
    "DEFAULT_PROMPT_CACHE_BYTES",
    "DEFAULT_REPEATED_ITEM_PENALTY",
    "DEFAULT_STALL_TIMEOUT",
    "FinishReason",
    "Generation",
    "GenerationResult",
    "LocalEngine",
    "Piece",
    "Prompt",
    "Sampling",
    "Usage",
    "shared_engine",
]

DEFAULT_N_CTX = 4096
DEFAULT_MAX_PENDING = 32
DEFAULT_PROMPT_CACHE_BYTES = 256 * 1024 * 1024
DEFAULT_CANCEL_GRACE = 2.0
DEFAULT_STALL_TIMEOUT = 30.0
DEFAULT_CHECK_TIMEOUT = 10.0
DEFAULT_START_TIMEOUT = 120.0
_RECENT = 64
_POLL_SECONDS = 0.05
_IDLE_CHECK_SECONDS = 1.0

FinishReason = Literal["stop", "length", "cancelled", "error"]

Usage = TokenUsage
"""Token counts of one generation (:class:`slotflight.TokenUsage`).

``completion_tokens`` counts every token the model sampled, including the end-of-turn
token when it stopped on its own; ``cached_tokens`` the prompt tokens reused from a
cached prefix.
"""


@dataclass(frozen=True)
class Prompt:
    """A conversation rendered with the model's chat template, tokenized and checked.

    ``stop``: the template's end-of-turn strings. ``grammar``: the GBNF text that
    constrains the answer (from ``grammar``, a schema or ``json_object``), bounded and
    accepted by llama.cpp.
    """

    tokens: tuple[int, ...]
    stop: tuple[str, ...] = ()
    grammar: str | None = None
    #: The closed fields to calibrate (``after``, options, ``end``) and the tokens of
    #: the content-free conversation they are calibrated against (see ``_worker``).
    closed_fields: tuple[tuple[str, tuple[str, ...], str], ...] = ()
    content_free_tokens: tuple[int, ...] = ()
    #: The tokens of the text ``grammar`` fixes at the start of every answer (all but
    #: the last), read with the prompt instead of sampled one by one (``_opening``).
    opening_tokens: tuple[int, ...] = ()


@dataclass(frozen=True)
class Sampling:
    """How to sample. ``cache_prompt=False`` evaluates the whole prompt (no reuse)."""

    max_tokens: int | None = None
    temperature: float = 0.8
    top_p: float = 0.95
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    seed: int | None = None
    stop: tuple[str, ...] = ()
    cache_prompt: bool = True
    #: Record each token's log probability (:attr:`Piece.logprobs`).
    logprobs: bool = False


class Piece(str):
    """A piece of generated text (a ``str``), with the tokens that wrote it when the
    generation was asked for logprobs: ``[token text, UTF-8 bytes, logprob]`` each, in
    order, or ``None`` when they could not be told apart (never guessed)."""

    logprobs: list[list[Any]] | None

    def __new__(cls, text: str, logprobs: list[list[Any]] | None = None) -> Piece:
        piece = super().__new__(cls, text)
        piece.logprobs = logprobs
        return piece


@dataclass(frozen=True)
class GenerationResult:
    """How a generation ended.

    ``error`` (a message) and ``code`` (``generation_failed``, ``worker_crashed``,
    ``generation_stalled``) are set when ``finish_reason`` is ``"error"``; ``error``
    also explains a cancelled generation whose process had to be killed, or whose
    client the server cut (:attr:`Generation.cancel_reason`).
    """

    id: str
    finish_reason: FinishReason
    usage: TokenUsage
    error: str | None = None
    code: str | None = None
    #: What each closed field of the request chose (``_worker``'s ``ClosedChoice``).
    closed_choices: tuple[dict[str, Any], ...] = ()


class Generation:
    """A queued or running generation, read on the event loop that submitted it.

    Iterate it (``async for piece in generation``) for the text as it is sampled; once
    iteration ends, :attr:`result` holds the finish reason and usage. A generation that
    failed raises :class:`~slotflight.SlotflightError` (code ``generation_failed``,
    ``worker_crashed`` or ``generation_stalled``) from the iteration.
    """

    def __init__(self, generation_id: str, loop: asyncio.AbstractEventLoop) -> None:
        self.id = generation_id
        self.result: GenerationResult | None = None
        self._loop = loop
        # Not bounded by a count: the generation never waits for its reader, so this
        # holds what the reader has not taken yet, at most the generation's own text
        # (its ``max_tokens``, at most the context window), then the one final result.
        self._items: asyncio.Queue[Piece | GenerationResult] = asyncio.Queue()
        self._cancelled = threading.Event()
        self.cancel_reason: str | None = None
        """Why the generation was cancelled, when whoever cancelled it said why."""

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def cancel(self, reason: str | None = None) -> None:
        """Stop generating (or never start); safe from any thread, idempotent.

        ``reason`` (the first one given) explains the cancellation in the
        :class:`GenerationResult`'s ``error``.
        """
        if reason is not None and self.cancel_reason is None and not self.cancelled:
            self.cancel_reason = reason
        self._cancelled.set()

    def __aiter__(self) -> Generation:
        return self

    async def __anext__(self) -> Piece:
        if self.result is not None:
            raise StopAsyncIteration
        item = await self._items.get()
        if isinstance(item, Piece):
            return item
        self.result = item
        if item.finish_reason == "error":
            raise SlotflightError(
                item.error or "generation failed", code=item.code or "generation_failed"
            )
        raise StopAsyncIteration

    def deliver(self, text: str, logprobs: list[list[Any]] | None = None) -> bool:
        """Supervisor side: hand a text piece to the reader; never waits for it.

        Returns False (the piece is dropped) once the generation is cancelled.
        """
        if self.cancelled:
            return False
        return self._post(Piece(text, logprobs))

    def finish(self, result: GenerationResult) -> None:
        """Supervisor side: hand over how the generation ended; ends the reader's iteration."""
        self._post(result)

    def _post(self, item: Piece | GenerationResult) -> bool:
        try:
            self._loop.call_soon_threadsafe(self._items.put_nowait, item)
        except RuntimeError:  # the event loop is closed: nobody is reading
            self.cancel()
            return False
        return True


_Job = tuple[Generation, Prompt, Sampling]


class _Queue:
    """The jobs waiting for the model, first in first out, shared by the event loop
    (:meth:`offer`) and the supervisor (:meth:`take`). ``None`` in the queue ends the
    supervisor."""

    def __init__(self) -> None:
        self._jobs: deque[_Job | None] = deque()
        self._changed = threading.Condition()

    def offer(self, job: _Job, limit: int) -> tuple[bool, list[_Job]]:
        """Drop the jobs cancelled while they waited, then queue ``job`` unless
        ``limit`` jobs still wait: whether it was queued, and the jobs dropped. O(queue):
        the queue holds at most ``limit`` jobs after each offer, and only cancelling
        happens between two."""
        with self._changed:
            dropped = self.drop_cancelled()
            if len(self._jobs) >= limit:
                return False, dropped
            self._jobs.append(job)
            self._changed.notify()
            return True, dropped

    def drop_cancelled(self) -> list[_Job]:
        """Remove the jobs cancelled while they waited and return them. O(queue)."""
        with self._changed:
            dropped = [j for j in self._jobs if j is not None and j[0].cancelled]
            if dropped:
                self._jobs = deque(j for j in self._jobs if j is None or not j[0].cancelled)
            return dropped

    def end(self) -> None:
        """The supervisor stops after the jobs before this."""
        with self._changed:
            self._jobs.append(None)
            self._changed.notify()

    def take(self, timeout: float) -> _Job | None:
        """The next job (``None``: stop); :class:`queue.Empty` after ``timeout`` s."""
        with self._changed:
            if not self._changed.wait_for(lambda: self._jobs, timeout):
                raise queue.Empty
            return self._jobs.popleft()

    def take_all(self) -> list[_Job]:
        """What is left, once the supervisor stopped."""
        with self._changed:
            left = [job for job in self._jobs if job is not None]
            self._jobs.clear()
            return left


WorkerState = Literal["ready", "starting", "failed", "closed"]


class LocalEngine:
    """A GGUF chat model run by llama.cpp processes, generating one request at a time.

    Args:
        model_path: the GGUF file; see :func:`~slotflight.local.default_model_path`.
        n_ctx: context window in tokens; ``0`` takes the size the model was trained with.
        n_threads: CPU threads; defaults to every core this process may use.
        quantization: the weight format to load: ``"auto"`` converts the packaged
            model (Q4_1) to Q8_0, with which llama.cpp evaluates a prompt in about 0.6
            of the time on CPU (``benchmarks/weights.py``), and loads any other file as
            it is; ``"q8_0"``, ``"q4_0"`` or
            ``"f16"`` convert any file; ``None`` loads the file as it is. A converted
            copy is made once and kept in :func:`~slotflight.local.cache_directory`.
            When ``"auto"`` cannot write the copy, the file is loaded as it is.
        flash_attn: llama.cpp's flash attention (the same attention, computed in
            tiles): prompts are evaluated faster on CPU, the more the longer they are
            (7 % for 180 tokens, 11 % for 480 on 2 cores: ``benchmarks/flash_attention.py``);
            a reused prefix may then round differently from a whole evaluation.
        read_opening: read the text a grammar fixes at the start of every answer
            (``summary:`` in a slot grammar) with the prompt, in one batch, instead
            of sampling it a token at a time; its tokens are streamed first and
            counted as written (``docs/local.md``). ``False`` samples them.
        lone_space_penalty: logits taken from a lone space token right after a token
            that ends with a colon, in generations under a grammar, so that a value the
            grammar lets start with a word does (`` refund``), instead of with the lone
            space after which a small model writes a digit (``tags: 1``); see
            ``docs/local.md``. ``0`` turns it off.
        bracket_penalty: logits taken, likewise, from the tokens that begin with an
            opening bracket, with which a small model starts a text value as a JSON
            array or a placeholder (``summary: [1]``). ``0`` turns it off.
        repeated_item_penalty: logits taken, in generations under a grammar, from the
            tokens that begin with a dash at the start of a line once a list written
            as a block (``- item`` lines) repeated an item, so that the model moves on
            to the next field instead of writing that item again up to the list's
            item count. ``0`` turns it off.
        seed: the sampling seed of requests that give none (they then follow one
            deterministic sequence from it); ``None`` uses llama.cpp's default.
        max_pending: how many requests may wait for the model before ``server_busy``.
        stream_buffer: deprecated and ignored: a generation no longer waits for its
            reader (see :class:`Generation`); giving it warns.
        prompt_cache_bytes: memory for saved prompt prefixes (``0``: only the live
            context is reused).
        cancel_grace: seconds a cancelled generation may take to stop before its
            process is killed and restarted.
        stall_timeout: seconds without progress (no token, no decode step) before a
            running generation's process is killed (``generation_stalled``).
        check_timeout: seconds the checking process may spend on one request.
        grammar_limits: bounds on grammars and on grammars made from schemas.
        start_timeout: seconds a process may take to load the model.

    Raises:
        SlotflightError: ``model_not_found``, ``invalid_quantization``,
            ``invalid_option`` (a negative or infinite ``lone_space_penalty``,
            ``bracket_penalty`` or ``repeated_item_penalty``), or
            ``model_load_failed`` when llama.cpp cannot load the file (or cannot write
            a converted copy that was asked for by name).
    """

    def __init__(
        self,
        model_path: str | os.PathLike[str] | None = None,
        *,
        n_ctx: int = DEFAULT_N_CTX,
        n_threads: int | None = None,
        quantization: str | None = AUTO,
        flash_attn: bool = True,
        read_opening: bool = True,
        lone_space_penalty: float = DEFAULT_LONE_SPACE_PENALTY,
        bracket_penalty: float = DEFAULT_BRACKET_PENALTY,
        repeated_item_penalty: float = DEFAULT_REPEATED_ITEM_PENALTY,
        seed: int | None = None,
        max_pending: int = DEFAULT_MAX_PENDING,
        stream_buffer: int | None = None,
        prompt_cache_bytes: int = DEFAULT_PROMPT_CACHE_BYTES,
        cancel_grace: float = DEFAULT_CANCEL_GRACE,
        stall_timeout: float = DEFAULT_STALL_TIMEOUT,
        check_timeout: float = DEFAULT_CHECK_TIMEOUT,
        grammar_limits: GrammarLimits = DEFAULT_GRAMMAR_LIMITS,
        start_timeout: float = DEFAULT_START_TIMEOUT,
    ) -> None:
        if stream_buffer is not None:
            warnings.warn(
                "LocalEngine(stream_buffer=...) is ignored: a generation no longer waits"
                " for its reader",
                DeprecationWarning,
                stacklevel=2,
            )
        self.model_path: Path = default_model_path(model_path)
        self.model_id: str = self.model_path.stem
        convert_to = resolve_quantization(quantization, packaged=is_packaged_model(self.model_path))
        self._generate_config: dict[str, Any] = {
            "model_path": str(self.model_path),
            "quantization": convert_to,
            "quantization_required": quantization != AUTO,
            "cache_dir": str(cache_directory()),
            "n_ctx": n_ctx,
            "n_threads": n_threads or _usable_cores(),
            "flash_attn": flash_attn,
            "lone_space_penalty": check_penalty(lone_space_penalty, "lone_space_penalty"),
            "bracket_penalty": check_penalty(bracket_penalty, "bracket_penalty"),
            "repeated_item_penalty": check_penalty(repeated_item_penalty, "repeated_item_penalty"),
            "seed": llama_cpp.LLAMA_DEFAULT_SEED if seed is None else seed,
            "prompt_cache_bytes": prompt_cache_bytes,
        }
        self._check_config: dict[str, Any] = {
            "model_path": str(self.model_path),
            "n_ctx": n_ctx,
            "grammar_limits": dataclasses.asdict(grammar_limits),
            "read_opening": read_opening,
        }
        self._cancel_grace = cancel_grace
        self._stall_timeout = stall_timeout
        self._check_timeout = check_timeout
        self._start_timeout = start_timeout
        worker = ChildProcess("generate", self._generate_config)
        checker = ChildProcess("check", self._check_config)
        try:
            ready = worker.wait_ready(start_timeout)
            checker.wait_ready(start_timeout)
        except BaseException:
            worker.kill()
            checker.kill()
            raise
        self.n_ctx: int = int(ready["n_ctx"])
        self.flash_attn: bool = bool(ready["flash_attn"])
        """Whether the generating context uses flash attention."""
        self.lone_space_penalty: float = float(ready["lone_space_penalty"])
        """The penalty in effect: the one asked for, or 0 when the vocabulary has no
        lone-space token."""
        self.bracket_penalty: float = float(ready["bracket_penalty"])
        """The penalty in effect: the one asked for, or 0 when no token of the
        vocabulary begins with a bracket."""
        self.repeated_item_penalty: float = float(ready["repeated_item_penalty"])
        """The penalty in effect: the one asked for, or 0 when no token of the
        vocabulary begins with a dash."""
        self.weights_path: Path = Path(ready["weights"])
        """The file the generating process loaded: :attr:`model_path` or a converted copy."""
        self.converted: bool = bool(ready["converted"])
        """Whether this engine's start wrote :attr:`weights_path` (no copy was cached)."""
        if ready["weights_note"]:
            _log.warning("loading %s as it is: %s", self.model_path, ready["weights_note"])
        self._worker: ChildProcess | None = worker
        self._checker: ChildProcess | None = checker
        self._worker_state: WorkerState = "ready"
        self.restarts = 0
        """How many times the generating process was started again after it died or
        was killed (for monitoring and tests)."""
        self.recent: deque[GenerationResult] = deque(maxlen=_RECENT)
        """The last finished generations, newest last (for monitoring and tests)."""
        self._max_pending = max_pending
        self._jobs = _Queue()
        self._check_lock = threading.Lock()
        self._current: Generation | None = None
        self._closed = False
        self._supervisor = threading.Thread(
            target=self._supervise, name=f"slotflight-llama-{self.model_id}", daemon=True
        )
        self._supervisor.start()

    @property
    def worker_state(self) -> WorkerState:
        """``ready``, ``starting`` (after a restart), ``failed`` (it could not start
        again; the next request tries) or ``closed``."""
        return "closed" if self._closed else self._worker_state

    @property
    def running(self) -> str | None:
        """The id of the generation being run now, if any."""
        current = self._current
        return None if current is None else current.id

    @property
    def worker_pid(self) -> int | None:
        """The generating process's id (``None`` while it is being started again)."""
        worker = self._worker
        return None if worker is None else worker.pid

    # -- request side -------------------------------------------------------------------

    async def prepare(
        self,
        messages: Sequence[Mapping[str, str]],
        constraint: Constraint | None = None,
        closed_choices: ClosedChoices | None = None,
    ) -> Prompt:
        """Render and tokenize ``messages`` (and the content-free conversation of
        ``closed_choices``), and bound and compile ``constraint``.

        Runs in the checking process; the event loop only waits.

        Raises:
            SlotflightError: ``invalid_messages``, ``invalid_grammar``, ``invalid_schema``
                (also when the check crashed the process or outlasted ``check_timeout``),
                ``context_length_exceeded``, ``engine_closed``.
        """
        if len(messages) >= self.n_ctx:  # each message is a token at least: none would fit
            raise SlotflightError(
                f"the request has {len(messages)} messages; each takes at least one token"
                f" and the context window holds {self.n_ctx}",
                code="context_length_exceeded",
                location="/messages",
            )
        request: dict[str, Any] = {
            "messages": [dict(m) for m in messages],
            "constraint": None if constraint is None else dataclasses.asdict(constraint),
        }
        if closed_choices is not None:
            request["content_free"] = [dict(m) for m in closed_choices.content_free]
        frame = await anyio.to_thread.run_sync(self._check, request, constraint)
        tokens = tuple(int(t) for t in frame["tokens"])
        free = tuple(int(t) for t in frame.get("content_free_tokens") or ())
        for found, where in ((tokens, "/messages"), (free, "/closed_choices/content_free")):
            if len(found) >= self.n_ctx:
                raise SlotflightError(
                    f"the prompt is {len(found)} tokens; the context window holds {self.n_ctx}",
                    code="context_length_exceeded",
                    location=where,
                )
        grammar = frame.get("grammar")
        return Prompt(
            tokens=tokens,
            stop=tuple(str(s) for s in frame["stop"]),
            grammar=grammar if isinstance(grammar, str) else None,
            closed_fields=() if closed_choices is None else closed_choices.fields,
            content_free_tokens=free,
            opening_tokens=tuple(int(t) for t in frame.get("opening_tokens") or ()),
        )

    def _check(self, request: dict[str, Any], constraint: Constraint | None) -> dict[str, Any]:
        stage = "messages"
        with self._check_lock:
            checker = self._running_checker()
            deadline = time.monotonic() + self._check_timeout
            try:
                checker.send(request)
                while (remaining := deadline - time.monotonic()) > 0:
                    frame = checker.receive(remaining)
                    if frame is None:
                        continue
                    event = frame.get("event")
                    if event == "stage":
                        stage = str(frame.get("stage"))
                    elif event == "refused":
                        raise SlotflightError(
                            str(frame.get("message")),
                            code=str(frame.get("code")),
                            location=str(frame.get("location") or ""),
                        )
                    elif event == "prepared":
                        return frame
            except ChildGone as exc:
                self._checker = None
                raise _check_failure(stage, constraint, f"crashed llama.cpp ({exc})") from None
            checker.kill()
            self._checker = None
            raise _check_failure(
                stage, constraint, f"took longer than {self._check_timeout:g} s to check"
            )

    def _running_checker(self) -> ChildProcess:
        if self._closed:
            raise SlotflightError("the model has been unloaded", code="engine_closed")
        if self._checker is None or not self._checker.alive:
            checker = ChildProcess("check", self._check_config)
            try:
                checker.wait_ready(self._start_timeout)
            except SlotflightError as exc:
                raise SlotflightError(exc.message, code="engine_unavailable") from None
            self._checker = checker
        return self._checker

    def submit(self, prompt: Prompt, sampling: Sampling) -> Generation:
        """Queue a generation; read it on the running event loop.

        Raises:
            SlotflightError: ``server_busy`` when ``max_pending`` requests already wait,
                ``engine_closed`` after :meth:`close`.
        """
        if self._closed:
            raise SlotflightError("the model has been unloaded", code="engine_closed")
        generation = Generation(f"chatcmpl-{uuid.uuid4().hex}", asyncio.get_running_loop())
        queued, dropped = self._jobs.offer((generation, prompt, sampling), self._max_pending)
        for job in dropped:
            self._never_ran(job)
        if not queued:
            raise SlotflightError(
                f"{self._max_pending} requests are already waiting for the model",
                code="server_busy",
            )
        return generation

    def discard_cancelled(self) -> None:
        """End now the queued generations that were cancelled (their readers get a
        ``cancelled`` result), instead of when the model would have reached them."""
        for job in self._jobs.drop_cancelled():
            self._never_ran(job)

    def close(self) -> None:
        """Cancel the running generation, end the processes and the supervisor."""
        if self._closed:
            return
        self._closed = True
        current = self._current
        if current is not None:
            current.cancel()
        self._jobs.end()
        self._supervisor.join(self._cancel_grace + 10.0)
        for child in (self._worker, self._checker):
            if child is not None:
                child.close()

    # -- supervisor side ----------------------------------------------------------------

    def _next_job(self) -> _Job | None:
        """The next job; meanwhile, a process that died while idle is replaced."""
        while True:
            try:
                return self._jobs.take(_IDLE_CHECK_SECONDS)
            except queue.Empty:
                if self._worker is not None and not self._worker.alive:
                    self._kill_worker()
                    self._start_worker()

    def _supervise(self) -> None:
        while (job := self._next_job()) is not None:
            generation, prompt, sampling = job
            if self._closed:
                generation.cancel()
            self._current = generation
            result = self._run(generation, prompt, sampling)
            self._current = None
            self._finish(generation, result)
            if self._worker is None and not self._closed:
                self._start_worker()
        # End the readers of jobs that will never run.
        for job in self._jobs.take_all():
            job[0].cancel()
            self._never_ran(job)

    def _finish(self, generation: Generation, result: GenerationResult) -> None:
        """Record how ``generation`` ended and tell its reader."""
        if result.finish_reason == "cancelled" and generation.cancel_reason is not None:
            result = dataclasses.replace(
                result, error=_joined(generation.cancel_reason, result.error)
            )
        self.recent.append(result)
        generation.finish(result)

    def _never_ran(self, job: _Job) -> None:
        """A cancelled job that will not run: ``cancelled``, its prompt counted."""
        generation, prompt, _ = job
        self._finish(generation, GenerationResult(generation.id, "cancelled", _prompt_only(prompt)))

    def _start_worker(self) -> None:
        self._worker_state = "starting"
        self.restarts += 1
        worker = ChildProcess("generate", self._generate_config)
        try:
            worker.wait_ready(self._start_timeout)
        except SlotflightError:
            self._worker_state = "failed"
            return
        self._worker = worker
        self._worker_state = "ready"

    def _kill_worker(self) -> None:
        if self._worker is not None:
            self._worker.kill()
            self._worker = None

    def _run(self, generation: Generation, prompt: Prompt, sampling: Sampling) -> GenerationResult:
        if generation.cancelled:
            return GenerationResult(generation.id, "cancelled", _prompt_only(prompt))
        if self._worker is None:
            self._start_worker()
        worker = self._worker
        if worker is None:
            return self._failed(
                generation, prompt, 0, "the llama.cpp process could not start", "worker_crashed"
            )
        try:
            worker.send(_job_frame(generation.id, prompt, sampling))
            return self._follow(worker, generation, prompt)
        except ChildGone as exc:
            self._kill_worker()
            return self._failed(
                generation,
                prompt,
                0,
                f"the llama.cpp process died ({exc}); it is being restarted",
                "worker_crashed",
            )

    def _follow(
        self, worker: ChildProcess, generation: Generation, prompt: Prompt
    ) -> GenerationResult:
        """Relay one generation's frames until it ends, watching for a stuck process."""
        cancel_sent_at: float | None = None
        last_sign = time.monotonic()
        sampled = 0
        while True:
            now = time.monotonic()
            if generation.cancelled and cancel_sent_at is None:
                worker.send({"op": "cancel", "id": generation.id})
                cancel_sent_at = now
            if cancel_sent_at is not None and now - cancel_sent_at > self._cancel_grace:
                self._kill_worker()
                return GenerationResult(
                    generation.id,
                    "cancelled",
                    _usage(prompt, sampled),
                    error=f"the llama.cpp process did not stop within {self._cancel_grace:g} s "
                    "of its client leaving; it was restarted",
                )
            if now - last_sign > self._stall_timeout:
                self._kill_worker()
                return self._failed(
                    generation,
                    prompt,
                    sampled,
                    f"generation made no progress for {self._stall_timeout:g} s "
                    "(a sampling step that does not end?); the process was restarted",
                    "generation_stalled",
                )
            frame = worker.receive(_POLL_SECONDS)
            if frame is None:
                continue
            last_sign = time.monotonic()
            if frame.get("id") not in (None, generation.id):
                continue
            event = frame.get("event")
            if event == "piece":
                sampled = max(sampled, int(frame.get("sampled", sampled)))
                logprobs = frame.get("logprobs")
                generation.deliver(
                    str(frame["text"]), logprobs if isinstance(logprobs, list) else None
                )
                last_sign = time.monotonic()
            elif event == "done":
                return _result(generation.id, frame)

    def _failed(
        self, generation: Generation, prompt: Prompt, sampled: int, message: str, code: str
    ) -> GenerationResult:
        if generation.cancelled:
            return GenerationResult(generation.id, "cancelled", _usage(prompt, sampled), message)
        return GenerationResult(generation.id, "error", _usage(prompt, sampled), message, code)


def _job_frame(generation_id: str, prompt: Prompt, sampling: Sampling) -> dict[str, Any]:
    return {
        "op": "generate",
        "id": generation_id,
        "tokens": list(prompt.tokens),
        "grammar": prompt.grammar,
        "opening": list(prompt.opening_tokens),
        "stop": [*sampling.stop, *prompt.stop],
        "max_tokens": sampling.max_tokens,
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        "frequency_penalty": sampling.frequency_penalty,
        "presence_penalty": sampling.presence_penalty,
        "seed": sampling.seed,
        "cache_prompt": sampling.cache_prompt,
        "logprobs": sampling.logprobs,
        "closed_choices": {
            "fields": [[after, list(options), end] for after, options, end in prompt.closed_fields],
            "content_free": list(prompt.content_free_tokens),
        }
        if prompt.closed_fields
        else None,
    }


def _result(generation_id: str, frame: Mapping[str, Any]) -> GenerationResult:
    finish = frame.get("finish_reason")
    reason: FinishReason = finish if finish in ("stop", "length", "cancelled") else "error"
    error = frame.get("error")
    return GenerationResult(
        generation_id,
        reason,
        TokenUsage(
            int(frame["prompt_tokens"]),
            int(frame["completion_tokens"]),
            cached_tokens=int(frame["cached_tokens"]),
        ),
        error=str(error) if error else None,
        code="generation_failed" if reason == "error" else None,
        closed_choices=tuple(c for c in frame.get("closed_choices") or () if isinstance(c, dict)),
    )


def _joined(reason: str, error: str | None) -> str:
    return reason if error is None else f"{reason}; {error}"


def _usage(prompt: Prompt, sampled: int) -> TokenUsage:
    return TokenUsage(len(prompt.tokens), sampled, cached_tokens=0)


def _prompt_only(prompt: Prompt) -> TokenUsage:
    return _usage(prompt, 0)


def _check_failure(stage: str, constraint: Constraint | None, what: str) -> SlotflightError:
    """The error of a request whose check killed or outlasted the checking process."""
    if stage == "grammar" and constraint is not None:
        code = "invalid_schema" if constraint.kind == "schema" else "invalid_grammar"
        return SlotflightError(f"the grammar {what}", code=code, location=constraint.param)
    return SlotflightError(f"the messages {what}", code="invalid_messages", location="/messages")


def _usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


_SHARED: dict[tuple[Path, int, int | None, int | None], LocalEngine] = {}
_SHARED_LOCK = threading.Lock()


def shared_engine(
    model_path: str | os.PathLike[str] | None = None,
    *,
    n_ctx: int = DEFAULT_N_CTX,
    n_threads: int | None = None,
    seed: int | None = None,
) -> LocalEngine:
    """The process-wide :class:`LocalEngine` for this model and these settings.

    Servers started in one process share it, so the model is loaded once and
    generations from all of them queue on the same process.
    """
    key = (default_model_path(model_path), n_ctx, n_threads, seed)
    with _SHARED_LOCK:
        engine = _SHARED.get(key)
        if engine is None or engine._closed:
            engine = LocalEngine(key[0], n_ctx=n_ctx, n_threads=n_threads, seed=seed)
            _SHARED[key] = engine
        return engine
