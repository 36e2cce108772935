"""One llama.cpp process seen from the server: start it, talk to it, end it.

:class:`ChildProcess` runs ``python -m slotflight.local._worker ROLE`` (a fresh
interpreter: nothing of the server's state, threads or event loop is inherited, and the
caller's ``__main__`` is never re-run) and exchanges frames with it over its standard
input and output. A reader thread turns the child's frames into a bounded queue, so
:meth:`ChildProcess.receive` can wait with a timeout and learns at once, from the end
of the pipe, that the process died. The bounded queue and the pipe hold back a child
that writes faster than the server reads.
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import site
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from .._errors import SlotflightError
from ._wire import WireError, read_frame, write_frame

__all__ = ["ChildGone", "ChildProcess"]

_EVENT_BUFFER = 256
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])


class ChildGone(Exception):
    """The process ended (crashed, was killed, or closed its output)."""


class ChildProcess:
    """A running ``_worker`` process of ``role``, configured with ``config``.

    :meth:`wait_ready` returns the child's ``ready`` frame once it has loaded what it
    needs. Then :meth:`send` and :meth:`receive` exchange frames; both raise
    :class:`ChildGone` once the process is gone. :meth:`kill` ends it at once,
    :meth:`close` asks it to end (its input closes) and kills it if it does not.
    """

    def __init__(self, role: str, config: dict[str, Any]) -> None:
        self.role = role
        environment = dict(os.environ)
        if _PACKAGE_ROOT not in _site_directories():  # a checkout, not an installed wheel
            paths = [_PACKAGE_ROOT, environment.get("PYTHONPATH", "")]
            environment["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
        self._process = subprocess.Popen(
            [sys.executable, "-m", "slotflight.local._worker", role],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=environment,
        )
        assert self._process.stdin is not None and self._process.stdout is not None
        self._input = self._process.stdin
        self._send_lock = threading.Lock()
        self._events: queue.Queue[dict[str, Any] | None] = queue.Queue(_EVENT_BUFFER)
        self._gone = False
        self._reader = threading.Thread(
            target=self._read,
            args=(self._process.stdout,),
            name=f"slotflight-{role}-reader",
            daemon=True,
        )
        self._reader.start()
        self.send(config)

    @property
    def pid(self) -> int:
        return self._process.pid

    @property
    def alive(self) -> bool:
        return not self._gone and self._process.poll() is None

    def _read(self, output: Any) -> None:
        try:
            while (frame := read_frame(output)) is not None:
                self._events.put(frame)
        except (WireError, OSError, ValueError):
            pass
        finally:
            self._events.put(None)

    def wait_ready(self, timeout: float) -> dict[str, Any]:
        """The ``ready`` frame.

        Raises:
            SlotflightError: ``model_load_failed`` when the child reports a failure,
                dies, or says nothing within ``timeout`` seconds.
        """
        try:
            frame = self.receive(timeout)
        except ChildGone as exc:
            raise SlotflightError(
                f"the llama.cpp {self.role} process ended while starting: {exc}",
                code="model_load_failed",
            ) from None
        if frame is None or frame.get("event") != "ready":
            self.kill()
            reason = "did not start in time" if frame is None else frame.get("message")
            raise SlotflightError(
                f"the llama.cpp {self.role} process could not load the model: {reason}",
                code="model_load_failed",
            )
        return frame

    def send(self, message: dict[str, Any]) -> None:
        """Write one frame to the child.

        Raises:
            ChildGone: the child's input is closed (it died).
        """
        try:
            with self._send_lock:
                write_frame(self._input, message)
        except (OSError, ValueError):  # a broken pipe, or a closed file after kill()
            raise ChildGone(self.describe_exit()) from None

    def receive(self, timeout: float | None) -> dict[str, Any] | None:
        """The next frame from the child, or ``None`` after ``timeout`` seconds.

        Raises:
            ChildGone: the child is gone and every frame it wrote has been read.
        """
        if self._gone:
            raise ChildGone(self.describe_exit())
        try:
            frame = self._events.get(timeout=timeout)
        except queue.Empty:
            return None
        if frame is None:
            self._gone = True
            raise ChildGone(self.describe_exit())
        return frame

    def describe_exit(self) -> str:
        """How the process ended, in words (``killed by SIGSEGV``, ``exited with 1``)."""
        try:
            code = self._process.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            return "it stopped answering"
        if code < 0:
            try:
                return f"killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"killed by signal {-code}"
        return f"exited with status {code}"

    def kill(self) -> None:
        """End the process now and release its pipes and reader thread."""
        self._gone = True
        self._process.kill()
        self._process.wait()
        self._release()

    def close(self, timeout: float = 5.0) -> None:
        """Close the child's input (it ends when it notices) and wait; kill after ``timeout``."""
        self._gone = True
        with self._send_lock, contextlib.suppress(OSError):
            self._input.close()
        try:
            self._process.wait(timeout)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._release()

    def _release(self) -> None:
        # The reader may be blocked on a full queue: drain it until the reader ends.
        while self._reader.is_alive():
            try:
                while True:
                    self._events.get_nowait()
            except queue.Empty:
                pass
            self._reader.join(0.05)
        for stream in (self._process.stdin, self._process.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()


def _site_directories() -> set[str]:
    user = site.getusersitepackages() if site.ENABLE_USER_SITE else ""
    return {str(Path(p).resolve()) for p in [*site.getsitepackages(), user] if p}
