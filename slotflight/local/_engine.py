"""One llama.cpp model in this process, and the single worker thread that generates with it.

A ``llama_cpp.Llama`` holds one context (one KV cache), so it runs one generation at a
time. :meth:`LocalEngine.submit` puts a request in a FIFO queue served by one worker
thread; requests wait their turn instead of failing (up to ``max_pending`` waiting, then
``server_busy``). The worker streams text pieces to the event loop through a bounded
:class:`asyncio.Queue` per generation, so a slow reader slows its own generation down and
never grows a buffer.

A reader that goes away calls :meth:`Generation.cancel`. The worker checks that flag at
every sampled token (a llama.cpp stopping criterion) and whenever it waits for room in
the queue, so the model is free for the next request within one token. A generation that
is cancelled while still queued is skipped.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import queue
import threading
import uuid
from collections import deque
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, cast

try:
    import llama_cpp
    import numpy as np
    import numpy.typing as npt
    from llama_cpp import llama_chat_format
    from llama_cpp.llama_grammar import LlamaGrammar
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "slotflight.local needs llama-cpp-python: pip install 'slotflight[local]'"
    ) from exc

import jinja2

from .._errors import SlotflightError
from ._grammar import compile_check, precheck_grammar
from ._model import default_model_path

__all__ = [
    "DEFAULT_N_CTX",
    "FinishReason",
    "Generation",
    "GenerationResult",
    "LocalEngine",
    "Prompt",
    "Sampling",
    "Usage",
    "shared_engine",
]

DEFAULT_N_CTX = 4096
DEFAULT_MAX_PENDING = 32
DEFAULT_STREAM_BUFFER = 64
_RECENT = 64
_POLL_SECONDS = 0.05

FinishReason = Literal["stop", "length", "cancelled", "error"]


@dataclass(frozen=True)
class Usage:
    """Token counts of one generation.

    ``completion_tokens`` counts every token the model sampled, including the
    end-of-turn token when it stopped on its own.
    """

    prompt_tokens: int
    completion_tokens: int

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def to_json(self) -> dict[str, int]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.total_tokens,
        }


@dataclass(frozen=True)
class Prompt:
    """A conversation rendered with the model's chat template and tokenized."""

    tokens: tuple[int, ...]
    stop: tuple[str, ...] = ()


@dataclass(frozen=True)
class Sampling:
    """How to sample. ``grammar`` is GBNF text already checked by :meth:`LocalEngine.check_grammar`."""

    max_tokens: int | None = None
    temperature: float = 0.8
    top_p: float = 0.95
    seed: int | None = None
    stop: tuple[str, ...] = ()
    grammar: str | None = None


@dataclass(frozen=True)
class GenerationResult:
    """How a generation ended. ``error`` is set when ``finish_reason`` is ``"error"``."""

    id: str
    finish_reason: FinishReason
    usage: Usage
    error: str | None = None


class Generation:
    """A queued or running generation, read on the event loop that submitted it.

    Iterate it (``async for piece in generation``) for the text as it is sampled; once
    iteration ends, :attr:`result` holds the finish reason and usage. A generation that
    failed inside llama.cpp raises :class:`~slotflight.SlotflightError` (code
    ``generation_failed``) from the iteration.
    """

    def __init__(self, generation_id: str, loop: asyncio.AbstractEventLoop, buffer: int) -> None:
        self.id = generation_id
        self.result: GenerationResult | None = None
        self._loop = loop
        # Unbounded by itself: text pieces are bounded by ``_room``; the one final result
        # always fits, so a reader is never left waiting for it.
        self._items: asyncio.Queue[str | GenerationResult] = asyncio.Queue()
        self._room = threading.BoundedSemaphore(buffer)
        self._cancelled = threading.Event()

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def cancel(self) -> None:
        """Stop generating (or never start); safe from any thread, idempotent."""
        self._cancelled.set()

    def __aiter__(self) -> Generation:
        return self

    async def __anext__(self) -> str:
        if self.result is not None:
            raise StopAsyncIteration
        item = await self._items.get()
        if isinstance(item, str):
            self._room.release()
            return item
        self.result = item
        if item.finish_reason == "error":
            raise SlotflightError(item.error or "generation failed", code="generation_failed")
        raise StopAsyncIteration

    def deliver(self, text: str) -> bool:
        """Worker side: hand a text piece to the reader, waiting while its buffer is full.

        Returns False (the piece is dropped) once the generation is cancelled.
        """
        while not self._room.acquire(timeout=_POLL_SECONDS):
            if self.cancelled:
                return False
        if self.cancelled:
            self._room.release()
            return False
        return self._post(text)

    def finish(self, result: GenerationResult) -> None:
        """Worker side: hand over how the generation ended; ends the reader's iteration."""
        self._post(result)

    def _post(self, item: str | GenerationResult) -> bool:
        try:
            self._loop.call_soon_threadsafe(self._items.put_nowait, item)
        except RuntimeError:  # the event loop is closed: nobody is reading
            self.cancel()
            return False
        return True


