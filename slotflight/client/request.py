"""Chat-completion requests: the options of a stream and the bodies it sends.

The first request is the caller's messages with the plan's prompt placed in them
(``prompt_role``); a follow-up request is the same messages with the last ``user``
message extended by a request naming only the slots to write again
(:func:`slotflight.prompting.prompt.retry_prompt`). Every keyword the caller gave that
is not a slotflight option goes through unchanged to ``client.chat.completions.create``;
``extra_body`` is merged with the grammar.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

import openai
from pydantic import BaseModel

from ..assemble.assembler import Limits
from ..assemble.checks import (
    ChecksOption,
    OnCheckFailure,
    validate_checks,
    validate_on_check_failure,
)
from ..assemble.retry import RetryRequest
from ..plan.compiler import compile
from ..plan.model import SlotPlan
from ..prompting.prompt import RetryItem, prompt, retry_prompt, retry_targets
from ..syntax import DEFAULT_SYNTAX, get_syntax
from ..syntax.base import Syntax
from ..syntax.closed_choices import closed_choices, closed_choices_field, content_free_messages

__all__ = [
    "GRAMMAR_FIELDS",
    "GrammarBackend",
    "Output",
    "PromptPlacement",
    "RequestBuilder",
    "StreamOptions",
    "input_text",
    "resolve_plan",
]

#: Where the GBNF grammar goes in ``extra_body``, per server kind: a key, or a key and
#: the key within it. vLLM reads ``structured_outputs`` since 0.10.2 and dropped
#: ``guided_grammar`` in 0.12 (a request that still sends it is answered unconstrained).
GRAMMAR_FIELDS: Final[Mapping[str, tuple[str, ...]]] = {
    "llama.cpp": ("grammar",),
    "vllm": ("structured_outputs", "grammar"),
    "vllm-guided": ("guided_grammar",),
}

GrammarBackend = Literal["llama.cpp", "vllm", "vllm-guided"]

#: The constraints of vLLM's ``structured_outputs`` besides ``grammar``: it takes one.
_VLLM_CONSTRAINTS: Final = frozenset(
    {"json", "regex", "choice", "grammar", "json_object", "structural_tag"}
)

#: Places the plan's prompt into the caller's messages: gets a copy of the messages and
#: the prompt text, returns the messages to send.
PromptPlacer = Callable[[list[dict[str, Any]], str], Sequence[Mapping[str, Any]]]
PromptPlacement = Literal["system", "user"] | PromptPlacer

#: What ``output=`` accepts: a Pydantic model class, a JSON Schema dict, or a plan.
Output = type[BaseModel] | Mapping[str, Any] | SlotPlan

#: Keywords of ``create`` that slotflight sets itself.
_RESERVED: Final = frozenset({"stream", "messages", "model"})


@dataclass(frozen=True)
class StreamOptions:
    """The slotflight options of one stream (see ``docs/sdk.md``)."""

    syntax: str | Syntax = DEFAULT_SYNTAX
    max_attempts: int = 3
    grammar: GrammarBackend | Literal[False] = False
    grammar_max_string_chars: int | None = None
    prompt_role: PromptPlacement = "system"
    timeout: float | None = None
    idle_timeout: float | None = None
    early_exit: bool = False
    limits: Limits | None = None
    checks: ChecksOption = "all"
    on_check_failure: OnCheckFailure = "accept"
    confidence: bool = False
    calibrate: bool | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.confidence, bool):
            raise TypeError("confidence must be True or False")
        if self.calibrate is not None and not isinstance(self.calibrate, bool):
            raise TypeError("calibrate must be True, False or None")
        get_syntax(self.syntax)  # ValueError for an unknown name
        validate_checks(self.checks)
        validate_on_check_failure(self.on_check_failure)
        if isinstance(self.max_attempts, bool) or not isinstance(self.max_attempts, int):
            raise TypeError("max_attempts must be an int")
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1, got {self.max_attempts}")
        if self.grammar is not False and self.grammar not in GRAMMAR_FIELDS:
            raise ValueError(
                f"grammar must be False, 'llama.cpp', 'vllm' or 'vllm-guided', got {self.grammar!r}"
            )
        if not callable(self.prompt_role) and self.prompt_role not in ("system", "user"):
            raise ValueError(
                f"prompt_role must be 'system', 'user' or a callable, got {self.prompt_role!r}"
            )
        if self.limits is not None and not isinstance(self.limits, Limits):
            raise TypeError(
                f"limits must be a slotflight.Limits or None, got {type(self.limits).__name__}"
            )
        for name in ("timeout", "idle_timeout"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ValueError(f"{name} must be a positive number of seconds, got {value!r}")
            # a wait the threading and asyncio timers cannot take: None means no limit
            if value is not None and not (math.isfinite(value) and value <= threading.TIMEOUT_MAX):
                raise ValueError(
                    f"{name} must be a finite number of seconds (at most "
                    f"{threading.TIMEOUT_MAX:g}; None for no limit), got {value!r}"
                )


def _with_grammar(
    extra_body: Mapping[str, Any], field: tuple[str, ...], grammar: str
) -> dict[str, Any]:
    """A copy of ``extra_body`` with ``grammar`` at ``field`` (a key, or a key and the key
    within it: the caller's mapping there is copied and kept, a second constraint in it
    refused with ``TypeError``)."""
    body = dict(extra_body)
    if len(field) == 1:
        body[field[0]] = grammar
        return body
    outer, inner = field
    given = body.get(outer)
    if given is not None and not isinstance(given, Mapping):
        raise TypeError(f"extra_body[{outer!r}] must be a mapping")
    nested = dict(given or {})
    other = sorted(str(key) for key in nested if key in _VLLM_CONSTRAINTS and key != inner)
    if other:
        raise TypeError(
            f"extra_body[{outer!r}] already asks for {', '.join(other)}: with grammar= the "
            "server is given the plan's grammar, and it takes one constraint"
        )
    nested[inner] = grammar
    body[outer] = nested
    return body


def plain_messages(messages: Sequence[Any]) -> list[dict[str, Any]]:
    """The caller's messages as dicts, each a copy: a mapping as it is, a Pydantic
    message (``response.choices[0].message`` put back into the conversation) as the
    ``openai`` client itself would send it (the fields it was given or read, as JSON).
    Anything else raises ``TypeError``."""
    if isinstance(messages, str | bytes) or not isinstance(messages, Sequence):
        raise TypeError("messages must be a list of chat messages")
    plain: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        if isinstance(message, BaseModel):
            exclude = getattr(message, "__api_exclude__", None)
            plain.append(message.model_dump(exclude_unset=True, mode="json", exclude=exclude))
        elif isinstance(message, Mapping):
            plain.append(dict(message))
        else:
            raise TypeError(
                f"messages[{index}] must be a chat message (a dict or an openai message "
                f"object), got {type(message).__name__}"
            )
    return plain


def input_text(messages: Sequence[Mapping[str, Any]]) -> str:
    """The text of the caller's messages (string contents and text parts), one per
    line: what the slot checks compare the schema's own words with."""
    parts: list[str] = []
    for message in messages:
        content = message.get("content") if isinstance(message, Mapping) else None
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts.extend(
                p["text"]
                for p in content
                if isinstance(p, Mapping) and isinstance(p.get("text"), str)
            )
    return "\n".join(parts)


