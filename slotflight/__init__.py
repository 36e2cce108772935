"""slotflight: stream structured output from LLMs as validated slots.

The public surface is what this module exports; every other module is private.
"""

from __future__ import annotations

from ._assembler import Assembler, Limits, Outcome
from ._compiler import compile
from ._errors import (
    ErrorDetail,
    LimitExceeded,
    OutputValidationError,
    ProtocolError,
    SchemaError,
    SlotflightError,
    StreamClosed,
    TransportError,
    UpstreamDisconnected,
    UpstreamStatusError,
    UpstreamTimeout,
)
from ._events import (
    Diagnostic,
    Done,
    ErrorEvent,
    Event,
    Retry,
    SlotComplete,
    SlotDelta,
    SlotFailed,
    SlotStart,
)
from ._grammar import grammar
from ._plan import MISSING, ArrayNode, ObjectNode, Slot, SlotPlan
from ._prompt import prompt, retry_prompt
from ._regen import RetryRequest, RetryTarget
from ._render import render_frames
from ._stream_async import AsyncSlotStream, acomplete, astream
from ._stream_sync import SlotStream, complete, stream
from ._usage import TokenUsage, Usage

__version__ = "0.1.0"

__all__ = [
    "MISSING",
    "ArrayNode",
    "Assembler",
    "AsyncSlotStream",
    "Diagnostic",
    "Done",
    "ErrorDetail",
    "ErrorEvent",
    "Event",
    "LimitExceeded",
    "Limits",
    "ObjectNode",
    "Outcome",
    "OutputValidationError",
    "ProtocolError",
    "Retry",
    "RetryRequest",
    "RetryTarget",
    "SchemaError",
    "Slot",
    "SlotComplete",
    "SlotDelta",
    "SlotFailed",
    "SlotPlan",
    "SlotStart",
    "SlotStream",
    "SlotflightError",
    "StreamClosed",
    "TokenUsage",
    "TransportError",
    "UpstreamDisconnected",
    "UpstreamStatusError",
    "UpstreamTimeout",
    "Usage",
    "__version__",
    "acomplete",
    "astream",
    "compile",
    "complete",
    "grammar",
    "prompt",
    "render_frames",
    "retry_prompt",
    "stream",
]
