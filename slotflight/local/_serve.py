"""Running the local server: in the foreground (the CLI) or on a background thread."""

from __future__ import annotations

import asyncio
import os
import socket
import threading
import time
from types import TracebackType
from typing import Self

import uvicorn

from .._errors import SlotflightError
from ._app import MAX_BODY_BYTES, create_app
from ._engine import DEFAULT_MAX_PENDING, DEFAULT_N_CTX, LocalEngine, shared_engine

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
    seed: int | None = None,
    max_pending: int = DEFAULT_MAX_PENDING,
    max_body_bytes: int = MAX_BODY_BYTES,
    log_level: str = "info",
) -> None:
    """Load the model and serve the OpenAI-compatible API until interrupted (Ctrl-C).

    Raises:
        SlotflightError: ``model_not_found`` or ``model_load_failed`` before serving.
    """
    engine = LocalEngine(
        model_path, n_ctx=n_ctx, n_threads=n_threads, seed=seed, max_pending=max_pending
    )
    try:
        app = create_app(engine, max_body_bytes=max_body_bytes)
        uvicorn.run(app, host=host, port=port, log_level=log_level, lifespan="off")
    finally:
        engine.close()


class _Uvicorn(uvicorn.Server):
    """uvicorn's server, telling when it listens."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.ready = threading.Event()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        self.ready.set()


class LocalServer:
    """A local server answering on a background thread; see :func:`start_local_server`.

    :attr:`base_url` ends in ``/v1``, ready for ``OpenAI(base_url=...)``. Close it (or use
    it as a context manager) to stop serving; the engine stays loaded for reuse.
    """

    def __init__(
        self,
        engine: LocalEngine,
        server: _Uvicorn,
        thread: threading.Thread,
        host: str,
        port: int,
    ) -> None:
        self.engine = engine
        self.host = host
        self.port = port
        self._server = server
        self._thread = thread

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    @property
    def model(self) -> str:
        return self.engine.model_id

    def close(self, timeout: float = 10.0) -> None:
        """Stop accepting requests and wait (up to ``timeout`` s) for the thread to end."""
        self._server.should_exit = True
        self._thread.join(timeout)

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
    start_timeout: float = 30.0,
) -> LocalServer:
    """Serve a model on a background thread; ``port=0`` picks a free port.

    Without ``engine``, the process-wide engine for ``model_path`` (see
    :func:`~slotflight.local.shared_engine`) is used, so repeated calls load the
    model once.

    Raises:
        SlotflightError: ``model_not_found``, ``model_load_failed``, or
            ``server_start_failed`` when the address is taken or uvicorn does not come
            up within ``start_timeout`` seconds.
    """
    if engine is None:
        engine = shared_engine(model_path, n_ctx=n_ctx, seed=seed)
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((host, port))
    except OSError as exc:
        listener.close()
        raise SlotflightError(
            f"cannot listen on {host}:{port}: {exc}", code="server_start_failed"
        ) from None
    bound_port = int(listener.getsockname()[1])
    config = uvicorn.Config(
        create_app(engine, max_body_bytes=max_body_bytes),
        log_level="warning",
        lifespan="off",
        access_log=False,
    )
    server = _Uvicorn(config)
    thread = threading.Thread(
        target=lambda: asyncio.run(server.serve(sockets=[listener])),
        name=f"slotflight-local-server-{bound_port}",
        daemon=True,
    )
    thread.start()
    deadline = time.monotonic() + start_timeout
    while not server.ready.wait(0.05):
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            listener.close()
            raise SlotflightError(
                f"the local server did not start on {host}:{bound_port}",
                code="server_start_failed",
            )
    return LocalServer(engine, server, thread, host, bound_port)
