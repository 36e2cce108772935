"""Running the local server: in the foreground (the CLI) or on a background thread."""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Callable
from types import TracebackType
from typing import Self

import uvicorn

from .._errors import SlotflightError
from .._serving.protocol import DEFAULT_HEADER_TIMEOUT_S, header_timeout_protocol
from .._serving.thread import AppServer
from ._app import BODY_TIMEOUT, MAX_BODY_BYTES, SEND_TIMEOUT, create_app
from ._engine import (
    DEFAULT_BRACKET_PENALTY,
    DEFAULT_CANCEL_GRACE,
    DEFAULT_CHECK_TIMEOUT,
    DEFAULT_LONE_SPACE_PENALTY,
    DEFAULT_MAX_PENDING,
    DEFAULT_N_CTX,
    DEFAULT_PROMPT_CACHE_BYTES,
    DEFAULT_REPEATED_ITEM_PENALTY,
    DEFAULT_STALL_TIMEOUT,
    LocalEngine,
    shared_engine,
)
from ._grammar import DEFAULT_GRAMMAR_LIMITS, GrammarLimits
from ._weights import AUTO

__all__ = ["DEFAULT_PORT", "LocalServer", "serve_local", "start_local_server"]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8080


def serve_local(
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    model_path: str | os.PathLike[str] | None = None,
    *,
    n_ctx: int = DEFAULT_N_CTX,
    n_threads: int | None = None,
    quantization: str | None = AUTO,
    flash_attn: bool = True,
    read_opening: bool = True,
    lone_space_penalty: float = DEFAULT_LONE_SPACE_PENALTY,
    bracket_penalty: float = DEFAULT_BRACKET_PENALTY,
    repeated_item_penalty: float = DEFAULT_REPEATED_ITEM_PENALTY,
    seed: int | None = None,
    max_pending: int = DEFAULT_MAX_PENDING,
    max_body_bytes: int = MAX_BODY_BYTES,
    body_timeout: float = BODY_TIMEOUT,
    send_timeout: float = SEND_TIMEOUT,
    header_timeout: float = DEFAULT_HEADER_TIMEOUT_S,
    log_level: str = "info",
    prompt_cache_bytes: int = DEFAULT_PROMPT_CACHE_BYTES,
    cancel_grace: float = DEFAULT_CANCEL_GRACE,
    stall_timeout: float = DEFAULT_STALL_TIMEOUT,
    check_timeout: float = DEFAULT_CHECK_TIMEOUT,
    grammar_limits: GrammarLimits = DEFAULT_GRAMMAR_LIMITS,
) -> None:
    """Load the model and serve the OpenAI-compatible API until interrupted (Ctrl-C).

    The keyword arguments are those of :class:`~slotflight.local.LocalEngine` and
    :func:`~slotflight.local.create_app`, and ``header_timeout``: seconds a connection
    may take to send a request's headers (408 and closed after; an idle one is closed).

    When it stops, the requests in progress end at once with 503
    ``server_shutting_down``.

    Raises:
        SlotflightError: ``model_not_found`` or ``model_load_failed`` before serving,
            ``server_start_failed`` when the address cannot be bound.
    """
    engine = LocalEngine(
        model_path,
        n_ctx=n_ctx,
        n_threads=n_threads,
        quantization=quantization,
        flash_attn=flash_attn,
        read_opening=read_opening,
        lone_space_penalty=lone_space_penalty,
        bracket_penalty=bracket_penalty,
        repeated_item_penalty=repeated_item_penalty,
        seed=seed,
        max_pending=max_pending,
        prompt_cache_bytes=prompt_cache_bytes,
        cancel_grace=cancel_grace,
        stall_timeout=stall_timeout,
        check_timeout=check_timeout,
        grammar_limits=grammar_limits,
    )
    try:
        app = create_app(
            engine,
            max_body_bytes=max_body_bytes,
            body_timeout=body_timeout,
            send_timeout=send_timeout,
        )
        config = uvicorn.Config(
            app,
            host=host,
            port=port,
            log_level=log_level,
            lifespan="off",
            http=header_timeout_protocol(header_timeout),
        )
        server = _StoppingServer(config, app.state.stop_generations)
        try:
            with contextlib.suppress(KeyboardInterrupt):  # raised again once it has stopped
                server.run()
        except SystemExit:  # how uvicorn ends a start that failed, once it logged why
            if server.started:
                raise
        if not server.started:
            raise SlotflightError(
                f"the local server did not start on {host}:{port} (the address is taken, "
                "or cannot be bound: see the log above)",
                code="server_start_failed",
            )
    finally:
        engine.close()


