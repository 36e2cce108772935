"""The gateway's slot streams: the SDK's async stream, with costly steps on a worker.

Feeding a model chunk to the assembler costs O(chunk), except when the chunk closes a
value: the value is then validated and its slot checks run, O(value), and the near-copy
search of ``repeat`` and ``list_repeat`` compares it with up to 256 earlier texts per
word. A model may write values of up to ``max_frame_chars`` (1 MiB), and the client
writes the prompt: closing one such value on the event loop held it for most of a
second (16 list items of 100,000 distinct words each: 0.8 s for one item), stalling
every other stream and ``/health``.

So :class:`GatewayStream` feeds a chunk on a worker thread (:class:`~._work.Workers`)

- once the value it belongs to has reached :data:`OFFLOAD_CHARS` characters (counted
  from where the last value closed), until a chunk closes it;
- for the rest of the stream, once one step used more than :data:`COSTLY_STEP_S` of
  CPU (``time.thread_time``, wherever it ran): a smaller value may cost as much when
  many earlier texts share its words.

Every other chunk is fed on the event loop, as the SDK does. A hop to a thread and back
costs 15-45 µs of CPU, most chunks cost a few µs to feed, and the close of a value of
9,000 characters of the load benchmark about 2 ms: feeding on a worker every chunk of
a value past 4,096 characters made the gateway need 10-22 % more CPU per upstream chunk
there (``benchmarks/sse_load.py --parts gateway-cost``). The stream awaits each step
before it reads the next chunk, so its events keep their order and its state is touched
by one thread at a time. When the pool is full, the chunk is fed on the event loop, as
before.

The end of a pass (the whole-object validation, the follow-up request) stays on the
event loop: it is O(object) once per pass.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal

import openai

from ..assemble.checks import ChecksOption, OnCheckFailure
from ..assemble.events import Event, SlotComplete, SlotFailed, SlotRejected
from ..client.async_stream import AsyncSlotStream
from ..client.core import StreamCore
from ..client.flow import END, Read
from ..client.request import GrammarBackend, StreamOptions
from ..plan.model import SlotPlan
from ..syntax.base import Syntax
from ._work import Workers, WorkRefused

__all__ = ["COSTLY_STEP_S", "OFFLOAD_CHARS", "GatewayStream", "gateway_stream"]

#: Characters of an open value from which its chunks are fed on a worker thread.
OFFLOAD_CHARS: Final = 16_384
#: CPU seconds of one step past which all of a stream's chunks are fed on a worker.
COSTLY_STEP_S: Final = 0.005

#: Events that close a value (and ran its checks).
_CLOSING: Final = (SlotComplete, SlotFailed, SlotRejected)


class _Fed:
    """A chunk already fed on a worker: the events it gave."""

    __slots__ = ("events",)

    def __init__(self, events: list[Event]) -> None:
        self.events = events


class _GatewayCore(StreamCore):
    """The stream core, counting the characters fed since a value last closed and
    noting a costly step."""

    open_chars = 0
    costly = False

    def on_chunk(self, chunk: Any) -> list[Event]:
        if isinstance(chunk, _Fed):
            return chunk.events
        started = time.thread_time()
        events = super().on_chunk(chunk)
        if time.thread_time() - started > COSTLY_STEP_S:
            self.costly = True
        if any(isinstance(event, _CLOSING) for event in events):
            # What follows the close in this chunk may open the next value.
            self.open_chars = text_chars(chunk)
        return events


class GatewayStream(AsyncSlotStream[Any]):
    """:class:`~slotflight.client.async_stream.AsyncSlotStream` feeding the chunks of
    a large open value on ``steps`` (see the module docs)."""

    def __init__(self, client: openai.AsyncOpenAI, core: _GatewayCore, steps: Workers) -> None:
        super().__init__(client, core)
        self._gateway_core = core
        self._steps = steps

    async def _read(self, command: Read) -> Any:
        chunk = await super()._read(command)
        core = self._gateway_core
        if chunk is END or isinstance(chunk, BaseException):
            core.open_chars = 0  # the pass is over
            return chunk
        core.open_chars += text_chars(chunk)
        if not core.costly and core.open_chars < OFFLOAD_CHARS:
            return chunk  # fed on the event loop by the flow
        try:
            return _Fed(await self._steps.run(functools.partial(core.on_chunk, chunk)))
        except WorkRefused:  # the pool is full (the chunk was not fed): feed it here
            return chunk


def text_chars(chunk: Any) -> int:
    """The length of a chunk's text (choice 0's ``delta.content``), read as the stream
    core reads it; 0 when it has none."""
    choices = getattr(chunk, "choices", None)
    if not isinstance(choices, list | tuple):
        return 0
    for choice in choices:
        if getattr(choice, "index", 0) == 0:
            text = getattr(getattr(choice, "delta", None), "content", None)
            return len(text) if isinstance(text, str) else 0
    return 0


def gateway_stream(
    client: openai.AsyncOpenAI,
    steps: Workers,
    *,
    model: str,
    messages: Sequence[Mapping[str, Any]],
    plan: SlotPlan,
    syntax: str | Syntax,
    max_attempts: int,
    grammar: GrammarBackend | Literal[False],
    checks: ChecksOption,
    on_check_failure: OnCheckFailure,
    confidence: bool,
    timeout: float | None,
    idle_timeout: float | None,
    params: Mapping[str, Any],
) -> GatewayStream:
    """What :func:`slotflight.astream` makes of these options, as a
    :class:`GatewayStream` whose costly steps run on ``steps``."""
    options = StreamOptions(
        syntax=syntax,
        max_attempts=max_attempts,
        grammar=grammar,
        checks=checks,
        on_check_failure=on_check_failure,
        confidence=confidence,
        timeout=timeout,
        idle_timeout=idle_timeout,
    )
    core = _GatewayCore(
        plan,
        options,
        model=model,
        messages=messages,
        params=params,
        client_timeout=client.timeout,
    )
    return GatewayStream(client, core, steps)
