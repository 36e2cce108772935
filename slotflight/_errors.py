"""Every exception slotflight raises, in one hierarchy.

Catch :class:`SlotflightError` to catch them all. Each error carries a machine-readable
``code`` and, where it applies, a ``location`` (a JSON Pointer into the schema or the
output object), in the manner of Pydantic's errors::

    SlotflightError
    ├── SchemaError            the schema cannot be compiled (location: schema pointer)
    ├── ProtocolError          the frame stream itself is unusable (bounds, encoding)
    │   └── LimitExceeded      a configured bound was crossed
    ├── OutputValidationError  slots still failing after every attempt (carries the
    │                          partial object and the per-slot errors)
    ├── TransportError         talking to the model server failed
    │   ├── UpstreamTimeout    total or idle timeout
    │   ├── UpstreamDisconnected  the stream dropped and no attempts are left
    │   └── UpstreamStatusError   the server answered with an HTTP error status
    └── StreamClosed           the stream was used after it was closed
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ErrorDetail",
    "LimitExceeded",
    "OutputValidationError",
    "ProtocolError",
    "SchemaError",
    "SlotflightError",
    "StreamClosed",
    "TransportError",
    "UpstreamDisconnected",
    "UpstreamStatusError",
    "UpstreamTimeout",
]


@dataclass(frozen=True)
class ErrorDetail:
    """One failure: a stable ``code``, a human ``message`` and where it happened.

    ``location`` is a JSON Pointer: into the output object for slot failures
    (``/items/1/due``), into the schema for compile failures (``/$defs/Item``).
    """

    code: str
    message: str
    location: str = ""
    slot: str = ""
    input: str | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.location:
            data["location"] = self.location
        if self.slot:
            data["slot"] = self.slot
        if self.input is not None:
            data["input"] = self.input
        return data


class SlotflightError(Exception):
    """Base class of every slotflight error."""

    code: str = "slotflight_error"

    def __init__(self, message: str, *, code: str | None = None, location: str = "") -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        self.location = location

    def __str__(self) -> str:
        where = f" (at {self.location})" if self.location else ""
        return f"[{self.code}] {self.message}{where}"

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.location:
            data["location"] = self.location
        return data


class SchemaError(SlotflightError):
    """The schema is invalid or uses something that cannot be compiled.

    ``location`` is a JSON Pointer into the schema naming the offending node.
    """

    code = "invalid_schema"


class ProtocolError(SlotflightError):
    """The frame stream cannot be used any further (for example, a bound was crossed)."""

    code = "protocol_error"


class LimitExceeded(ProtocolError):
    """A configured bound (frame size, total size, noise, array items) was crossed."""

    code = "limit_exceeded"


class OutputValidationError(SlotflightError):
    """Some slots still failed after the last attempt.

    ``partial`` is the object assembled from every accepted slot; ``errors`` lists one
    :class:`ErrorDetail` per failing or missing slot (and model-level errors).
    """

    code = "output_invalid"

    def __init__(
        self,
        message: str,
        *,
        partial: Mapping[str, Any],
        errors: Sequence[ErrorDetail],
        attempts: int = 1,
    ) -> None:
        super().__init__(message)
        self.partial = dict(partial)
        self.errors = list(errors)
        self.attempts = attempts

    def to_json(self) -> dict[str, Any]:
        data = super().to_json()
        data["errors"] = [e.to_json() for e in self.errors]
        data["attempts"] = self.attempts
        return data


class TransportError(SlotflightError):
    """Talking to the model server failed."""

    code = "transport_error"


class UpstreamTimeout(TransportError):
    """The total or idle timeout expired."""

    code = "timeout"


class UpstreamDisconnected(TransportError):
    """The stream from the server dropped and no attempts were left to recover."""

    code = "disconnected"


class UpstreamStatusError(TransportError):
    """The server answered with an HTTP error status."""

    code = "upstream_status"

    def __init__(self, message: str, *, status_code: int, body: str = "") -> None:
        super().__init__(message)
        self.status_code = status_code
        self.body = body


class StreamClosed(SlotflightError):
    """The stream was used after it was closed."""

    code = "stream_closed"
