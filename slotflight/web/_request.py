"""The body of ``POST /v1/slot-streams``: read within a size and a time bound, parsed,
checked.

Every problem becomes a :class:`BadRequest` with the HTTP status and a JSON body that
says what is wrong and where: 400 (not JSON), 408 (the body did not arrive in time),
413 (body or schema too large), 422 (missing or invalid fields, a schema that does not
compile). :func:`parse_slot_stream_request` is CPU work whose cost the client chooses:
the gateway runs it on a worker thread (see :mod:`slotflight.client.workers`).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from starlette.requests import ClientDisconnect, Request

from .._errors import SlotflightError
from .._jsonable import depth_over, loads_strict
from .._serving.body import BodyTooLarge, read_body
from ..plan.compiler import compile
from ..plan.model import SlotPlan
from ..syntax import DEFAULT_SYNTAX, SYNTAXES
from ._encode import DEFAULT_COALESCE_MS

__all__ = [
    "BadRequest",
    "RequestLimits",
    "SlotStreamRequest",
    "compile_failure",
    "parse_slot_stream_request",
    "read_request_body",
]

#: Codes of compile failures that say the schema asks for too much (answered 413).
_TOO_LARGE_CODES: Final = frozenset({"schema_too_large", "limit_exceeded"})


@dataclass(frozen=True)
class RequestLimits:
    """Bounds on what one request may ask for, and on the work it may cause.

    ``max_body_bytes``: the request body (checked while reading). ``body_timeout_s``:
    seconds the body may take to arrive, from the end of the headers. ``max_slots``:
    slots of the compiled schema. ``max_schema_depth``: nesting of the schema document
    (objects and arrays inside each other). Compiling the schema and building the
    prompt and grammar run on at most ``max_compiles`` worker threads, with at most
    ``max_queued_compiles`` more requests waiting, and must end within
    ``compile_timeout_s`` seconds of the request's arrival at the pool.
    """

    max_body_bytes: int = 256 * 1024
    max_slots: int = 200
    max_schema_depth: int = 32
    body_timeout_s: float = 30.0
    compile_timeout_s: float = 10.0
    max_compiles: int = 4
    max_queued_compiles: int = 64


class BadRequest(Exception):
    """A client mistake: the status and the ``error`` body to answer with."""

    def __init__(self, status: int, code: str, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.body: dict[str, Any] = {"error": {"code": code, "message": message, **extra}}


class _Message(BaseModel):
    model_config = ConfigDict(extra="forbid")

    role: Literal["system", "user", "assistant"]
    content: str = Field(max_length=200_000)


#: A built-in slot check, by code (:data:`slotflight.assemble.checks.CHECK_CODES`).
CheckCode = Literal["placeholder", "quoted", "digit_run", "schema_copy", "list_repeat", "repeat"]


class StreamRequestOptions(BaseModel):
    """``options`` of a request (all optional)."""

    model_config = ConfigDict(extra="forbid")

    state_mode: Literal["full", "patch"] = "patch"
    coalesce_ms: int = Field(default=DEFAULT_COALESCE_MS, ge=0, le=10_000)
    max_attempts: int = Field(default=3, ge=1, le=5)
    temperature: float | None = Field(default=None, ge=0, le=2)
    max_tokens: int | None = Field(default=None, ge=1, le=1_000_000)
    grammar: Literal["llama.cpp", "vllm", False] = False
    syntax: str = Field(default=DEFAULT_SYNTAX, max_length=64)
    #: The slot checks: every built-in one, none, or a list of check codes.
    checks: Literal["all", "none"] | list[CheckCode] = "all"
    on_check_failure: Literal["error", "accept"] = "accept"
    #: Ask the model server for token logprobs: each ``slot-complete`` then carries the
    #: value's ``confidence`` (when the server returns them).
    confidence: bool = False

    @field_validator("syntax")
    @classmethod
    def _known_syntax(cls, value: str) -> str:
        if value not in SYNTAXES:
            raise ValueError(f"unknown frame syntax (known: {', '.join(sorted(SYNTAXES))})")
        return value


class SlotStreamRequest(BaseModel):
    """What a client asks for: a model, its messages, a JSON Schema and options."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    model: str = Field(min_length=1, max_length=256)
    messages: list[_Message] = Field(min_length=1, max_length=256)
    json_schema: dict[str, Any] = Field(alias="schema")
    options: StreamRequestOptions = Field(default_factory=StreamRequestOptions)


