"""``ScriptedServer``: the scripted app served by uvicorn on a background thread."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Self

from .._serving.thread import AppServer
from ._app import ScriptedApp, silence_aborts
from ._recording import RecordedRequest, Recorder
from ._reply import Reply
from ._script import Script

__all__ = ["ScriptedServer"]


class ScriptedServer(AppServer):
    """An OpenAI-compatible server on ``127.0.0.1`` that answers from a script.

    Each ``POST /v1/chat/completions`` consumes one :class:`Reply` from the queue (the
    first whose ``match`` accepts the request); plain strings stand for ``Reply(text)``.
    With the queue exhausted it answers 500 naming the request. Every request is
    recorded in :attr:`requests`.

    Use it as a context manager (sync or async) or call :meth:`start` and :meth:`stop`;
    stopping ends open streams at once (their connections close).
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
        scripted = ScriptedApp(
            script=self._script,
            recorder=self._recorder,
            models=[model],
            max_request_bytes=max_request_bytes,
        )
        super().__init__(
            scripted.starlette,
            lifespan="off",
            start_timeout=start_timeout,
            stop_timeout=stop_timeout,
            on_stop=scripted.stop_responses,
            name="scripted server",
        )

    def start(self) -> Self:
        """Bind a free port, serve on a background thread, return once it listens."""
        silence_aborts()
        return super().start()

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
