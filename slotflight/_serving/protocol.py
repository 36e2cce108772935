"""uvicorn's HTTP/1.1 protocol (h11) with a deadline on each request's headers.

uvicorn bounds the idle time between requests on a kept-alive connection
(``timeout_keep_alive``) but not the time a client may take to send a request's
headers: a client that opens a connection and sends one header byte every few seconds
(slowloris) holds it for as long as it likes, and the keep-alive timer is cancelled by
every byte. :func:`header_timeout_protocol` makes a protocol class that gives each
request ``header_timeout_s`` seconds, from the moment the connection waits for it (it
opened, or the previous response ended), until its header block is complete. When
the deadline passes, a connection that had received part of a request is answered
``408`` with a JSON body and closed; an idle one is closed.

The same deadline covers the rest of a request's body when the response ended before
it (the app answered without reading it, or gave up waiting for it): uvicorn reads and
discards that rest so that the connection can serve the next request, and would
otherwise do so for as long as the client sends it; the connection is closed when the
deadline passes before the next request's headers are complete. And a request h11
cannot parse (a header block that outgrows h11's buffer included) is answered ``400``
with a JSON body instead of uvicorn's plain text.

Bounding the body itself is the app's part: read it under a deadline (the gateway
answers ``408 body_timeout``), after which the rest is bounded as above.
"""

from __future__ import annotations

import asyncio
import json
from typing import ClassVar

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["HeaderTimeoutProtocol", "header_timeout_protocol"]

#: The deadline of a request's headers unless another is given, in seconds.
DEFAULT_HEADER_TIMEOUT_S = 10.0


def _json_response(status: int, reason: str, code: str, message: str) -> bytes:
    """A whole ``Connection: close`` response with an ``{"error": …}`` JSON body."""
    body = json.dumps({"error": {"code": code, "message": message}}, separators=(",", ":")).encode()
    head = (
        f"HTTP/1.1 {status} {reason}\r\n"
        "content-type: application/json\r\n"
        f"content-length: {len(body)}\r\n"
        "connection: close\r\n\r\n"
    )
    return head.encode("ascii") + body


class HeaderTimeoutProtocol(H11Protocol):
    """:class:`H11Protocol` with a deadline on each request's headers (see the module
    docs). Use :func:`header_timeout_protocol` to set the deadline."""

    header_timeout_s: ClassVar[float] = DEFAULT_HEADER_TIMEOUT_S
    _header_timer: asyncio.TimerHandle | None = None
    _waited_after: object = None  # the request whose end armed the timer (None: none yet)

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._await_request()

    def connection_lost(self, exc: Exception | None) -> None:
        self._request_arrived()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.cycle is not self._waited_after:  # uvicorn started the next request
            self._request_arrived()

    def on_response_complete(self) -> None:
        self._await_request()
        super().on_response_complete()  # may start a pipelined request at once
        if self.cycle is not self._waited_after:
            self._request_arrived()

    def _await_request(self) -> None:
        """Arm the deadline: the next request's headers must be complete within it."""
        self._request_arrived()
        self._waited_after = self.cycle
        self._header_timer = self.loop.call_later(self.header_timeout_s, self._too_slow)

    def _request_arrived(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _too_slow(self) -> None:
        self._header_timer = None
        if self.transport.is_closing() or self.cycle is not self._waited_after:
            return
        if self.conn.their_state is h11.IDLE and self.conn.trailing_data[0]:
            # Part of the next request's headers came: say why the connection ends.
            message = f"the request headers did not arrive within {self.header_timeout_s:g} s"
            self.transport.write(_json_response(408, "Request Timeout", "header_timeout", message))
        self.transport.close()

    def send_400_response(self, msg: str) -> None:
        self._request_arrived()
        self.transport.write(_json_response(400, "Bad Request", "invalid_http", msg))
        self.transport.close()


def header_timeout_protocol(
    header_timeout_s: float = DEFAULT_HEADER_TIMEOUT_S,
) -> type[HeaderTimeoutProtocol]:
    """A protocol class for ``uvicorn.run(..., http=...)`` (or ``uvicorn.Config``) that
    gives each request ``header_timeout_s`` seconds to send its headers."""
    if header_timeout_s <= 0:
        raise ValueError(f"header_timeout_s must be > 0, got {header_timeout_s!r}")
    return type(
        "HeaderTimeoutProtocol",
        (HeaderTimeoutProtocol,),
        {"header_timeout_s": float(header_timeout_s)},
    )
