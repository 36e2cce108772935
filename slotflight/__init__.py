"""slotflight: stream structured output from LLMs as validated slots.

The public surface is what this module exports; every other module is private.
"""

from __future__ import annotations

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
from ._version import __version__
from .assemble.assembler import Assembler, Limits, Outcome
from .assemble.checks import (
    CHECK_CODES,
    Check,
    CheckFailure,
    CheckSettings,
    ChecksOption,
    CheckState,
    OnCheckFailure,
)
from .assemble.events import (
    Diagnostic,
    Done,
    ErrorEvent,
    Event,
    PassFailed,
    Retry,
    SlotComplete,
    SlotDelta,
    SlotFailed,
    SlotRejected,
    SlotStart,
)
from .assemble.retry import RetryRequest, RetryTarget
from .client.async_stream import AsyncSlotStream, acomplete, astream
from .client.sync_stream import SlotStream, complete, stream
from .client.usage import TokenUsage, Usage
from .plan.compiler import compile
from .plan.limits import CompileLimits
from .plan.model import MISSING, ArrayNode, ObjectNode, Slot, SlotPlan
from .prompting.prompt import prompt, retry_prompt
from .syntax import DEFAULT_SYNTAX, SYNTAXES, Syntax, grammar, render_frames

__all__ = [
    "CHECK_CODES",
    "DEFAULT_SYNTAX",
    "MISSING",
    "SYNTAXES",
    "ArrayNode",
    "Assembler",
    "AsyncSlotStream",
    "Check",
    "CheckFailure",
    "CheckSettings",
    "CheckState",
    "ChecksOption",
    "CompileLimits",
    "Diagnostic",
    "Done",
    "ErrorDetail",
    "ErrorEvent",
    "Event",
    "LimitExceeded",
    "Limits",
    "ObjectNode",
    "OnCheckFailure",
    "Outcome",
    "OutputValidationError",
    "PassFailed",
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
    "SlotRejected",
    "SlotStart",
    "SlotStream",
    "SlotflightError",
    "StreamClosed",
    "Syntax",
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
