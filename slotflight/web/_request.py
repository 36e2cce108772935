"""The body of ``POST /v1/slot-streams``: read within a size bound, parsed, checked.

Every problem becomes a :class:`BadRequest` with the HTTP status and a JSON body that
says what is wrong and where: 400 (not JSON), 413 (body or schema too large), 422
(missing or invalid fields, a schema that does not compile).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from starlette.requests import Request

from .._errors import SchemaError
from ..plan.compiler import compile
from ..plan.model import SlotPlan
from ..syntax import DEFAULT_SYNTAX, SYNTAXES

__all__ = ["BadRequest", "RequestLimits", "SlotStreamRequest", "parse_slot_stream_request"]


@dataclass(frozen=True)
class RequestLimits:
    """Bounds on what one request may ask for.

    ``max_body_bytes``: the request body (checked while reading). ``max_slots``: slots
    of the compiled schema. ``max_schema_depth``: nesting of the schema document
    (objects and arrays inside each other).
    """

    max_body_bytes: int = 256 * 1024
    max_slots: int = 200
    max_schema_depth: int = 32


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


class StreamRequestOptions(BaseModel):
    """``options`` of a request (all optional)."""

    model_config = ConfigDict(extra="forbid")

    state_mode: Literal["full", "patch"] = "full"
    coalesce_ms: int = Field(default=0, ge=0, le=10_000)
    max_attempts: int = Field(default=3, ge=1, le=5)
    temperature: float | None = Field(default=None, ge=0, le=2)
    max_tokens: int | None = Field(default=None, ge=1, le=1_000_000)
    grammar: Literal["llama.cpp", "vllm", False] = False
    syntax: str = Field(default=DEFAULT_SYNTAX, max_length=64)

    @field_validator("syntax")
    @classmethod
    def _registered(cls, value: str) -> str:
        if value not in SYNTAXES:
            raise ValueError(f"unknown frame syntax; one of {', '.join(sorted(SYNTAXES))}")
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


async def read_body(request: Request, limit: int) -> bytes:
    """The body, refused with 413 as soon as it grows past ``limit`` bytes."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise _too_large(limit)
    parts: list[bytes] = []
    size = 0
    async for part in request.stream():
        size += len(part)
        if size > limit:
            raise _too_large(limit)
        parts.append(part)
    return b"".join(parts)


def _too_large(limit: int) -> BadRequest:
    return BadRequest(413, "body_too_large", f"the request body is larger than {limit} bytes")


def _depth(document: Any, limit: int) -> int:
    """Nesting depth of a JSON document, counting no further than ``limit + 1``."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(document, 1)]
    while stack:
        node, depth = stack.pop()
        if not isinstance(node, dict | list):
            continue
        deepest = max(deepest, depth)
        if depth > limit:
            return depth
        children = node.values() if isinstance(node, dict) else node
        stack.extend((child, depth + 1) for child in children)
    return deepest


def parse_slot_stream_request(raw: bytes, limits: RequestLimits) -> ParsedRequest:
    """Parse and check a request body; compile its schema. Raises :class:`BadRequest`."""
    try:
        data = json.loads(raw)
    except RecursionError:
        raise BadRequest(400, "invalid_json", "the body is nested too deeply") from None
    except ValueError as exc:
        raise BadRequest(400, "invalid_json", f"the body is not valid JSON: {exc}") from None
    if not isinstance(data, Mapping):
        raise BadRequest(422, "invalid_request", "the body must be a JSON object")
    schema = data.get("schema")
    if _depth(schema, limits.max_schema_depth) > limits.max_schema_depth:
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
    except SchemaError as exc:
        raise BadRequest(422, "invalid_schema", exc.message, location=exc.location) from None
    except RecursionError:
        raise BadRequest(413, "schema_too_large", "the schema is nested too deeply") from None
    if len(plan.slots) > limits.max_slots:
        raise BadRequest(
            413,
            "schema_too_large",
            f"the schema has {len(plan.slots)} slots; at most {limits.max_slots} are allowed",
        )
    return ParsedRequest(request, plan)
