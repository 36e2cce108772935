"""Reading an OpenAI chat-completion request body into a checked :class:`ChatRequest`.

Every problem is a :class:`~slotflight.SlotflightError` whose ``location`` is a JSON
Pointer into the body (``/messages/0/content``); the app answers it with HTTP 400.
Only the shape is checked here, cheaply, on the event loop; the grammar or schema is
measured and compiled by the checking process (see ``_engine``).
Fields this server does not act on (``model``, ``user``...) are accepted and ignored;
fields whose meaning it cannot honour (``tools``, ``n`` > 1, ``top_logprobs``) are
refused rather than silently dropped, and so is text holding a lone surrogate.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from .._errors import SlotflightError
from .._jsonable import lone_surrogate_at
from ..syntax.closed_choices import (
    MAX_CLOSED_FIELDS,
    MAX_CLOSED_OPTION_CHARS,
    MAX_CLOSED_OPTIONS,
    MAX_CLOSED_TEXT,
)
from ._grammar import JSON_OBJECT_GRAMMAR

__all__ = [
    "DEFAULT_TEMPERATURE",
    "DEFAULT_TOP_P",
    "ChatRequest",
    "ClosedChoices",
    "Constraint",
    "parse_chat_request",
]

DEFAULT_TEMPERATURE = 0.8
DEFAULT_TOP_P = 0.95
MAX_STOP_SEQUENCES = 16
MAX_SEED = 2**32 - 1

_ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant"}
_REFUSED = ("tools", "functions", "tool_choice", "function_call")


@dataclass(frozen=True)
class Constraint:
    """What constrains sampling: GBNF text, or a JSON schema (as JSON text) to convert.

    ``param`` is the JSON Pointer of the request field it came from.
    """

    kind: Literal["grammar", "schema"]
    text: str
    param: str


@dataclass(frozen=True)
class ClosedChoices:
    """The ``closed_choices`` extension: fields whose value is one of a few options,
    each chosen calibrated against the answer to ``content_free`` (``docs/local.md``).

    ``fields``: ``(after, options, end)`` each: the text the field's line begins with,
    its options as written after it, and the text written after every option.
    """

    fields: tuple[tuple[str, tuple[str, ...], str], ...]
    content_free: tuple[dict[str, str], ...]


@dataclass(frozen=True)
class ChatRequest:
    """What one ``POST /v1/chat/completions`` asks for, checked and normalised.

    ``messages`` carry plain-text ``content`` (text parts are joined) and the roles
    ``system``/``user``/``assistant`` (``developer`` becomes ``system``).
    ``constraint`` comes from ``grammar``, a ``json_schema`` or a ``json_object``
    response format. ``cache_prompt`` (llama.cpp server's field, default true) lets the
    prompt reuse a cached prefix.
    """

    messages: tuple[dict[str, str], ...]
    stream: bool = False
    include_usage: bool = False
    max_tokens: int | None = None
    temperature: float = DEFAULT_TEMPERATURE
    top_p: float = DEFAULT_TOP_P
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    seed: int | None = None
    stop: tuple[str, ...] = ()
    constraint: Constraint | None = None
    cache_prompt: bool = True
    logprobs: bool = False
    closed_choices: ClosedChoices | None = None


def _bad(message: str, location: str, code: str = "invalid_value") -> SlotflightError:
    return SlotflightError(message, code=code, location=location)


def parse_chat_request(body: bytes) -> ChatRequest:
    """Parse and check a request body.

    Raises:
        SlotflightError: codes ``invalid_json``, ``missing_field``, ``invalid_value``,
            ``unsupported_parameter``, ``invalid_schema``.
    """
    try:
        data = json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise _bad(f"the request body is not valid JSON: {exc}", "", "invalid_json") from None
    if not isinstance(data, dict):
        raise _bad("the request body must be a JSON object", "", "invalid_json")
    where = lone_surrogate_at(data)
    if where is not None:  # text llama.cpp cannot take (it encodes every string as UTF-8)
        raise _bad("the text holds a lone surrogate (not valid Unicode)", where)
    for name in _REFUSED:
        if data.get(name):
            raise _bad(
                f"{name!r} is not supported by the local server",
                f"/{name}",
                "unsupported_parameter",
            )
    n = data.get("n")
    if n is not None and (isinstance(n, bool) or not isinstance(n, int)):
        raise _bad("'n' must be an integer", "/n")
    if n not in (None, 1):
        raise _bad("only n=1 is supported", "/n", "unsupported_parameter")
    logprobs = _optional_bool(data, "logprobs")
    if data.get("top_logprobs"):
        raise _bad(
            "top_logprobs are not supported (logprobs are)",
            "/top_logprobs",
            "unsupported_parameter",
        )

    stream = _optional_bool(data, "stream")
    options = data.get("stream_options")
    if options is not None and not isinstance(options, dict):
        raise _bad("stream_options must be an object", "/stream_options")
    include_usage = _optional_bool(options or {}, "include_usage", "/stream_options")

    cache_prompt = _optional_bool(data, "cache_prompt")
    max_tokens = _optional_int(data, "max_completion_tokens", 1)
    if max_tokens is None:
        max_tokens = _optional_int(data, "max_tokens", 1)
    temperature = _optional_number(data, "temperature", 0.0, 2.0)
    top_p = _optional_number(data, "top_p", 0.0, 1.0)
    frequency = _optional_number(data, "frequency_penalty", -2.0, 2.0)
    presence = _optional_number(data, "presence_penalty", -2.0, 2.0)
    return ChatRequest(
        messages=_messages(data),
        stream=bool(stream),
        include_usage=include_usage is True,
        max_tokens=max_tokens,
        temperature=DEFAULT_TEMPERATURE if temperature is None else temperature,
        top_p=DEFAULT_TOP_P if top_p is None else top_p,
        frequency_penalty=frequency or 0.0,
        presence_penalty=presence or 0.0,
        seed=_seed(data),
        stop=_stop(data),
        constraint=_constraint(data),
        cache_prompt=cache_prompt is not False,
        logprobs=logprobs is True,
        closed_choices=_closed_choices(data),
    )


def _closed_choices(data: dict[str, Any]) -> ClosedChoices | None:
    spec = data.get("closed_choices")
    if spec is None:
        return None
    where = "/closed_choices"
    if not isinstance(spec, dict):
        raise _bad("'closed_choices' must be an object", where)
    fields = spec.get("fields")
    if not isinstance(fields, list) or not 0 < len(fields) <= MAX_CLOSED_FIELDS:
        raise _bad(
            f"'fields' must be an array of 1 to {MAX_CLOSED_FIELDS} fields", f"{where}/fields"
        )
    read: list[tuple[str, tuple[str, ...], str]] = []
    total = 0
    for index, field in enumerate(fields):
        at = f"{where}/fields/{index}"
        if not isinstance(field, dict):
            raise _bad("a closed field must be an object", at)
        after = _closed_text(field.get("after"), f"{at}/after")
        end = field.get("end", "")
        if end != "":
            end = _closed_text(end, f"{at}/end")
        options = field.get("options")
        if not isinstance(options, list) or not 2 <= len(options) <= MAX_CLOSED_OPTIONS:
            raise _bad(
                f"'options' must be an array of 2 to {MAX_CLOSED_OPTIONS} texts", f"{at}/options"
            )
        texts = tuple(_closed_text(o, f"{at}/options/{i}") for i, o in enumerate(options))
        if len(set(texts)) != len(texts):
            raise _bad("the options must differ", f"{at}/options")
        total += sum(len(t) + len(end) for t in texts)
        if total > MAX_CLOSED_OPTION_CHARS:
            raise _bad(
                f"the options hold more than {MAX_CLOSED_OPTION_CHARS} characters in all",
                f"{at}/options",
            )
        read.append((after, texts, end))
    return ClosedChoices(tuple(read), _messages(spec, f"{where}/content_free", "content_free"))


def _closed_text(value: Any, where: str) -> str:
    if not isinstance(value, str) or not 0 < len(value) <= MAX_CLOSED_TEXT:
        raise _bad(f"must be a text of 1 to {MAX_CLOSED_TEXT} characters", where)
    return value


def _messages(
    data: dict[str, Any], location: str = "/messages", name: str = "messages"
) -> tuple[dict[str, str], ...]:
    messages = data.get(name)
    if messages is None:
        raise _bad(f"'{name}' is required", location, "missing_field")
    if not isinstance(messages, list) or not messages:
        raise _bad(f"'{name}' must be a non-empty array", location)
    result: list[dict[str, str]] = []
    for index, message in enumerate(messages):
        where = f"{location}/{index}"
        if not isinstance(message, dict):
            raise _bad("a message must be an object", where)
        role = message.get("role")
        if role not in _ROLES:
            raise _bad(
                f"role {role!r} is not supported (use system, developer, user or assistant)",
                f"{where}/role",
            )
        result.append({"role": _ROLES[role], "content": _content(message, where)})
    return tuple(result)


def _content(message: dict[str, Any], where: str) -> str:
    content = message.get("content")
    if content is None and message.get("role") == "assistant":
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts: list[str] = []
        for index, part in enumerate(content):
            text = part.get("text") if isinstance(part, dict) else None
            if (
                not isinstance(part, dict)
                or part.get("type") != "text"
                or not isinstance(text, str)
            ):
                raise _bad("only text content parts are supported", f"{where}/content/{index}")
            texts.append(text)
        return "".join(texts)
    raise _bad("content must be a string or an array of text parts", f"{where}/content")


def _constraint(data: dict[str, Any]) -> Constraint | None:
    grammar = data.get("grammar")
    response_format = data.get("response_format")
    if response_format is not None and not isinstance(response_format, dict):
        raise _bad("'response_format' must be an object", "/response_format")
    kind = None if response_format is None else response_format.get("type")
    if grammar is not None:
        if not isinstance(grammar, str):
            raise _bad("'grammar' must be a GBNF string", "/grammar", "invalid_grammar")
        if kind not in (None, "text"):
            raise _bad(
                "give either 'grammar' or a JSON 'response_format', not both",
                "/grammar",
                "unsupported_parameter",
            )
        return Constraint("grammar", grammar, "/grammar")
    if kind is None or kind == "text":
        return None
    if kind == "json_object":
        return Constraint("grammar", JSON_OBJECT_GRAMMAR, "/response_format")
    if kind == "json_schema":
        spec = response_format.get("json_schema") if response_format else None
        param = "/response_format/json_schema/schema"
        if not isinstance(spec, dict) or "schema" not in spec:
            raise _bad(
                "response_format.json_schema must be an object with a 'schema'",
                "/response_format/json_schema",
                "invalid_schema",
            )
        if not isinstance(spec["schema"], dict):
            raise _bad("the JSON schema must be a JSON object", param, "invalid_schema")
        try:
            text = json.dumps(spec["schema"])
        except (ValueError, RecursionError):
            raise _bad("the JSON schema is nested too deeply", param, "invalid_schema") from None
        return Constraint("schema", text, param)
    raise _bad(
        f"response_format type {kind!r} is not supported (text, json_object, json_schema)",
        "/response_format/type",
    )


def _optional_bool(data: dict[str, Any], name: str, parent: str = "") -> bool | None:
    value = data.get(name)
    if value is not None and not isinstance(value, bool):
        raise _bad(f"'{name}' must be a boolean", f"{parent}/{name}")
    return value


def _optional_int(data: dict[str, Any], name: str, minimum: int) -> int | None:
    value = data.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise _bad(f"'{name}' must be an integer >= {minimum}", f"/{name}")
    return value


def _optional_number(data: dict[str, Any], name: str, low: float, high: float) -> float | None:
    value = data.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise _bad(f"'{name}' must be a number from {low} to {high}", f"/{name}")
    return float(value)


def _seed(data: dict[str, Any]) -> int | None:
    seed = data.get("seed")
    if seed is None:
        return None
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        raise _bad(f"'seed' must be an integer from 0 to {MAX_SEED}", "/seed")
    return seed


def _stop(data: dict[str, Any]) -> tuple[str, ...]:
    stop = data.get("stop")
    if stop is None:
        return ()
    items = [stop] if isinstance(stop, str) else stop
    if (
        not isinstance(items, list)
        or len(items) > MAX_STOP_SEQUENCES
        or not all(isinstance(s, str) and s for s in items)
    ):
        raise _bad(
            f"'stop' must be a non-empty string or up to {MAX_STOP_SEQUENCES} of them", "/stop"
        )
    return tuple(items)