class _StopCheck:
    """The stopping criterion llama.cpp calls after sampling each token.

    ``input_ids`` holds the prompt and every token evaluated so far; the token just
    sampled is not in it yet, so its length tells how many tokens were sampled. llama.cpp
    calls it once more after the loop with the same ids, which changes nothing.
    """

    def __init__(self, prompt_tokens: int, cancelled: threading.Event) -> None:
        self.sampled = 0
        self._prompt_tokens = prompt_tokens
        self._cancelled = cancelled

    def __call__(self, input_ids: npt.NDArray[np.intc], logits: npt.NDArray[np.single]) -> bool:
        self.sampled = max(self.sampled, len(input_ids) - self._prompt_tokens + 1)
        return self._cancelled.is_set()


_Job = tuple[Generation, Prompt, Sampling]


class LocalEngine:
    """A GGUF chat model loaded with llama.cpp, generating one request at a time.

    Args:
        model_path: the GGUF file; see :func:`~slotflight.local.default_model_path`.
        n_ctx: context window in tokens; ``0`` takes the size the model was trained with.
        n_threads: CPU threads; defaults to every core this process may use.
        seed: the sampling seed of requests that give none (they then follow one
            deterministic sequence from it); ``None`` uses llama.cpp's default.
        max_pending: how many requests may wait for the model before ``server_busy``.
        stream_buffer: text pieces buffered per generation for a slow reader.

    Raises:
        SlotflightError: ``model_not_found``, or ``model_load_failed`` when llama.cpp
            cannot load the file.
    """

    def __init__(
        self,
        model_path: str | os.PathLike[str] | None = None,
        *,
        n_ctx: int = DEFAULT_N_CTX,
        n_threads: int | None = None,
        seed: int | None = None,
        max_pending: int = DEFAULT_MAX_PENDING,
        stream_buffer: int = DEFAULT_STREAM_BUFFER,
    ) -> None:
        self.model_path: Path = default_model_path(model_path)
        self.model_id: str = self.model_path.stem
        threads = n_threads or _usable_cores()
        try:
            self._llama = llama_cpp.Llama(
                model_path=str(self.model_path),
                n_ctx=n_ctx,
                n_threads=threads,
                n_threads_batch=threads,
                seed=llama_cpp.LLAMA_DEFAULT_SEED if seed is None else seed,
                verbose=False,
            )
        except (ValueError, RuntimeError, OSError) as exc:
            raise SlotflightError(
                f"llama.cpp could not load {str(self.model_path)!r}: {exc}",
                code="model_load_failed",
            ) from None
        self.n_ctx: int = self._llama.n_ctx()
        self._vocab = llama_cpp.llama_model_get_vocab(self._llama.model)
        self._formatter = _chat_formatter(self._llama)
        self.recent: deque[GenerationResult] = deque(maxlen=_RECENT)
        """The last finished generations, newest last (for monitoring and tests)."""
        self._max_pending = max_pending
        self._stream_buffer = stream_buffer
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._current: Generation | None = None
        self._closed = False
        self._worker = threading.Thread(
            target=self._work, name=f"slotflight-llama-{self.model_id}", daemon=True
        )
        self._worker.start()

    # -- request side -------------------------------------------------------------------

    def check_grammar(self, text: str, *, param: str = "/grammar") -> None:
        """Raise ``SlotflightError`` (code ``invalid_grammar``) unless llama.cpp accepts ``text``."""
        precheck_grammar(text, param=param)
        compile_check(self._vocab, text, param=param)

    def prepare(self, messages: Sequence[Mapping[str, str]]) -> Prompt:
        """Render ``messages`` with the model's chat template and tokenize them.

        Safe to call from any thread while a generation runs.

        Raises:
            SlotflightError: ``invalid_messages`` when the template refuses them,
                ``context_length_exceeded`` when the prompt does not fit the context.
        """
        try:
            formatted = self._formatter(messages=[dict(m) for m in messages])
        except (jinja2.TemplateError, ValueError, TypeError) as exc:
            raise SlotflightError(
                f"the model's chat template refused the messages: {exc}",
                code="invalid_messages",
                location="/messages",
            ) from None
        tokens = self._llama.tokenize(
            formatted.prompt.encode("utf-8"), add_bos=not formatted.added_special, special=True
        )
        if len(tokens) >= self.n_ctx:
            raise SlotflightError(
                f"the prompt is {len(tokens)} tokens; the context window holds {self.n_ctx}",
                code="context_length_exceeded",
                location="/messages",
            )
        stop = formatted.stop
        template_stop = (stop,) if isinstance(stop, str) else tuple(stop or ())
        return Prompt(tokens=tuple(tokens), stop=template_stop)

    def submit(self, prompt: Prompt, sampling: Sampling) -> Generation:
        """Queue a generation; read it on the running event loop.

        Raises:
            SlotflightError: ``server_busy`` when ``max_pending`` requests already wait,
                ``engine_closed`` after :meth:`close`.
        """
        if self._closed:
            raise SlotflightError("the model has been unloaded", code="engine_closed")
        if self._jobs.qsize() >= self._max_pending:
            raise SlotflightError(
                f"{self._max_pending} requests are already waiting for the model",
                code="server_busy",
            )
        generation = Generation(
            f"chatcmpl-{uuid.uuid4().hex}", asyncio.get_running_loop(), self._stream_buffer
        )
        self._jobs.put((generation, prompt, sampling))
        return generation

    def close(self) -> None:
        """Cancel the running generation, stop the worker and free the model."""
        if self._closed:
            return
        self._closed = True
        current = self._current
        if current is not None:
            current.cancel()
        self._jobs.put(None)
        self._worker.join()
        self._llama.close()

    # -- worker side --------------------------------------------------------------------

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                break
            generation, prompt, sampling = job
            if self._closed:
                generation.cancel()
            self._current = generation
            result = self._generate(generation, prompt, sampling)
            self._current = None
            self.recent.append(result)
            generation.finish(result)
        # End the readers of jobs that will never run.
        while True:
            try:
                job = self._jobs.get_nowait()
            except queue.Empty:
                return
            if job is not None:
                generation = job[0]
                generation.cancel()
                generation.finish(
                    GenerationResult(generation.id, "cancelled", Usage(len(job[1].tokens), 0))
                )

    def _generate(
        self, generation: Generation, prompt: Prompt, sampling: Sampling
    ) -> GenerationResult:
        check = _StopCheck(len(prompt.tokens), generation._cancelled)
        finish: FinishReason = "length"
        if generation.cancelled:
            return GenerationResult(generation.id, "cancelled", Usage(len(prompt.tokens), 0))
        try:
            chunks = self._completion_chunks(prompt, sampling, check)
            with contextlib.closing(chunks):
                for chunk in chunks:
                    choice = chunk["choices"][0]
                    text = choice["text"]
                    if text and not generation.deliver(text):
                        break
                    if choice["finish_reason"] in ("stop", "length"):
                        finish = choice["finish_reason"]
        # Whatever llama.cpp raises (a failed decode, a full KV cache) ends this
        # generation only; the worker goes on serving the queue.
        except Exception as exc:
            return GenerationResult(
                generation.id,
                "error",
                Usage(len(prompt.tokens), check.sampled),
                error=f"{type(exc).__name__}: {exc}",
            )
        if generation.cancelled:
            finish = "cancelled"
        return GenerationResult(generation.id, finish, Usage(len(prompt.tokens), check.sampled))

    def _completion_chunks(
        self, prompt: Prompt, sampling: Sampling, check: _StopCheck
    ) -> Generator[dict[str, Any], None, None]:
        grammar = (
            LlamaGrammar.from_string(sampling.grammar, verbose=False)
            if sampling.grammar is not None
            else None
        )
        chunks = self._llama.create_completion(
            prompt=list(prompt.tokens),
            max_tokens=sampling.max_tokens,
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            seed=sampling.seed,
            stop=[*sampling.stop, *prompt.stop],
            stream=True,
            stopping_criteria=llama_cpp.StoppingCriteriaList([check]),
            grammar=grammar,
        )
        return cast(Generator[dict[str, Any], None, None], chunks)


def _usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _chat_formatter(llama: Any) -> Any:
    """The GGUF's own chat template, or ChatML when the file carries none."""
    template = llama.metadata.get("tokenizer.chat_template")
    if not template:
        return llama_chat_format.format_chatml
    eos = llama.token_eos()
    bos = llama.token_bos()
    return llama_chat_format.Jinja2ChatFormatter(
        template=template,
        eos_token=llama.detokenize([eos], special=True).decode("utf-8", "replace")
        if eos >= 0
        else "",
        bos_token=llama.detokenize([bos], special=True).decode("utf-8", "replace")
        if bos >= 0
        else "",
        stop_token_ids=[eos],
    )


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
    generations from all of them queue on the same worker.
    """
    key = (default_model_path(model_path), n_ctx, n_threads, seed)
    with _SHARED_LOCK:
        engine = _SHARED.get(key)
        if engine is None or engine._closed:
            engine = LocalEngine(key[0], n_ctx=n_ctx, n_threads=n_threads, seed=seed)
            _SHARED[key] = engine
        return engine
