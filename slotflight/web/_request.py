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
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Final, Literal

import jsonpointer
from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationError,
    field_validator,
    model_validator,
)
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


#: An image the gateway passes on: inline data of a type model servers read, never a
#: URL (the model server would fetch it from its own network on a stranger's behalf).
#: One linear pass over the text; ``max_body_bytes`` bounds its size.
_IMAGE_DATA_URL: Final = re.compile(r"data:image/(?:png|jpeg|gif|webp);base64,[A-Za-z0-9+/]*={0,2}")

#: Parts of one message, at most.
MAX_PARTS: Final = 64

_Text = Annotated[str, Field(max_length=200_000)]


class _TextPart(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: Literal["text"]
    text: _Text


class _ImageUrl(BaseModel):
    model_config = ConfigDict(extra="forbid")

    url: str
    detail: Literal["auto", "low", "high"] | None = None

    @field_validator("url")
    @classmethod
    def _inline_image(cls, value: str) -> str:
        if _IMAGE_DATA_URL.fullmatch(value) is None or (len(value) - value.index(",") - 1) % 4:
            raise ValueError(
                "an image must be inline base64 data, data:image/png;base64,... (png, "
                "jpeg, gif or webp): the gateway passes on no URL for the model server "
                "to fetch"
            )
        return value


class _ImagePart(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: Literal["image_url"]
    image_url: _ImageUrl


def _branch(kinds: Mapping[Any, str]) -> Any:
    """The tag of a union's branch (``<name>``, which :func:`_location` leaves out of an
    error's place) by the kind of the value: its Python type, or its ``type`` field."""

    def tag(value: Any) -> str | None:
        if isinstance(value, Mapping):
            value = value.get("type")
        elif isinstance(value, BaseModel):
            value = getattr(value, "type", None)
        else:
            value = type(value)
        return kinds.get(value) if isinstance(value, str | type) else None

    return tag


_Part = Annotated[
    Annotated[_TextPart, Tag("<text>")] | Annotated[_ImagePart, Tag("<image_url>")],
    Discriminator(
        _branch({"text": "<text>", "image_url": "<image_url>"}),
        custom_error_type="invalid_part",
        custom_error_message='a part is {"type": "text", "text": ...} or '
        '{"type": "image_url", "image_url": {"url": ...}}',
    ),
]


class _Message(BaseModel):
    model_config = ConfigDict(extra="forbid")

    role: Literal["system", "user", "assistant"]
    #: Text, or parts as in OpenAI's chat completions: text, and images in user messages.
    content: Annotated[
        Annotated[_Text, Tag("<text>")]
        | Annotated[list[_Part], Field(min_length=1, max_length=MAX_PARTS), Tag("<parts>")],
        Discriminator(
            _branch({str: "<text>", list: "<parts>"}),
            custom_error_type="invalid_content",
            custom_error_message="content is text or a list of parts",
        ),
    ]

    @model_validator(mode="after")
    def _images_from_the_user(self) -> _Message:
        images = isinstance(self.content, list) and any(
            isinstance(part, _ImagePart) for part in self.content
        )
        if images and self.role != "user":
            raise ValueError("only a user message may hold an image")
        return self


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
    grammar: Literal["llama.cpp", "vllm", "vllm-guided", False] = False
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
        return [m.model_dump(exclude_none=True) for m in self.request.messages]

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


def _location(data: Any, loc: tuple[int | str, ...]) -> str:
    """The JSON Pointer into the body of an error's ``loc``, without the tags Pydantic
    puts in for the branch of a union (``<parts>``, ``<image_url>``: see :func:`_branch`)
    where the body has no such key. O(len(loc))."""
    parts: list[str] = []
    for key in loc:
        if isinstance(data, Mapping) and key in data:  # noqa: SIM114 (key narrowed below)
            data = data[key]
        elif isinstance(data, list) and isinstance(key, int) and 0 <= key < len(data):
            data = data[key]
        elif isinstance(key, str) and key.startswith("<") and key.endswith(">"):
            continue  # a union branch's tag, not a step into the body
        else:
            data = None  # a field the body lacks (the error's last step)
        parts.append(str(key))
    return jsonpointer.JsonPointer.from_parts(parts).path


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
            {"location": _location(data, error["loc"]), "message": error["msg"]}
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