class _StoppingServer(uvicorn.Server):
    """uvicorn's server, ending the app's requests in progress when it shuts down
    (instead of waiting for every stream, and the queue behind it, to finish)."""

    def __init__(self, config: uvicorn.Config, stop_generations: Callable[[], None]) -> None:
        super().__init__(config)
        self._stop_generations = stop_generations

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self._stop_generations()
        await super().shutdown(sockets)


class LocalServer:
    """A local server answering on a background thread; see :func:`start_local_server`.

    :attr:`base_url` ends in ``/v1``, ready for ``OpenAI(base_url=...)``. Close it (or use
    it as a context manager) to stop serving; the engine stays loaded for reuse.
    """

    def __init__(self, engine: LocalEngine, server: AppServer) -> None:
        self.engine = engine
        self._server = server

    @property
    def host(self) -> str:
        return self._server.host

    @property
    def port(self) -> int:
        return self._server.port

    @property
    def url(self) -> str:
        return self._server.url

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    @property
    def model(self) -> str:
        return self.engine.model_id

    def close(self) -> None:
        """Stop accepting requests, end those in progress (503
        ``server_shutting_down``) and wait for the serving thread to end."""
        self._server.stop()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def start_local_server(
    model_path: str | os.PathLike[str] | None = None,
    *,
    host: str = DEFAULT_HOST,
    port: int = 0,
    engine: LocalEngine | None = None,
    n_ctx: int = DEFAULT_N_CTX,
    seed: int | None = None,
    max_body_bytes: int = MAX_BODY_BYTES,
    body_timeout: float = BODY_TIMEOUT,
    send_timeout: float = SEND_TIMEOUT,
    header_timeout: float = DEFAULT_HEADER_TIMEOUT_S,
    start_timeout: float = 30.0,
) -> LocalServer:
    """Serve a model on a background thread; ``port=0`` picks a free port.

    Without ``engine``, the process-wide engine for ``model_path`` (see
    :func:`~slotflight.local.shared_engine`) is used, so repeated calls load the
    model once. ``max_body_bytes``, ``body_timeout`` and ``send_timeout`` are
    :func:`~slotflight.local.create_app`'s; ``header_timeout`` is the seconds a
    connection may take to send a request's headers (408 and closed after; an idle one
    is closed).

    Raises:
        SlotflightError: ``model_not_found``, ``model_load_failed``, or
            ``server_start_failed`` when the address is taken or uvicorn does not come
            up within ``start_timeout`` seconds.
    """
    if engine is None:
        engine = shared_engine(model_path, n_ctx=n_ctx, seed=seed)
    app = create_app(
        engine,
        max_body_bytes=max_body_bytes,
        body_timeout=body_timeout,
        send_timeout=send_timeout,
    )
    server = AppServer(
        app,
        on_stop=app.state.stop_generations,
        http=header_timeout_protocol(header_timeout),
        lifespan="off",
        start_timeout=start_timeout,
        name="local server",
        host=host,
        port=port,
        log_level="warning",
    )
    try:
        server.start()
    except (OSError, RuntimeError) as exc:
        raise SlotflightError(
            f"the local server did not start on {host}:{port}: {exc}",
            code="server_start_failed",
        ) from None
    return LocalServer(engine, server)