@dataclass(frozen=True)
class ParsedRequest:
    request: SlotStreamRequest
    plan: SlotPlan

    @property
    def messages(self) -> list[dict[str, Any]]:
        return [m.model_dump() for m in self.request.messages]

    @property
    def params(self) -> dict[str, Any]:
        """Pass-through keywords of the chat-completion request."""
        options = self.request.options
        params: dict[str, Any] = {}
        if options.temperature is not None:
            params["temperature"] = options.temperature
        if options.max_tokens is not None:
            params["max_tokens"] = options.max_tokens
        return params


async def read_request_body(request: Request, limits: RequestLimits) -> bytes:
    """The body, refused with 413 as soon as it grows past ``limits.max_body_bytes`` and
    with 408 when it has not arrived within ``limits.body_timeout_s``."""
    try:
        async with asyncio.timeout(limits.body_timeout_s):
            return await read_body(request, limits.max_body_bytes)
    except BodyTooLarge as exc:
        raise BadRequest(413, "body_too_large", str(exc)) from None
    except TimeoutError:
        raise BadRequest(
            408,
            "body_timeout",
            f"the request body did not arrive within {limits.body_timeout_s:g} s",
        ) from None
    except ClientDisconnect:
        raise BadRequest(400, "client_disconnected", "the client left during the body") from None


def compile_failure(exc: SlotflightError) -> BadRequest:
    """The answer to a schema the core refuses: 413 when it asks for too much, else 422."""
    status = 413 if exc.code in _TOO_LARGE_CODES else 422
    return BadRequest(status, exc.code, exc.message, location=exc.location)


def parse_slot_stream_request(raw: bytes, limits: RequestLimits) -> ParsedRequest:
    """Parse and check a request body; compile its schema. Raises :class:`BadRequest`."""
    try:
        data = loads_strict(raw)
        json.dumps(data, ensure_ascii=False).encode()  # lone surrogates cannot be sent on
    except RecursionError:
        raise BadRequest(400, "invalid_json", "the body is nested too deeply") from None
    except UnicodeEncodeError:
        raise BadRequest(
            400, "invalid_json", "the body holds text that is not Unicode (a lone surrogate)"
        ) from None
    except ValueError as exc:
        raise BadRequest(400, "invalid_json", f"the body is not valid JSON: {exc}") from None
    if not isinstance(data, Mapping):
        raise BadRequest(422, "invalid_request", "the body must be a JSON object")
    schema = data.get("schema")
    if depth_over(schema, limits.max_schema_depth):
        raise BadRequest(
            413,
            "schema_too_large",
            f"the schema is nested deeper than {limits.max_schema_depth} levels",
        )
    try:
        request = SlotStreamRequest.model_validate(data)
    except ValidationError as exc:
        details = [
            {
                "location": "/" + "/".join(str(part) for part in error["loc"]),
                "message": error["msg"],
            }
            for error in exc.errors(include_url=False)
        ]
        first = details[0]
        raise BadRequest(
            422,
            "invalid_request",
            f"{first['location']}: {first['message']}",
            details=details,
        ) from None
    try:
        plan = compile(request.json_schema)
    except SlotflightError as exc:
        raise compile_failure(exc) from None
    except RecursionError:
        raise BadRequest(413, "schema_too_large", "the schema is nested too deeply") from None
    if len(plan.slots) > limits.max_slots:
        raise BadRequest(
            413,
            "schema_too_large",
            f"the schema has {len(plan.slots)} slots; at most {limits.max_slots} are allowed",
        )
    return ParsedRequest(request, plan)
