"""``ScriptedServer``: the scripted app served by uvicorn on a background thread."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Callable, Iterable
from types import TracebackType
from typing import Self

import uvicorn

from ._app import ScriptedApp, silence_aborts
from ._recording import RecordedRequest, Recorder
from ._reply import Reply
from ._script import Script

__all__ = ["ScriptedServer"]

_HOST = "127.0.0.1"


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


class ScriptedServer:
    """An OpenAI-compatible server on ``127.0.0.1`` that answers from a script.

    Each ``POST /v1/chat/completions`` consumes one :class:`Reply` from the queue (the
    first whose ``match`` accepts the request); plain strings stand for ``Reply(text)``.
    With the queue exhausted it answers 500 naming the request. Every request is
    recorded in :attr:`requests`.

    Use it as a context manager (sync or async) or call :meth:`start` and :meth:`stop`.
    """

    def __init__(
        self,
        replies: Iterable[Reply | str] = (),
        *,
        model: str = "scripted-model",
        max_request_bytes: int = 8 * 1024 * 1024,
        max_recorded: int = 10_000,
        start_timeout: float = 10.0,
        stop_timeout: float = 10.0,
    ) -> None:
        if max_request_bytes < 1:
            raise ValueError(f"max_request_bytes must be >= 1, got {max_request_bytes}")
        self._script = Script(replies)
        self._recorder = Recorder(max_recorded)
        self._app = ScriptedApp(
            script=self._script,
            recorder=self._recorder,
            models=[model],
            max_request_bytes=max_request_bytes,
        )
        self._start_timeout = start_timeout
        self._stop_timeout = stop_timeout
        self._lock = threading.Lock()
        self._uvicorn: _Uvicorn | None = None
        self._thread: threading.Thread | None = None
        self._failure: BaseException | None = None
        self._port: int | None = None

    # -- lifecycle ---------------------------------------------------------------

    def start(self) -> Self:
        """Bind a free port, serve on a background thread, return once it listens."""
        with self._lock:
            if self._thread is not None:
                raise RuntimeError("the scripted server is already running")
            if self._app.stopping:
                raise RuntimeError("a stopped scripted server cannot be started again")
            silence_aborts()
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                sock.bind((_HOST, 0))
                sock.listen(128)
            except OSError:
                sock.close()
                raise
            self._port = sock.getsockname()[1]
            config = uvicorn.Config(
                self._app.starlette,
                host=_HOST,
                port=self._port,
                http="h11",
                ws="none",
                loop="asyncio",
                lifespan="off",
                log_config=None,
                access_log=False,
                timeout_graceful_shutdown=max(int(self._stop_timeout / 2), 1),
            )
            ready = threading.Event()
            server = _Uvicorn(config, ready)
            thread = threading.Thread(
                target=self._serve,
                args=(server, sock, ready),
                name=f"slotflight-scripted-server-{self._port}",
                daemon=True,
            )
            self._uvicorn = server
            self._thread = thread
            thread.start()
        if not ready.wait(self._start_timeout) or not server.started:
            self.stop()
            failure = self._failure
            raise RuntimeError(
                f"the scripted server did not start within {self._start_timeout:g}s"
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
        """Stop serving: end open streams (their connections close), join the thread."""
        with self._lock:
            server, thread = self._uvicorn, self._thread
            self._uvicorn = None
            self._thread = None
            if server is None or thread is None:
                return
            self._app.stopping = True
        loop = server.loop
        if loop is not None and not loop.is_closed():
            # RuntimeError: the loop closed in between, leaving nothing to stop.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self._app.stop_responses)
        server.should_exit = True
        thread.join(self._stop_timeout)
        if thread.is_alive():
            server.force_exit = True
            thread.join(self._stop_timeout)
        if thread.is_alive():
            raise RuntimeError(f"the scripted server did not stop within {self._stop_timeout:g}s")

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
            raise RuntimeError("the scripted server has not been started")
        return self._port

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``, the server root."""
        return f"http://{_HOST}:{self.port}"

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``, the ``base_url`` for OpenAI clients."""
        return f"{self.url}/v1"

    # -- script ------------------------------------------------------------------

    def add(self, *replies: Reply | str) -> None:
        """Queue more replies (also while serving)."""
        self._script.add(replies)

    @property
    def remaining(self) -> int:
        """How many replies are still queued."""
        return self._script.remaining

    @property
    def pending(self) -> list[Reply]:
        """The replies still queued, in order."""
        return self._script.pending()

    # -- recording ---------------------------------------------------------------

    @property
    def requests(self) -> list[RecordedRequest]:
        """Snapshot of every request received, oldest first."""
        return self._recorder.snapshot()

    def request(self, index: int) -> RecordedRequest:
        """Snapshot of request number ``index`` (0 for the first request received)."""
        item = self._recorder.get(index)
        if item is None or item.index != index:
            raise IndexError(f"no recorded request #{index}")
        return item

    def wait_for(
        self, predicate: Callable[[list[RecordedRequest]], bool], timeout: float = 5.0
    ) -> list[RecordedRequest]:
        """Block until ``predicate(requests)`` holds; return that snapshot.

        The predicate is re-checked each time the recording changes. Raises
        :class:`TimeoutError` after ``timeout`` seconds.
        """
        return self._recorder.wait_for(predicate, timeout)

    def wait_for_request(
        self,
        index: int,
        condition: Callable[[RecordedRequest], bool] = lambda request: request.finished,
        timeout: float = 5.0,
    ) -> RecordedRequest:
        """Block until request ``index`` exists and satisfies ``condition``.

        By default waits until the server is done with it (``finished``).
        """

        def satisfied(requests: list[RecordedRequest]) -> bool:
            return any(item.index == index and condition(item) for item in requests)

        requests = self._recorder.wait_for(satisfied, timeout)
        return next(item for item in requests if item.index == index)

    def wait_for_disconnect(self, index: int, timeout: float = 5.0) -> RecordedRequest:
        """Block until the server has seen the client of request ``index`` disconnect."""
        return self.wait_for_request(index, lambda request: request.disconnected, timeout)
