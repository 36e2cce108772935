"""GBNF grammars for constrained sampling: bounding them, checking them, deriving them
from JSON Schema.

A grammar is hostile input. llama.cpp parses it recursively, expands every ``{m,n}``
into rules, and matches every candidate token against it at every sampling step, so a
small text can crash the parser (100,000 nested groups), exhaust memory (``"a"{3,1}``)
or make one sampling step last minutes (1,000 rules of ``[a]{0,10000}``). So before
llama.cpp sees a grammar:

1. :func:`precheck_grammar` measures it in one pass in Python, against
   :class:`GrammarLimits`: size, rule count, group nesting, repetition counts, and
   the *expansion* (the symbols llama.cpp holds once every repetition is unrolled,
   nested repetitions multiplied);
2. :func:`compile_check`: llama.cpp builds (and frees) a grammar sampler for the
   model's vocabulary while file descriptor 2 is redirected, so its parse message can
   be returned to the client instead of landing on the server's terminal. This runs in
   the checking process (see ``_worker``), never in the server's.

A JSON schema is bounded the same way: the counts that llama-cpp-python's converter
unrolls (``minLength``, ``maxLength``, ``minItems``, ``maxItems``, ``{m,n}`` inside a
``pattern``) are summed before it runs (:func:`schema_to_grammar`), then its grammar
goes through both steps.
"""

from __future__ import annotations

import json
import os
import re
import sys
import tempfile
import threading
from dataclasses import dataclass
from typing import Any

import jsonschema
from llama_cpp.llama_grammar import JSON_GBNF

from .._errors import SlotflightError

__all__ = [
    "DEFAULT_GRAMMAR_LIMITS",
    "JSON_OBJECT_GRAMMAR",
    "GrammarLimits",
    "compile_check",
    "precheck_grammar",
    "schema_to_grammar",
]


@dataclass(frozen=True)
class GrammarLimits:
    """Bounds on a grammar (from the ``grammar`` field or made from a schema).

    ``max_bytes``: UTF-8 size of the grammar text. ``max_rules``: rule definitions.
    ``max_nesting``: groups ``( ... )`` inside each other. ``max_repetition``: the
    count in one ``{m,n}``. ``max_expansion``: the symbols llama.cpp builds once every
    repetition is unrolled, over all rules (a literal counts its characters; a class, a
    rule reference, a group or ``.`` one, a group's content being a rule of its own;
    ``x{m,n}`` counts ``x`` max(m, n) times, ``x*``/``x+``/``x?`` twice); for a
    schema, also the sum of the counts the converter unrolls.
    """

    max_bytes: int = 256 * 1024
    max_rules: int = 2_000
    max_nesting: int = 1_000
    max_repetition: int = 10_000
    max_expansion: int = 200_000

    def __post_init__(self) -> None:
        for name in ("max_bytes", "max_rules", "max_nesting", "max_repetition", "max_expansion"):
            if getattr(self, name) < 1:
                raise ValueError(f"GrammarLimits.{name} must be >= 1")


DEFAULT_GRAMMAR_LIMITS = GrammarLimits()

JSON_OBJECT_GRAMMAR: str = JSON_GBNF
"""Any JSON object (what ``response_format: {"type": "json_object"}`` asks for)."""

_ROOT_RULE = re.compile(r"(?m)^[ \t]*root[ \t]*::=")
#: What llama.cpp's grammar parser skips between the parts of a ``{m,n}`` inside a
#: group: blanks, line breaks and ``#`` comments.
_SPACE = r"(?:[ \t\r\n]|#[^\r\n]*)*"
_REPETITION = re.compile(rf"\{{{_SPACE}(\d*){_SPACE}(,?){_SPACE}(\d*){_SPACE}\}}")
_NAME = re.compile(r"[A-Za-z0-9_-]+")
#: A ``{…}`` in a pattern, whatever it holds: the converter reads ``{m}``, ``{m,n}``,
#: ``{,n}``, with blanks, and digits as Python's ``int`` does (``1_000``).
_PATTERN_BRACES = re.compile(r"\{([^{}]{0,64})\}")
_UNROLLED_KEYWORDS = ("minLength", "maxLength", "minItems", "maxItems")
_PARSE_ERROR = re.compile(r"error parsing grammar:\s*(.+)")
_CAPTURE_LIMIT = 16 * 1024
_MESSAGE_LIMIT = 300

# One redirection of file descriptor 2 at a time, process-wide.
_STDERR_LOCK = threading.Lock()


