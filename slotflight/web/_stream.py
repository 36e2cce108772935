"""The gateway's slot streams: the SDK's async stream, fed on the gateway's workers.

The gateway gives its streams their own pool of worker threads for the feeds that cost
more than its event loop should pay (closing a large value, a stream whose checks are
costly: :mod:`slotflight.client.feed_placement`), bounded with its other limits.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import openai

from ..assemble.checks import ChecksOption, OnCheckFailure
from ..client.async_stream import AsyncSlotStream
from ..client.core import StreamCore
from ..client.request import GrammarBackend, StreamOptions
from ..client.workers import Workers
from ..plan.model import SlotPlan
from ..syntax.base import Syntax

__all__ = ["gateway_stream"]


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
) -> AsyncSlotStream[Any]:
    """What :func:`slotflight.astream` makes of these options, its costly feeds run on
    ``steps``."""
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
    core = StreamCore(
        plan,
        options,
        model=model,
        messages=messages,
        params=params,
        client_timeout=client.timeout,
    )
    return AsyncSlotStream(client, core, steps)
