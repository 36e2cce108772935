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

It also closes a connection whose response ended before the request's body did (the
app answered without reading it, or gave up waiting for it): uvicorn would otherwise
keep reading and discarding that body for as long as the client sends it. And a
request h11 cannot parse (headers over h11's size bound included) is answered ``400``
with a JSON body instead of uvicorn's plain text.

Bounding the body itself is the app's part: read it under a deadline (the gateway
answers ``408 body_timeout``), after which the connection is closed as above.
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

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._await_headers()

    def connection_lost(self, exc: Exception | None) -> None:
        self._headers_arrived()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:
            self._headers_arrived()

    def on_response_complete(self) -> None:
        if self.conn.their_state is h11.SEND_BODY:
            # The response ended before the request's body: nobody reads the rest.
            self.server_state.total_requests += 1
            self.transport.close()
            return
        self._await_headers()
        super().on_response_complete()  # may start a pipelined request at once
        if self.conn.their_state is not h11.IDLE:
            self._headers_arrived()

    def _await_headers(self) -> None:
        self._headers_arrived()
        self._header_timer = self.loop.call_later(self.header_timeout_s, self._headers_too_slow)

    def _headers_arrived(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_too_slow(self) -> None:
        self._header_timer = None
        if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
            return
        if self.conn.trailing_data[0]:  # part of a request came: say why it ends
            message = f"the request headers did not arrive within {self.header_timeout_s:g} s"
            self.transport.write(_json_response(408, "Request Timeout", "header_timeout", message))
        self.transport.close()

    def send_400_response(self, msg: str) -> None:
        self._headers_arrived()
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