def precheck_grammar(
    text: str,
    *,
    param: str,
    limits: GrammarLimits = DEFAULT_GRAMMAR_LIMITS,
    code: str = "invalid_grammar",
    subject: str = "the grammar",
) -> None:
    """Refuse a grammar that is empty, has no ``root`` rule, or exceeds ``limits``.

    One pass over the text (O(n)), which stops at the first bound crossed. Literals,
    character classes and comments are skipped as llama.cpp skips them; syntax errors
    are left for llama.cpp to report. ``param`` (a JSON Pointer) and ``code`` are those
    of the raised error; ``subject`` names the grammar in its message.

    Raises:
        SlotflightError: with ``code`` and ``location=param``.
    """

    def refuse(message: str) -> SlotflightError:
        return SlotflightError(f"{subject} {message}", code=code, location=param)

    size = len(text.encode("utf-8"))
    if size > limits.max_bytes:
        raise refuse(f"is {size} bytes; at most {limits.max_bytes} are allowed")
    if not text.strip():
        raise refuse("is empty")
    if not _ROOT_RULE.search(text):
        raise refuse("has no `root ::= ...` rule")
    _Measure(text, limits, refuse).run()


class _Measure:
    """The single pass of :func:`precheck_grammar`.

    ``groups`` holds, per open group (the rule body at the bottom), the expansion of
    its items so far and of its last item, which a following repetition multiplies.
    A closed group counts one symbol where it stands (llama.cpp makes its content a
    rule and refers to it). ``open_total`` is the sum over ``groups``, so the running
    expansion is known at every step without walking the stack.
    """

    def __init__(self, text: str, limits: GrammarLimits, refuse: Any) -> None:
        self.text = text
        self.limits = limits
        self.refuse = refuse
        self.closed_total = 0
        self.open_total = 0
        self.rules = 0
        self.groups: list[list[int]] = [[0, 0]]

    def add(self, size: int) -> None:
        frame = self.groups[-1]
        frame[0] += size
        frame[1] = size
        self.open_total += size
        self.check_expansion()

    def repeat(self, times: int) -> None:
        frame = self.groups[-1]
        extra = frame[1] * (times - 1)
        frame[0] += extra
        frame[1] *= times
        self.open_total += extra
        self.check_expansion()

    def check_expansion(self) -> None:
        if self.closed_total + self.open_total > self.limits.max_expansion:
            raise self.refuse(
                f"unrolls to more than {self.limits.max_expansion} symbols "
                "(repetition counts times the size of what they repeat, over all rules)"
            )

    def new_rule(self) -> None:
        self.rules += 1
        if self.rules > self.limits.max_rules:
            raise self.refuse(f"has more than {self.limits.max_rules} rules")
        # The name before ``::=`` was counted as a reference of the previous rule.
        self.closed_total += self.open_total - self.groups[-1][1]
        self.groups = [[0, 0]]
        self.open_total = 0

    def run(self) -> None:
        text = self.text
        i, end = 0, len(text)
        while i < end:
            char = text[i]
            if char == "#":
                newline = text.find("\n", i)
                i = end if newline < 0 else newline + 1
            elif char == '"':
                after = _skip_quoted(text, i + 1, '"')
                self.add(max(after - i - 2, 1))
                i = after
            elif char == "[":
                i = _skip_quoted(text, i + 1, "]")
                self.add(1)
            elif char == ":" and text.startswith("::=", i):
                self.new_rule()
                i += 3
            elif char == "(":
                if len(self.groups) > self.limits.max_nesting:
                    raise self.refuse(
                        f"nests groups more than {self.limits.max_nesting} levels deep"
                    )
                self.groups.append([0, 0])
                i += 1
            elif char == ")":
                if len(self.groups) > 1:  # the group becomes a rule of its own, referenced
                    inner = self.groups.pop()[0]
                    self.open_total -= inner
                    self.closed_total += inner
                    self.add(1)
                i += 1
            elif char == "|":
                self.groups[-1][1] = 0
                i += 1
            elif char in "*+?":
                self.repeat(2)
                i += 1
            elif char == "{":
                match = _REPETITION.match(text, i)
                if match is None:  # llama.cpp reads no other "{" outside a literal
                    raise self.refuse("has a repetition {m,n} that cannot be read")
                self.repeat(self.repetition_count(*match.groups()))
                i = match.end()
            elif char == ".":
                self.add(1)
                i += 1
            else:
                name = _NAME.match(text, i)
                if name is None:
                    i += 1
                else:
                    self.add(1)
                    i = name.end()

    def repetition_count(self, low_digits: str, comma: str, high_digits: str) -> int:
        """How many copies of the item ``{m,n}`` unrolls to, after checking its bounds."""
        most = self.limits.max_repetition
        if len(low_digits) > 9 or len(high_digits) > 9:
            raise self.refuse(f"has a repetition count above {most}")
        lower = int(low_digits or "0")
        upper = int(high_digits) if high_digits else (None if comma else lower)
        if lower > most or (upper is not None and upper > most):
            raise self.refuse(f"has a repetition count above {most}")
        if upper is not None and upper < lower:
            raise self.refuse(
                f"has the repetition {{{lower},{upper}}}, with its upper bound below its "
                "lower bound"
            )
        return max(lower + 1 if upper is None else upper, 1)


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


