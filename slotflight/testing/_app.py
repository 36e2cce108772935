"""The Starlette application that answers requests from the script and records them.

Everything here runs on the server's event loop thread. Streams are written by
:class:`ReplyResponse`, which watches the ASGI ``receive`` channel for
``http.disconnect`` while it sends, so a client that goes away is noticed even while the
reply is waiting (``delay``, ``chunk_delay``, a stall).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from .._serving import payloads as _payloads
from .._serving.body import BodyTooLarge, read_body
from .._serving.responses import error_response, until_disconnect
from ._recording import Recorder
from ._reply import Reply, cut_utf8
from ._script import NoReply, Script

__all__ = ["ConnectionAbort", "ScriptedApp", "silence_aborts"]

CHAT_PATH = "/v1/chat/completions"
MODELS_PATH = "/v1/models"
_ALL_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
STOPPING = "the scripted server is stopping"


class ConnectionAbort(Exception):
    """Raised inside a response to make uvicorn close the connection mid-response."""


class _AbortLogFilter(logging.Filter):
    """Drops uvicorn's report of a :class:`ConnectionAbort`, which is intended."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc_info = record.exc_info
        return not (exc_info and isinstance(exc_info[1], ConnectionAbort))


_ABORT_FILTER = _AbortLogFilter()


def silence_aborts() -> None:
    """Keep intended connection aborts out of the ``uvicorn.error`` log (idempotent)."""
    logger = logging.getLogger("uvicorn.error")
    if _ABORT_FILTER not in logger.filters:
        logger.addFilter(_ABORT_FILTER)


