"""Reading a request body within a size bound."""

from __future__ import annotations

from starlette.requests import Request

__all__ = ["BodyTooLarge", "read_body"]


class BodyTooLarge(Exception):
    """The body is larger than ``limit`` bytes; ``head`` holds what was kept of it."""

    def __init__(self, limit: int, head: bytes = b"") -> None:
        super().__init__(f"the request body is larger than {limit} bytes")
        self.limit = limit
        self.head = head


async def read_body(request: Request, limit: int, *, keep_head: bool = False) -> bytes:
    """The whole body, refused with :class:`BodyTooLarge` once it grows past ``limit``.

    Memory stays within ``limit`` plus one received part. A ``Content-Length`` above
    ``limit`` is refused before anything is read, unless ``keep_head`` asks for the
    first ``limit`` bytes (in :attr:`BodyTooLarge.head`, for a server that records
    what it refused).
    """
    declared = request.headers.get("content-length", "")
    if not keep_head and declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge(limit)
    body = bytearray()
    async for part in request.stream():
        body += part
        if len(body) > limit:
            raise BodyTooLarge(limit, bytes(body[:limit]) if keep_head else b"")
    return bytes(body)