def compile_check(vocab: Any, text: str, *, param: str, code: str = "invalid_grammar") -> None:
    """Have llama.cpp parse ``text`` for ``vocab``; raise with its message if it fails.

    Call :func:`precheck_grammar` first, and only in a process that may crash.

    Raises:
        SlotflightError: with ``code`` and ``location=param``.
    """
    from llama_cpp import llama_cpp as native

    encoded = text.encode("utf-8")
    with _STDERR_LOCK:
        sys.stderr.flush()
        with tempfile.TemporaryFile() as sink:
            saved = os.dup(2)
            try:
                os.dup2(sink.fileno(), 2)
                sampler = native.llama_sampler_init_grammar(vocab, encoded, b"root")
            finally:
                sys.stderr.flush()
                os.dup2(saved, 2)
                os.close(saved)
            sink.seek(0)
            captured = sink.read(_CAPTURE_LIMIT).decode("utf-8", errors="replace")
    if sampler:
        native.llama_sampler_free(sampler)
        _pass_through(captured)
        return
    match = _PARSE_ERROR.search(captured)
    if match is None:
        _pass_through(captured)
        detail = "llama.cpp rejected it (an undefined or left-recursive rule?)"
    else:
        detail = match.group(1).strip()[:_MESSAGE_LIMIT]
    raise SlotflightError(f"the grammar is not valid GBNF: {detail}", code=code, location=param)


def _pass_through(captured: str) -> None:
    """Give back anything else that was written to standard error meanwhile."""
    if captured and _PARSE_ERROR.search(captured) is None:
        sys.stderr.write(captured)
        sys.stderr.flush()


def schema_to_grammar(
    schema: object, *, param: str, limits: GrammarLimits = DEFAULT_GRAMMAR_LIMITS
) -> str:
    """The GBNF grammar that admits exactly the JSON documents ``schema`` describes.

    The schema is checked against its JSON Schema metaschema (2020-12 unless it names
    another ``$schema``), its unrolled counts are bounded, then llama-cpp-python's
    converter runs and its grammar is prechecked against ``limits``.

    Raises:
        SlotflightError: code ``invalid_schema`` with ``location`` under ``param``.
    """
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    def refuse(message: str, where: str = "") -> SlotflightError:
        return SlotflightError(
            message[:_MESSAGE_LIMIT], code="invalid_schema", location=param + where
        )

    if not isinstance(schema, dict):
        raise refuse("the JSON schema must be a JSON object")
    validator = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        validator.check_schema(schema)
    except jsonschema.SchemaError as exc:
        where = "".join(f"/{part}" for part in exc.absolute_path)
        raise refuse(f"the JSON schema is invalid: {exc.message}", where) from None
    except RecursionError:
        raise refuse("the JSON schema is nested too deeply") from None
    except (re.error, OverflowError, ValueError) as exc:  # a pattern Python cannot compile
        raise refuse(f"the JSON schema is invalid: {type(exc).__name__}: {exc}") from None
    unrolled = _unrolled_counts(schema, limits)
    if unrolled > limits.max_expansion:
        raise refuse(
            "the JSON schema's lengths and item counts add up to more than "
            f"{limits.max_expansion}, the most the grammar made from it may unroll "
            "(lower maxLength, maxItems or pattern counts)"
        )
    try:
        grammar: str = json_schema_to_gbnf(json.dumps(schema))
    # The converter is third-party code that signals unsupported input with whatever
    # exception its Python raises (KeyError, TypeError, ValueError, RecursionError...).
    except Exception as exc:
        raise refuse(
            f"the JSON schema cannot be turned into a grammar ({type(exc).__name__}: {exc})"
        ) from None
    precheck_grammar(
        grammar,
        param=param,
        limits=limits,
        code="invalid_schema",
        subject="the grammar made from the JSON schema",
    )
    return grammar


def _brace_count(body: str) -> int:
    """The most copies a pattern's ``{body}`` asks for, read as the converter reads it
    (0 when it holds no count)."""
    most = 0
    for part in body.split(",")[:2]:
        try:
            most = max(most, int(part.strip() or 0))
        except ValueError:
            return 0
    return most


def _unrolled_counts(schema: object, limits: GrammarLimits) -> int:
    """The sum of the counts the converter unrolls, stopping once above the bound."""
    total = 0
    stack = [schema]
    while stack and total <= limits.max_expansion:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(node)
            continue
        if not isinstance(node, dict):
            continue
        for key, value in node.items():
            if key in _UNROLLED_KEYWORDS and isinstance(value, int | float) and value == value:
                total += int(min(max(value, 0), limits.max_expansion + 1))
            elif key == "pattern" and isinstance(value, str):
                for body in _PATTERN_BRACES.findall(value):
                    total += min(_brace_count(body), limits.max_expansion + 1)
            elif isinstance(value, dict | list):
                stack.append(value)
    return total