class ScriptedApp:
    """Routes, script and recording of one :class:`~slotflight.testing.ScriptedServer`."""

    def __init__(
        self,
        *,
        script: Script,
        recorder: Recorder,
        models: list[str],
        max_request_bytes: int,
    ) -> None:
        self.script = script
        self.recorder = recorder
        self.models = models
        self.max_request_bytes = max_request_bytes
        self.stopping = False
        self._stopped = asyncio.Event()
        self._active: set[ReplyResponse] = set()
        self.starlette = Starlette(
            routes=[
                Route(CHAT_PATH, self._chat_completions, methods=["POST"]),
                Route(MODELS_PATH, self._list_models, methods=["GET"]),
                Route("/{path:path}", self._other, methods=_ALL_METHODS),
            ]
        )

    def stop_responses(self) -> None:
        """Make every response in progress end now (call on the event loop thread)."""
        self.stopping = True
        self._stopped.set()
        for response in list(self._active):
            response.interrupt()

    def register(self, response: ReplyResponse) -> None:
        self._active.add(response)

    def unregister(self, response: ReplyResponse) -> None:
        self._active.discard(response)

    async def _read_body(self, request: Request) -> bytes | None:
        """The body (:class:`BodyTooLarge` past the limit); ``None`` when the server
        stops before all of it has arrived."""
        if self.stopping:
            return None
        reading = asyncio.ensure_future(read_body(request, self.max_request_bytes, keep_head=True))
        stopped = asyncio.ensure_future(self._stopped.wait())
        try:
            await asyncio.wait((reading, stopped), return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopped.cancel()
            if not reading.done():
                reading.cancel()
                await asyncio.wait((reading,))  # let it finish cancelling
        if reading.cancelled():
            return None
        return reading.result()

    async def _record(self, request: Request) -> _Received:
        """Read and record the request."""
        fits = True
        stopping = False
        try:
            received = await self._read_body(request)
        except BodyTooLarge as exc:
            fits = False
            received = exc.head
        if received is None:
            stopping = True
            received = b""
        raw = received
        body: Any = None
        if fits and raw:
            try:
                body = json.loads(raw)
            except (ValueError, RecursionError):  # not JSON, or nested past the parser
                body = None
        headers: dict[str, str] = {}
        for name, value in request.headers.items():
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
        index = self.recorder.open(
            method=request.method,
            path=request.url.path,
            headers=headers,
            raw_body=raw,
            body=body,
        )
        return _Received(index, body, fits, stopping)

    def _error(self, index: int, status: int, message: str) -> Response:
        response = error_response(status, message)
        self.recorder.update(
            index,
            status=status,
            error=message,
            bytes_sent=len(response.body),
            completed=True,
            finished=True,
        )
        return response

    async def _chat_completions(self, request: Request) -> Response:
        received = await self._record(request)
        index, body = received.index, received.body
        if received.stopping:
            return self._error(index, 503, STOPPING)
        if not received.fits:
            return self._error(
                index, 413, f"request body larger than {self.max_request_bytes} bytes"
            )
        if not isinstance(body, dict):
            return self._error(index, 400, "the request body must be a JSON object")
        stream = body.get("stream") is True
        self.recorder.update(index, stream=stream)
        label = f"request #{index} (POST {CHAT_PATH})"
        try:
            reply = self.script.take(body, label)
        except NoReply as exc:
            return self._error(index, 500, f"slotflight.testing.ScriptedServer: {exc}")
        self.recorder.update(index, reply=reply)
        return ReplyResponse(app=self, index=index, reply=reply, body=body, stream=stream)

    async def _list_models(self, request: Request) -> Response:
        received = await self._record(request)
        index = received.index
        if received.stopping:
            return self._error(index, 503, STOPPING)
        response = JSONResponse(
            _payloads.model_list([_payloads.model_card(m) for m in self.models])
        )
        self.recorder.update(
            index, status=200, bytes_sent=len(response.body), completed=True, finished=True
        )
        return response

    async def _other(self, request: Request) -> Response:
        received = await self._record(request)
        index = received.index
        if received.stopping:
            return self._error(index, 503, STOPPING)
        path = request.url.path
        if path in (CHAT_PATH, MODELS_PATH):
            return self._error(index, 405, f"method {request.method} not allowed on {path}")
        return self._error(index, 404, f"no route {request.method} {path} on the scripted server")


@dataclass(frozen=True)
class _Received:
    """A request as read and recorded: its index, its JSON body (``None`` if none),
    whether the body fit ``max_request_bytes``, and whether the server began stopping
    before the whole body had arrived."""

    index: int
    body: Any
    fits: bool
    stopping: bool


class ReplyResponse(Response):
    """Sends one scripted reply, streamed or whole, with its delays and faults."""

    def __init__(
        self, *, app: ScriptedApp, index: int, reply: Reply, body: Mapping[str, Any], stream: bool
    ) -> None:
        self._app = app
        self._index = index
        self._reply = reply
        self._body = body
        self._stream = stream
        self._wake = asyncio.Event()
        self._client_gone = False
        self._complete = False
        self._bytes_sent = 0
        self._content_sent = ""
        model = body.get("model")
        self._model = model if isinstance(model, str) and model else app.models[0]
        self._completion_id = f"chatcmpl-scripted-{index}"
        self._created = int(time.time())
        options = body.get("stream_options")
        self._include_usage = isinstance(options, Mapping) and options.get("include_usage") is True

    def _sends_logprobs(self) -> bool:
        """The reply has tokens and the request asked for ``logprobs``."""
        return self._reply.logprobs is not None and self._body.get("logprobs") is True

    def interrupt(self) -> None:
        self._wake.set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self._app.register(self)
        watcher = asyncio.create_task(self._watch(receive))
        try:
            await self._respond(send)
        finally:
            watcher.cancel()
            self._app.unregister(self)

    async def _watch(self, receive: Receive) -> None:
        await until_disconnect(receive)
        if not self._complete:
            self._client_gone = True
            self._wake.set()

    def _update(self, **changes: Any) -> None:
        self._app.recorder.update(self._index, **changes)

    async def _pause(self, seconds: float | None) -> bool:
        """Wait ``seconds`` (``None``: indefinitely); False if interrupted meanwhile."""
        if self._interrupted():
            return False
        if seconds is not None and seconds <= 0:
            return True
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), seconds)
        return not self._interrupted()

    def _interrupted(self) -> bool:
        return self._client_gone or self._app.stopping

    def _end_interrupted(self) -> None:
        """Record why the response stopped early; abort the connection on server stop."""
        if self._client_gone:
            self._update(disconnected=True, finished=True)
            return
        self._update(finished=True)
        raise ConnectionAbort(STOPPING)

    async def _respond(self, send: Send) -> None:
        reply = self._reply
        if not await self._pause(reply.delay):
            if not self._client_gone:
                await self._send_error_body(send, 503, STOPPING)
                return
            self._end_interrupted()
            return
        if reply.status is not None:
            await self._send_error(send, reply.status, reply)
        elif self._stream:
            await self._send_stream(send, reply)
        else:
            await self._send_whole(send, reply)

    async def _send_error(self, send: Send, status: int, reply: Reply) -> None:
        message = reply.error_message or f"scripted error {status}"
        extra: list[tuple[bytes, bytes]] = []
        if reply.retry_after is not None:
            extra.append((b"retry-after", f"{reply.retry_after:g}".encode("ascii")))
        await self._send_error_body(send, status, message, extra)

    async def _send_error_body(
        self, send: Send, status: int, message: str, extra: Sequence[tuple[bytes, bytes]] = ()
    ) -> None:
        """Answer an OpenAI-style error and record it as the completed response."""
        payload = json.dumps(_payloads.error_body(status, message)).encode("utf-8")
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(payload)).encode("ascii")),
            *extra,
        ]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        self._update(status=status, error=message)
        self._complete = True
        await send({"type": "http.response.body", "body": payload, "more_body": False})
        self._update(bytes_sent=len(payload), completed=True, finished=True)

    async def _send_body(self, send: Send, data: bytes, content: str = "") -> None:
        await send({"type": "http.response.body", "body": data, "more_body": True})
        self._bytes_sent += len(data)
        self._content_sent += content
        self._update(bytes_sent=self._bytes_sent, content_sent=self._content_sent)

    async def _send_event(self, send: Send, payload: dict[str, Any], content: str = "") -> None:
        await self._send_body(send, _payloads.sse_event(payload), content)

    def _chunk(
        self,
        delta: dict[str, Any],
        finish_reason: str | None = None,
        logprobs: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        return _payloads.chunk(
            completion_id=self._completion_id,
            created=self._created,
            model=self._model,
            delta=delta,
            finish_reason=finish_reason,
            with_usage_field=self._include_usage,
            logprobs=logprobs,
        )

    async def _send_stream(self, send: Send, reply: Reply) -> None:
        headers = [
            (b"content-type", b"text/event-stream; charset=utf-8"),
            (b"cache-control", b"no-cache"),
        ]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        self._update(status=200)
        await self._send_event(send, self._chunk({"role": "assistant", "content": ""}))
        for position, thought in enumerate(reply.reasoning_chunks()):
            if self._interrupted() or (position and not await self._pause(reply.chunk_delay)):
                self._end_interrupted()
                return
            await self._send_event(send, self._chunk({"reasoning_content": thought}))
        budget = reply.cut_after_bytes
        used = 0
        pieces = reply.content_chunks()
        logprobs = reply.chunk_logprobs(pieces) if self._sends_logprobs() else None
        for position, piece in enumerate(pieces):
            if self._interrupted() or (position and not await self._pause(reply.chunk_delay)):
                self._end_interrupted()
                return
            allowed = piece if budget is None else cut_utf8(piece, budget - used)
            if allowed:
                tokens = None
                if logprobs is not None:
                    # a piece cut short carries the tokens that end within its sent part
                    sent = [*pieces[:position], allowed]
                    tokens = (
                        logprobs[position] if allowed == piece else reply.chunk_logprobs(sent)[-1]
                    )
                await self._send_event(
                    send, self._chunk({"content": allowed}, logprobs=tokens), allowed
                )
                used += len(allowed.encode("utf-8"))
            if allowed != piece:
                break
        if self._interrupted():
            self._end_interrupted()
            return
        if budget is not None:
            await self._fault(reply)
            return
        await self._send_event(send, self._chunk({}, reply.finish_reason))
        if self._include_usage:
            usage = reply.usage_for(self._body).to_json()
            await self._send_event(
                send,
                _payloads.usage_chunk(
                    completion_id=self._completion_id,
                    created=self._created,
                    model=self._model,
                    usage=usage,
                ),
            )
        self._complete = True
        # recorded before the last write: a client that has read [DONE] finds the
        # request completed (after it, a busy machine let the client look first)
        self._bytes_sent += len(_payloads.DONE_EVENT)
        self._update(bytes_sent=self._bytes_sent, completed=True, finished=True)
        await send({"type": "http.response.body", "body": _payloads.DONE_EVENT, "more_body": False})

    async def _send_whole(self, send: Send, reply: Reply) -> None:
        payload = json.dumps(
            _payloads.completion(
                completion_id=self._completion_id,
                created=self._created,
                model=self._model,
                content=reply.text,
                finish_reason=reply.finish_reason,
                usage=reply.usage_for(self._body).to_json(),
                logprobs=reply.chunk_logprobs([reply.text])[0] if self._sends_logprobs() else None,
                reasoning=reply.reasoning,
            )
        ).encode("utf-8")
        budget = reply.cut_after_bytes
        if budget is None:
            headers = [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(payload)).encode("ascii")),
            ]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            self._update(status=200)
            self._complete = True
            self._update(
                bytes_sent=len(payload), content_sent=reply.text, completed=True, finished=True
            )
            await send({"type": "http.response.body", "body": payload, "more_body": False})
            return
        headers = [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        self._update(status=200)
        if budget:
            await self._send_body(send, payload[:budget])
        await self._fault(reply)

    async def _fault(self, reply: Reply) -> None:
        """End a response cut by ``drop_after_bytes`` or ``stall_after_bytes``."""
        if reply.drop_after_bytes is not None:
            self._update(dropped=True, finished=True)
            raise ConnectionAbort(f"dropped after {reply.drop_after_bytes} bytes as scripted")
        self._update(stalled=True)
        await self._pause(None)
        self._end_interrupted()
