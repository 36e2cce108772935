"""Messages between the server and its llama.cpp processes: length-prefixed JSON frames.

Each frame is a 4-byte big-endian length and that many bytes of UTF-8 JSON (an
object). JSON rather than pickle: reading a frame never runs code, whatever the
other process wrote. A frame over ``limit`` bytes is refused before it is read.
"""

from __future__ import annotations

import json
from typing import IO, Any

__all__ = ["MAX_FRAME_BYTES", "WireError", "read_frame", "write_frame"]

MAX_FRAME_BYTES = 64 * 1024 * 1024
_HEADER = 4


class WireError(Exception):
    """A frame that cannot be read: too large, cut short, or not a JSON object."""


def write_frame(stream: IO[bytes], message: dict[str, Any]) -> None:
    """Write one frame and flush it."""
    data = json.dumps(message, separators=(",", ":")).encode("utf-8")
    stream.write(len(data).to_bytes(_HEADER, "big") + data)
    stream.flush()


def read_frame(stream: IO[bytes], limit: int = MAX_FRAME_BYTES) -> dict[str, Any] | None:
    """The next frame, or ``None`` at the end of the stream (the writer is gone).

    Raises:
        WireError: the frame is larger than ``limit``, cut short, or not an object.
    """
    header = _read_exactly(stream, _HEADER)
    if not header:
        return None
    size = int.from_bytes(header, "big")
    if size > limit:
        raise WireError(f"a frame of {size} bytes is over the limit of {limit}")
    data = _read_exactly(stream, size)
    if len(data) < size:
        raise WireError("the stream ended inside a frame")
    try:
        message = json.loads(data)
    except ValueError as exc:
        raise WireError(f"a frame is not JSON: {exc}") from None
    if not isinstance(message, dict):
        raise WireError("a frame is not a JSON object")
    return message


def _read_exactly(stream: IO[bytes], size: int) -> bytes:
    """``size`` bytes, or fewer only when the stream ends (a partial header is an error)."""
    parts: list[bytes] = []
    remaining = size
    while remaining:
        part = stream.read(remaining)
        if not part:
            break
        parts.append(part)
        remaining -= len(part)
    data = b"".join(parts)
    if 0 < len(data) < _HEADER and size == _HEADER:
        raise WireError("the stream ended inside a frame header")
    return data
