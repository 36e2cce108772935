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
from ._plan import MISSING, ArrayNode, ObjectNode, Slot, SlotPlan

__version__ = "0.1.0"

__all__ = [
    "MISSING",
    "ArrayNode",
    "ErrorDetail",
    "LimitExceeded",
    "ObjectNode",
    "OutputValidationError",
    "ProtocolError",
    "SchemaError",
    "Slot",
    "SlotPlan",
    "SlotflightError",
    "StreamClosed",
    "TransportError",
    "UpstreamDisconnected",
    "UpstreamStatusError",
    "UpstreamTimeout",
    "__version__",
]