def resolve_plan(output: Output) -> SlotPlan:
    """The plan for ``output``: compiled from a model or schema, or used as given."""
    if isinstance(output, SlotPlan):
        return output
    return compile(output)


def place_prompt(
    messages: Sequence[Mapping[str, Any]], text: str, placement: PromptPlacement
) -> list[dict[str, Any]]:
    """The caller's messages with the plan's prompt placed in them.

    ``"system"``: put before the text of a leading system message (a blank line between),
    else inserted as a new first system message. The plan's prompt thus opens the
    conversation, the same for every request with the same schema, so a server can
    reuse its prefix (KV cache, prompt caching). ``"user"``: appended to the
    last message when it is a user message, else added as a new user message at the
    end. A message whose content is a list of parts gets the prompt as a text part of
    its own, first or last (so no chat template meets a second system message, or two
    user messages in a row). A callable decides itself.
    """
    copied = [dict(m) for m in messages]
    if callable(placement):
        return [dict(m) for m in placement(copied, text)]
    if placement == "system":
        if copied and copied[0].get("role") == "system" and _joined(copied[0], text, first=True):
            return copied
        copied.insert(0, {"role": "system", "content": text})
        return copied
    if not (copied and copied[-1].get("role") == "user" and _joined(copied[-1], text, first=False)):
        copied.append({"role": "user", "content": text})
    return copied


def _joined(message: dict[str, Any], text: str, *, first: bool) -> bool:
    """Put ``text`` in ``message`` (a copy), before or after its content with a blank
    line between: in its text, or as a text part of a list of parts. False when the
    content is neither (missing, ``None``)."""
    content = message.get("content")
    if isinstance(content, str):
        message["content"] = f"{text}\n\n{content}" if first else f"{content}\n\n{text}"
    elif isinstance(content, list | tuple):
        part = {"type": "text", "text": f"{text}\n\n" if first else f"\n\n{text}"}
        message["content"] = [part, *content] if first else [*content, part]
    else:
        return False
    return True


