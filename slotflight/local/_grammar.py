"""GBNF grammars for constrained sampling: checking them and deriving them from JSON Schema.

llama.cpp parses a grammar only when a sampler is built from it, and it reports a bad
grammar by printing to the process's standard error and returning a null sampler.
Some malformed grammars are worse: a repetition whose upper bound is below its lower
bound (``"a"{3,1}``) makes the parser allocate until the process dies. So a grammar is
checked in two steps before any generation uses it:

1. :func:`precheck_grammar`, in Python: not empty, a ``root`` rule, repetition bounds
   that are ordered and not absurd;
2. :func:`compile_check`: llama.cpp builds (and frees) a grammar sampler for the model's
   vocabulary while file descriptor 2 is redirected, so its parse message can be
   returned to the client instead of landing on the server's terminal.
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
import threading
from typing import Any

import jsonschema
from llama_cpp import llama_cpp as _llama
from llama_cpp.llama_grammar import JSON_GBNF, json_schema_to_gbnf

from .._errors import SlotflightError

__all__ = [
    "JSON_OBJECT_GRAMMAR",
    "MAX_REPETITION",
    "compile_check",
    "precheck_grammar",
    "schema_to_grammar",
]

JSON_OBJECT_GRAMMAR: str = JSON_GBNF
"""Any JSON object (what ``response_format: {"type": "json_object"}`` asks for)."""

MAX_REPETITION = 10_000
"""Largest count accepted in a ``{m,n}`` repetition."""

_ROOT_RULE = re.compile(r"(?m)^[ \t]*root[ \t]*::=")
_REPETITION = re.compile(r"\{[ \t]*(\d*)[ \t]*(,?)[ \t]*(\d*)[ \t]*\}")
_PARSE_ERROR = re.compile(r"error parsing grammar:\s*(.+)")
_CAPTURE_LIMIT = 16 * 1024
_MESSAGE_LIMIT = 300

# One redirection of file descriptor 2 at a time, process-wide.
_STDERR_LOCK = threading.Lock()


def _invalid(message: str, param: str) -> SlotflightError:
    return SlotflightError(message, code="invalid_grammar", location=param)


def precheck_grammar(text: str, *, param: str) -> None:
    """Reject grammars llama.cpp would mishandle or that cannot be meant.

    ``param`` names the request field the grammar came from (a JSON Pointer), for the
    error's ``location``.

    Raises:
        SlotflightError: code ``invalid_grammar``.
    """
    if not text.strip():
        raise _invalid("the grammar is empty", param)
    if not _ROOT_RULE.search(text):
        raise _invalid("the grammar has no `root ::= ...` rule", param)
    for lower, upper in _repetitions(text):
        if lower > MAX_REPETITION or (upper is not None and upper > MAX_REPETITION):
            raise _invalid(f"a repetition count is above {MAX_REPETITION}", param)
        if upper is not None and upper < lower:
            raise _invalid(
                f"the repetition {{{lower},{upper}}} has its upper bound below its lower bound",
                param,
            )


def _repetitions(text: str) -> list[tuple[int, int | None]]:
    """Every ``{m}``, ``{m,}``, ``{,n}``, ``{m,n}`` outside literals, classes and comments."""
    found: list[tuple[int, int | None]] = []
    i, end = 0, len(text)
    while i < end:
        char = text[i]
        if char == "#":
            newline = text.find("\n", i)
            i = end if newline < 0 else newline + 1
            continue
        if char in '"[':
            i = _skip_quoted(text, i + 1, '"' if char == '"' else "]")
            continue
        if char == "{":
            match = _REPETITION.match(text, i)
            if match is not None:
                low_digits, comma, high_digits = match.groups()
                if len(low_digits) > 9 or len(high_digits) > 9:
                    found.append((MAX_REPETITION + 1, None))
                else:
                    lower = int(low_digits or "0")
                    upper = int(high_digits) if high_digits else (None if comma else lower)
                    found.append((lower, upper))
                i = match.end()
                continue
        i += 1
    return found


def _skip_quoted(text: str, i: int, closing: str) -> int:
    """The index just past the ``closing`` character that ends a literal or class."""
    end = len(text)
    while i < end:
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == closing:
            return i + 1
        if text[i] == "\n":  # unterminated; llama.cpp reports it
            return i
        i += 1
    return end


def compile_check(vocab: Any, text: str, *, param: str) -> None:
    """Have llama.cpp parse ``text`` for ``vocab``; raise with its message if it fails.

    Call :func:`precheck_grammar` first.

    Raises:
        SlotflightError: code ``invalid_grammar``.
    """
    encoded = text.encode("utf-8")
    with _STDERR_LOCK:
        sys.stderr.flush()
        with tempfile.TemporaryFile() as sink:
            saved = os.dup(2)
            try:
                os.dup2(sink.fileno(), 2)
                sampler = _llama.llama_sampler_init_grammar(vocab, encoded, b"root")
            finally:
                sys.stderr.flush()
                os.dup2(saved, 2)
                os.close(saved)
            sink.seek(0)
            captured = sink.read(_CAPTURE_LIMIT).decode("utf-8", errors="replace")
    if sampler:
        _llama.llama_sampler_free(sampler)
        _pass_through(captured)
        return
    match = _PARSE_ERROR.search(captured)
    if match is None:
        _pass_through(captured)
        detail = "llama.cpp rejected it (an undefined or left-recursive rule?)"
    else:
        detail = match.group(1).strip()[:_MESSAGE_LIMIT]
    raise _invalid(f"the grammar is not valid GBNF: {detail}", param)


def _pass_through(captured: str) -> None:
    """Give back anything else that was written to standard error meanwhile."""
    if captured and _PARSE_ERROR.search(captured) is None:
        sys.stderr.write(captured)
        sys.stderr.flush()


def schema_to_grammar(schema: object, *, param: str) -> str:
    """The GBNF grammar that admits exactly the JSON documents ``schema`` describes.

    The schema is first checked against its JSON Schema metaschema (2020-12 unless it
    names another ``$schema``), then converted by llama.cpp's converter.

    Raises:
        SlotflightError: code ``invalid_schema`` with ``location`` set to ``param``.
    """
    if not isinstance(schema, dict):
        raise SlotflightError(
            "the JSON schema must be a JSON object", code="invalid_schema", location=param
        )
    validator = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        validator.check_schema(schema)
    except jsonschema.SchemaError as exc:
        where = "".join(f"/{part}" for part in exc.absolute_path)
        raise SlotflightError(
            f"the JSON schema is invalid: {exc.message}"[:_MESSAGE_LIMIT],
            code="invalid_schema",
            location=param + where,
        ) from None
    try:
        grammar: str = json_schema_to_gbnf(json.dumps(schema))
    # The converter is third-party code that signals unsupported input with whatever
    # exception its Python raises (KeyError, TypeError, ValueError, RecursionError...).
    except Exception as exc:
        reason = f"{type(exc).__name__}: {exc}"[:_MESSAGE_LIMIT]
        raise SlotflightError(
            f"the JSON schema cannot be turned into a grammar ({reason})",
            code="invalid_schema",
            location=param,
        ) from None
    return grammar
