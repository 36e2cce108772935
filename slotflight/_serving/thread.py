"""``AppServer``: any ASGI app served by uvicorn on a background thread.

The scripted test server and the local model server run on it; so can any other app.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Callable
from types import TracebackType
from typing import Literal, Self

import uvicorn
from starlette.types import ASGIApp
from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["AppServer"]

HOST = "127.0.0.1"
"""The address served unless another is given."""


class _Uvicorn(uvicorn.Server):
    """uvicorn's server, reporting the moment it listens and exposing its loop."""

    def __init__(self, config: uvicorn.Config, ready: threading.Event) -> None:
        super().__init__(config)
        self.ready = ready
        self.loop: asyncio.AbstractEventLoop | None = None

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        self.loop = asyncio.get_running_loop()
        await super().startup(sockets=sockets)
        self.ready.set()


class AppServer:
    """Serves an ASGI app over real HTTP on a background thread.

    It listens on ``host`` (``127.0.0.1``) and ``port`` (``0``: a free port).
    ``start()`` binds the port itself, so it is known and accepting connections before
    uvicorn runs, and returns once uvicorn reports it is serving (``RuntimeError``
    after ``start_timeout`` seconds, or when the app's lifespan startup fails).
    ``stop()`` first runs ``on_stop`` (if given) on the server's event loop, then shuts
    uvicorn down and joins the thread (``RuntimeError`` if it has not ended after
    ``stop_timeout`` seconds, even forced). A second ``stop()`` does nothing; a stopped
    server cannot be started again.

    Use it as a context manager (sync or async; the async form starts and stops it on
    a worker thread) or call :meth:`start` and :meth:`stop`. ``name`` appears in error
    messages and the thread's name; ``log_level`` is uvicorn's (its default when
    ``None``). ``http``: uvicorn's HTTP/1.1 protocol class (its h11 one by default; see
    :func:`~slotflight._serving.protocol.header_timeout_protocol`).
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        lifespan: Literal["auto", "on", "off"] = "on",
        start_timeout: float = 10.0,
        stop_timeout: float = 10.0,
        on_stop: Callable[[], None] | None = None,
        name: str = "app server",
        host: str = HOST,
        port: int = 0,
        log_level: str | None = None,
        http: type[H11Protocol] | None = None,
    ) -> None:
        self._app = app
        self._http: type[H11Protocol] | Literal["h11"] = "h11" if http is None else http
        self._host = host
        self._requested_port = port
        self._log_level = log_level
        self._lifespan: Literal["auto", "on", "off"] = lifespan
        self._start_timeout = start_timeout
        self._stop_timeout = stop_timeout
        self._on_stop = on_stop
        self._name = name
        self._lock = threading.Lock()
        self._uvicorn: _Uvicorn | None = None
        self._thread: threading.Thread | None = None
        self._failure: BaseException | None = None
        self._port: int | None = None
        self._stopped = False

    # -- lifecycle ---------------------------------------------------------------

    def start(self) -> Self:
        """Bind the port, serve on a background thread, return once it listens.

        Raises:
            OSError: the address cannot be bound.
            RuntimeError: uvicorn did not come up within ``start_timeout``.
        """
        with self._lock:
            if self._thread is not None:
                raise RuntimeError(f"the {self._name} is already running")
            if self._stopped:
                raise RuntimeError(f"a stopped {self._name} cannot be started again")
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((self._host, self._requested_port))
                sock.listen(128)
            except OSError:
                sock.close()
                raise
            self._port = sock.getsockname()[1]
            config = uvicorn.Config(
                self._app,
                host=self._host,
                port=self._port,
                http=self._http,
                ws="none",
                loop="asyncio",
                lifespan=self._lifespan,
                log_config=None,
                log_level=self._log_level,
                access_log=False,
                timeout_graceful_shutdown=max(int(self._stop_timeout / 2), 1),
            )
            ready = threading.Event()
            server = _Uvicorn(config, ready)
            thread = threading.Thread(
                target=self._serve,
                args=(server, sock, ready),
                name=f"slotflight-{self._name.replace(' ', '-')}-{self._port}",
                daemon=True,
            )
            self._uvicorn = server
            self._thread = thread
            thread.start()
        if not ready.wait(self._start_timeout) or not server.started:
            self.stop()
            failure = self._failure
            raise RuntimeError(
                f"the {self._name} did not start within {self._start_timeout:g}s"
            ) from failure
        return self

    def _serve(self, server: _Uvicorn, sock: socket.socket, ready: threading.Event) -> None:
        try:
            asyncio.run(server.serve(sockets=[sock]))
        except BaseException as exc:  # reported by start(); the thread must not die silently
            self._failure = exc
        finally:
            sock.close()
            ready.set()

    def stop(self) -> None:
        """Stop serving (running ``on_stop`` on the event loop first), join the thread."""
        with self._lock:
            server, thread = self._uvicorn, self._thread
            self._uvicorn = None
            self._thread = None
            if server is None or thread is None:
                return
            self._stopped = True
        loop = server.loop
        if self._on_stop is not None and loop is not None and not loop.is_closed():
            # RuntimeError: the loop closed in between, leaving nothing to stop.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self._on_stop)
        server.should_exit = True
        thread.join(self._stop_timeout)
        if thread.is_alive():
            server.force_exit = True
            thread.join(self._stop_timeout)
        if thread.is_alive():
            raise RuntimeError(f"the {self._name} did not stop within {self._stop_timeout:g}s")

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    async def __aenter__(self) -> Self:
        return await asyncio.to_thread(self.start)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await asyncio.to_thread(self.stop)

    # -- addresses ---------------------------------------------------------------

    @property
    def running(self) -> bool:
        with self._lock:
            return self._thread is not None

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError(f"the {self._name} has not been started")
        return self._port

    @property
    def host(self) -> str:
        return self._host

    @property
    def url(self) -> str:
        """``http://HOST:PORT``, the server root."""
        return f"http://{self._host}:{self.port}"