def retry_items(request: RetryRequest) -> list[RetryItem]:
    """One :class:`RetryItem` per target: the validation message and the rejected text."""
    return [
        RetryItem(
            t.slot, t.index, t.error.message, t.error.input, optional=t.error.code == "not_written"
        )
        for t in request.targets
    ]


class RequestBuilder:
    """Builds the ``create`` keyword arguments of the first and follow-up requests."""

    def __init__(
        self,
        plan: SlotPlan,
        options: StreamOptions,
        *,
        model: str,
        messages: Sequence[Mapping[str, Any]],
        params: Mapping[str, Any],
    ) -> None:
        reserved = _RESERVED.intersection(params)
        if reserved:
            raise TypeError(
                f"{', '.join(sorted(reserved))}: set by slotflight, not a pass-through keyword"
            )
        #: The caller's messages as sent (before the prompt is placed in them).
        self.caller_messages = plain_messages(messages)
        response_format = params.get("response_format")
        if response_format is not None and response_format != {"type": "text"}:
            raise TypeError(
                "response_format: the model writes slot frames, not JSON; a JSON response "
                "format would leave it no way to (use response_format only without slotflight)"
            )
        if params.get("n", 1) not in (1, None):
            raise TypeError(
                "n: a stream assembles one answer per request; ask for several objects with "
                "several streams (the extra choices would be paid for and never read)"
            )
        self.plan = plan
        self.options = options
        self.model = model
        self.params = dict(params)
        extra_body = self.params.pop("extra_body", None)
        if extra_body is not None and not isinstance(extra_body, Mapping):
            raise TypeError("extra_body must be a mapping")
        self._extra_body: dict[str, Any] = dict(extra_body or {})
        self.syntax = get_syntax(options.syntax)
        self._grammar_field = None if options.grammar is False else GRAMMAR_FIELDS[options.grammar]
        if self._grammar_field is not None:
            self._extra_body = _with_grammar(
                self._extra_body,
                self._grammar_field,
                self.syntax.grammar(plan, max_string_chars=options.grammar_max_string_chars),
            )
        self._stream_options = self.params.pop("stream_options", {"include_usage": True})
        text = prompt(plan, self.syntax, grammar=self._grammar_field is not None)
        self.messages = place_prompt(self.caller_messages, text, options.prompt_role)
        #: The ``closed_choices`` field of the first request (``None``: not sent).
        self.closed_choices: dict[str, Any] | None = None
        calibrate = options.calibrate
        if calibrate is None:
            calibrate = options.grammar == "llama.cpp"
        choices = closed_choices(plan, self.syntax) if calibrate else ()
        if choices and "closed_choices" not in self._extra_body:
            free = place_prompt(
                content_free_messages(self.caller_messages), text, options.prompt_role
            )
            self.closed_choices = closed_choices_field(choices, free)

    def first(self, timeout: openai.Timeout | None) -> dict[str, Any]:
        """Keyword arguments of the first request."""
        kwargs = self._kwargs(self.messages, timeout)
        if self.closed_choices is not None:
            kwargs["extra_body"] = {
                **kwargs.get("extra_body", {}),
                "closed_choices": self.closed_choices,
            }
        return kwargs

    def retry(self, request: RetryRequest, timeout: openai.Timeout | None) -> dict[str, Any]:
        """Keyword arguments of the follow-up for ``request``: only its targets asked for."""
        items = retry_items(request)
        grammar = None
        if self._grammar_field is not None:
            grammar = self.syntax.grammar(
                self.plan,
                max_string_chars=self.options.grammar_max_string_chars,
                only=retry_targets(items),
            )
        text = retry_prompt(
            self.plan,
            items,
            dict(request.accepted),
            self.syntax,
            grammar=grammar is not None,
        )
        # The follow-up joins the last user message (a new user message only where the
        # conversation ends otherwise), so the turns keep alternating: chat templates
        # that refuse two user messages in a row take it as they took the first request.
        messages = place_prompt(self.messages, text, "user")
        return self._kwargs(messages, timeout, grammar)

    def _kwargs(
        self,
        messages: list[dict[str, Any]],
        timeout: openai.Timeout | None,
        grammar: str | None = None,
    ) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            **self.params,
            "model": self.model,
            "messages": messages,
            "stream": True,
        }
        if self._stream_options is not None:
            kwargs["stream_options"] = self._stream_options
        if self.options.confidence and "logprobs" not in self.params:
            kwargs["logprobs"] = True
        if self._extra_body:
            kwargs["extra_body"] = (
                _with_grammar(self._extra_body, self._grammar_field, grammar)
                if grammar is not None and self._grammar_field is not None
                else dict(self._extra_body)
            )
        if timeout is not None:
            kwargs["timeout"] = timeout
        return kwargs
