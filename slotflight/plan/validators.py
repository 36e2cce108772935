"""JSON Schema validation the package can afford: local references, linear-time regexes.

Every jsonschema validator the package builds comes from a :class:`SchemaContext`:

- **The declared draft.** The validator class is the one the document's ``$schema``
  names (draft 2020-12 when it names none), so compiling, checking slots and the final
  check agree.
- **No fetching, ever.** References resolve through a ``referencing`` registry that holds
  the document (its embedded ``$id`` resources included) and the JSON Schema
  meta-schemas shipped with ``jsonschema-specifications`` (drafts 3 to 2020-12, so a
  schema may ``$ref`` ``http://json-schema.org/draft-07/schema#``), and whose
  ``retrieve`` refuses every URI. A reference to anything else is
  :class:`Unresolvable`; the compiler turns it into a :class:`SchemaError` before any
  validator runs.
- **Linear-time patterns.** ``pattern``, ``patternProperties``, the pattern part of
  ``additionalProperties`` and the ``regex`` format run on pydantic-core's Rust regex
  engine (no backtracking), one compiled validator per pattern, kept in a cache bounded
  by the estimated size of what it holds (:data:`CACHE_BYTES`). Patterns that engine
  cannot run (look-around, backreferences) are refused when the schema compiles, and so
  are patterns over the compile's size bounds (:func:`pattern_size`).
"""

from __future__ import annotations

import copy
import json
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from functools import lru_cache
from typing import Any, Final
from urllib.parse import quote

import jsonschema
import jsonschema_specifications
import referencing
import referencing.exceptions
import referencing.jsonschema
from jsonschema.exceptions import ValidationError
from jsonschema.protocols import Validator
from pydantic_core import SchemaError as CoreSchemaError
from pydantic_core import SchemaValidator, core_schema
from pydantic_core import ValidationError as CoreValidationError
from referencing._core import Resolver

__all__ = [
    "META_SCHEMAS",
    "ROOT_URI",
    "SchemaContext",
    "is_meta_schema_uri",
    "linear_validator_class",
    "metered",
    "pattern_error",
    "pattern_search",
    "pattern_size",
    "standalone_validator",
]

#: The URI the document is registered under when it has no ``$id``.
ROOT_URI: Final = "urn:slotflight:schema"
#: Validator classes whose ``$ref`` ignores its sibling keywords (drafts 3 to 7).
LEGACY_REF_DRAFTS: Final = frozenset(
    {
        jsonschema.Draft3Validator,
        jsonschema.Draft4Validator,
        jsonschema.Draft6Validator,
        jsonschema.Draft7Validator,
    }
)


# -- patterns -----------------------------------------------------------------------------

#: Estimated compiled size, in bytes, of one occurrence of each kind of atom on the
#: Rust engine (measured as the engine's own size limit divided by how many copies of
#: the atom fit under it). Unicode classes compile to large UTF-8 automata.
_ATOM_BYTES: Final[Mapping[str, int]] = {
    "d": 5_200,
    "D": 13_000,
    "s": 700,
    "S": 2_000,
    "w": 51_000,
    "W": 51_000,
    "p": 51_000,  # a Unicode property: sized as the largest (\p{L} is about \w)
    "P": 51_000,
}
_LITERAL_BYTES: Final = 32
_WIDE_LITERAL_BYTES: Final = 128
_ANY_BYTES: Final = 1_000  # "." and a negated class: every UTF-8 length
_WIDE_RANGE_BYTES: Final = 1_000
_CASELESS_FACTOR: Final = 10
#: A capture group, an optional or looping copy (``?``, ``*``, ``+``, each copy of
#: ``{n,m}`` beyond ``n``), a branch of ``|``.
_GROUP_BYTES: Final = 64
_REPEAT_BYTES: Final = 80
_BRANCH_BYTES: Final = 64
#: Every compiled pattern, however small, holds about this much (its engine's caches).
_PATTERN_BASE_BYTES: Final = 10_000
_CAP: Final = 1 << 62
#: A flag group that turns case-insensitivity on (``(?i)``, ``(?mi:``).
_CASELESS: Final = re.compile(r"\(\?[a-zA-Z]*i")


def pattern_size(pattern: str) -> int:
    """About how many bytes the Rust engine compiles ``pattern`` into (an estimate that
    errs high), read from the text alone in O(len(pattern)), before compiling it.

    Counted repetition multiplies what it repeats (``\\w{200}`` is about 10 MB, the
    engine's own limit, while ``a{200}`` is 7 KB); Unicode classes (``\\w``, ``\\d``,
    ``\\p{…}``) weigh the most. A pattern the engine would refuse may get any estimate.
    """
    factor = _CASELESS_FACTOR if _CASELESS.search(pattern) is not None else 1
    # per open group: [cost so far, cost of the last atom, cost of the group itself]
    stack: list[list[int]] = [[0, 0, 0]]
    i, n = 0, len(pattern)
    while i < n:
        char = pattern[i]
        top = stack[-1]
        if char == "(":
            i += 1
            own = _GROUP_BYTES  # a capture group
            if pattern.startswith("?", i):  # flags, a non-capturing or a named group
                close = i
                while close < n and pattern[close] not in ":)>":
                    close += 1
                if pattern.startswith(")", close):  # (?i): flags for what follows
                    i = close + 1
                    continue
                own = 0 if pattern.startswith(":", close) else _GROUP_BYTES
                i = close + 1
            stack.append([0, 0, own])
            continue
        if char == ")" and len(stack) > 1:
            inner, _, own = stack.pop()
            top = stack[-1]
            top[1] = min(inner + own, _CAP)
            top[0] = min(top[0] + top[1], _CAP)
            i += 1
            continue
        if char in "*+?":
            top[0] = min(top[0] + _REPEAT_BYTES, _CAP)
            i += 1
            continue
        if char == "{":
            counts, end = _repetition(pattern, i + 1)
            if counts is not None:
                low, high = counts
                extra = top[1] * (max(high, 1) - 1) + _REPEAT_BYTES * (high - low + 1)
                top[0] = min(top[0] + extra, _CAP)
                i = end
                continue
        if char == "|":
            top[0] = min(top[0] + _BRANCH_BYTES, _CAP)
            top[1] = 0
            i += 1
            continue
        if char == "\\":
            atom, i = _escape_bytes(pattern, i + 1)
        elif char == "[":
            atom, i = _class_bytes(pattern, i + 1)
        elif char == ".":
            atom, i = _ANY_BYTES, i + 1
        else:
            atom, i = (_LITERAL_BYTES if char.isascii() else _WIDE_LITERAL_BYTES), i + 1
        top[1] = atom * factor
        top[0] = min(top[0] + top[1], _CAP)
    total = 0
    while stack:  # groups left open (the engine refuses them): counted all the same
        inner, _, own = stack.pop()
        total = min(total + inner + own, _CAP)
    return min(total + _PATTERN_BASE_BYTES, _CAP)


def _escape_bytes(pattern: str, i: int) -> tuple[int, int]:
    """The cost of the escape whose letter is at ``i``, and the index after it."""
    if i >= len(pattern):
        return _LITERAL_BYTES, i
    letter = pattern[i]
    i += 1
    if letter in "pP":
        if pattern.startswith("{", i):
            end = pattern.find("}", i)
            i = len(pattern) if end < 0 else end + 1
        else:
            i += 1
        return _ATOM_BYTES[letter], i
    if letter in _ATOM_BYTES:
        return _ATOM_BYTES[letter], i
    if letter in "xuU":
        if pattern.startswith("{", i):
            end = pattern.find("}", i)
            return _WIDE_LITERAL_BYTES, (len(pattern) if end < 0 else end + 1)
        return _WIDE_LITERAL_BYTES, i + {"x": 2, "u": 4, "U": 8}[letter]
    if letter in "bBAz<>":
        return _LITERAL_BYTES, i
    return (_LITERAL_BYTES if letter.isascii() else _WIDE_LITERAL_BYTES), i


def _class_bytes(pattern: str, i: int) -> tuple[int, int]:
    """The cost of the bracket class opened just before ``i``, and the index after it.
    Nested classes (``[a[b]]``) and set operations are summed; a negated class is
    weighed as its complement, which spans every UTF-8 length."""
    n = len(pattern)
    negated = pattern.startswith("^", i)
    i += 1 if negated else 0
    cost = _LITERAL_BYTES
    first = True
    while i < n:
        char = pattern[i]
        if char == "]" and not first:
            i += 1
            break
        first = False
        if char == "[":
            if pattern.startswith("[:", i) and (end := pattern.find(":]", i + 2)) >= 0:
                posix_negated = pattern.startswith("^", i + 2)
                cost += _ANY_BYTES * 3 if posix_negated else 2 * _LITERAL_BYTES
                i = end + 2
                continue
            inner, i = _class_bytes(pattern, i + 1)
            cost += inner
            continue
        step, wide, i = _class_member(pattern, i)
        if pattern.startswith("-", i) and i + 1 < n and pattern[i + 1] not in "]-":
            _, wide_end, i = _class_member(pattern, i + 1)
            step = _WIDE_RANGE_BYTES if wide or wide_end else _LITERAL_BYTES
        cost += step
    if negated:
        cost = cost * 3 + _ANY_BYTES
    return cost, i


def _class_member(pattern: str, i: int) -> tuple[int, bool, int]:
    """One member of a class at ``i`` (a character or an escape): its cost, whether it
    lies outside ASCII, and the index after it."""
    if pattern[i] == "\\":
        cost, end = _escape_bytes(pattern, i + 1)
        return max(cost, _LITERAL_BYTES), cost >= _WIDE_LITERAL_BYTES, end
    wide = not pattern[i].isascii()
    return (_WIDE_LITERAL_BYTES if wide else _LITERAL_BYTES), wide, i + 1


def _repetition(pattern: str, i: int) -> tuple[tuple[int, int] | None, int]:
    """The least and most copies a ``{n}``, ``{n,}`` or ``{n,m}`` starting at ``i``
    makes (``n + 1`` at most for an open range: one copy loops), and the index after it
    (a lazy ``?`` included); ``None`` when the brace starts no repetition."""
    end = pattern.find("}", i)
    if end < 0 or end - i > 40:
        return None, i
    body = pattern[i:end].replace(" ", "")
    low_text, comma, high_text = body.partition(",")
    if not low_text.isdigit() or (high_text and not high_text.isdigit()):
        return None, i
    low = int(low_text)
    high = int(high_text) if high_text else low + (1 if comma else 0)
    end += 1
    if pattern.startswith("?", end):
        end += 1
    return (min(low, high), high), end


#: The compiled patterns kept, by estimated size (:func:`pattern_size`): the least recently
#: used go first. A pattern over a quarter of it is compiled each time, never kept.
CACHE_BYTES: Final = 32_000_000


class _PatternCache:
    """Compiled patterns by text, bounded by what they hold (their estimated sizes), least
    recently used evicted first. Thread-safe; compiling happens outside the lock."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self._held = 0
        self._entries: OrderedDict[str, tuple[SchemaValidator | str, int]] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def held(self) -> int:
        """The estimated bytes the kept patterns hold."""
        return self._held

    def get(self, pattern: str) -> SchemaValidator | str:
        with self._lock:
            found = self._entries.get(pattern)
            if found is not None:
                self._entries.move_to_end(pattern)
                return found[0]
        size = pattern_size(pattern)
        compiled = _compile(pattern)
        if size > self.budget // 4:
            return compiled
        with self._lock:
            if pattern not in self._entries:
                self._entries[pattern] = (compiled, size)
                self._held += size
                while self._held > self.budget:
                    _, (_, dropped) = self._entries.popitem(last=False)
                    self._held -= dropped
        return compiled

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._held = 0


def _compile(pattern: str) -> SchemaValidator | str:
    """The pattern's validator, or why the Rust engine cannot run it."""
    try:
        return SchemaValidator(core_schema.str_schema(pattern=pattern, regex_engine="rust-regex"))
    except CoreSchemaError as exc:
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
        return lines[-1] if lines else "invalid regular expression"


#: Every compiled pattern of the package, shared by all plans.
PATTERNS: Final = _PatternCache(CACHE_BYTES)


#: Told of every pattern before it is looked up, while a compile is in progress (see
#: :func:`metered`): the compile charges it to its budget, and may refuse it.
_METER: Final[ContextVar[Callable[[str], None] | None]] = ContextVar(
    "slotflight_pattern_meter", default=None
)


@contextmanager
def metered(meter: Callable[[str], None]) -> Iterator[None]:
    """Within the block (this thread or task), ``meter(pattern)`` runs before any pattern
    is compiled or looked up; what it raises propagates."""
    token = _METER.set(meter)
    try:
        yield
    finally:
        _METER.reset(token)


def _lookup(pattern: str) -> SchemaValidator | str:
    meter = _METER.get()
    if meter is not None:
        meter(pattern)
    return PATTERNS.get(pattern)


def pattern_error(pattern: str) -> str | None:
    """``None`` when ``pattern`` runs on the linear-time engine, else the reason."""
    found = _lookup(pattern)
    return found if isinstance(found, str) else None


def pattern_search(pattern: str, text: str) -> bool:
    """Whether ``pattern`` matches somewhere in ``text`` (JSON Schema semantics).

    O(len(pattern) * len(text)) at worst. A pattern the engine cannot run never
    matches (the compiler refuses such patterns first).
    """
    found = _lookup(pattern)
    if isinstance(found, str):
        return False
    try:
        found.validate_python(text)
    except CoreValidationError:
        return False
    return True


def _pattern(validator: Any, pattern: Any, instance: Any, schema: Any) -> Iterator[Any]:
    if validator.is_type(instance, "string") and not pattern_search(pattern, instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(validator: Any, patterns: Any, instance: Any, schema: Any) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if pattern_search(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(
    validator: Any, additional: Any, instance: Any, schema: Any
) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    declared = schema.get("properties", {})
    patterns = list(schema.get("patternProperties", {}))
    extras = [
        key
        for key in instance
        if key not in declared and not any(pattern_search(p, key) for p in patterns)
    ]
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif not additional and extras:
        listed = ", ".join(repr(extra) for extra in sorted(extras))
        verb = "was" if len(extras) == 1 else "were"
        yield ValidationError(f"Additional properties are not allowed ({listed} {verb} unexpected)")


def _regex_format(instance: object) -> bool:
    return not isinstance(instance, str) or pattern_error(instance) is None


@lru_cache(maxsize=16)
def linear_validator_class(base: type[Validator]) -> type[Validator]:
    """``base`` with every regex keyword on the linear-time engine."""
    extend: Any = jsonschema.validators.extend
    extended: type[Validator] = extend(
        base,
        {
            "pattern": _pattern,
            "patternProperties": _pattern_properties,
            "additionalProperties": _additional_properties,
        },
    )
    checker = copy.copy(base.FORMAT_CHECKER)
    checker.checkers = {**base.FORMAT_CHECKER.checkers, "regex": (_regex_format, ())}
    extended.FORMAT_CHECKER = checker
    return extended


#: A time as the plan's grammar admits it: ``HH:MM[:SS[.f]]``, a zone optional.
_NAIVE_TIME: Final = r"[0-2]\d:[0-5]\d(?::[0-5]\d(?:\.\d+)?)?(?:[zZ]|[+-][0-2]\d:?[0-5]\d)?"
_TIME_SHAPE: Final = re.compile(_NAIVE_TIME, re.ASCII)
_DATETIME_SHAPE: Final = re.compile(r"\d{4}-\d\d-\d\d[Tt ]" + _NAIVE_TIME, re.ASCII)
_TIME_OF_DAY: Final = SchemaValidator(core_schema.time_schema(strict=True))
_DATE_TIME: Final = SchemaValidator(core_schema.datetime_schema(strict=True))


def _as_pydantic(shape: re.Pattern[str], parse: SchemaValidator) -> Callable[[object], bool]:
    """A format check that accepts what a Pydantic model of that type accepts in that
    shape: a time or date-time without a zone (a naive value) too."""

    def check(instance: object) -> bool:
        if not isinstance(instance, str):
            return True
        if shape.fullmatch(instance) is None:
            return False
        try:
            parse.validate_json(json.dumps(instance), strict=True)
        except CoreValidationError:
            return False
        return True

    return check


@lru_cache(maxsize=16)
def naive_times_checker(base: type[Validator]) -> jsonschema.FormatChecker:
    """``base``'s format checker, reading ``time`` and ``date-time`` as Pydantic does.

    A Pydantic model's ``datetime.time`` and ``datetime.datetime`` fields have these
    formats in its JSON Schema, and the model writes and reads values without a zone
    (``09:30:00``, ``2025-01-31T09:30:00``), which RFC 3339 (JSON Schema's reading)
    refuses. A plan compiled from a model checks its values as the model will."""
    checker = copy.copy(base.FORMAT_CHECKER)
    checker.checkers = {
        **base.FORMAT_CHECKER.checkers,
        "time": (_as_pydantic(_TIME_SHAPE, _TIME_OF_DAY), ()),
        "date-time": (_as_pydantic(_DATETIME_SHAPE, _DATE_TIME), ()),
    }
    return checker


def _refuse(uri: str) -> referencing.Resource[Any]:
    raise referencing.exceptions.NoSuchResource(ref=uri)  # type: ignore[call-arg]


#: The meta-schemas of every draft (local copies), and nothing is ever retrieved.
META_SCHEMAS: Final[referencing.Registry[Any]] = referencing.Registry(  # type: ignore[call-arg]
    retrieve=_refuse
).combine(jsonschema_specifications.REGISTRY)


def is_meta_schema_uri(uri: str) -> bool:
    """Whether ``uri`` (fragment aside) names one of the meta-schemas in :data:`META_SCHEMAS`."""
    return uri.split("#", 1)[0] in META_SCHEMAS


# -- a document in context ----------------------------------------------------------------


class SchemaContext:
    """One schema document as jsonschema sees it: its draft and its local registry.

    ``validator()`` checks against the whole document; ``validator(at=pointer)`` against
    the subschema at a JSON Pointer, with the references and ``$id`` scopes around it
    exactly as in the document; ``validator(schema=…)`` against a schema made up by the
    compiler whose references name ``uri(pointer)``. Building is cheap; validators are
    built once per slot and cached on the plan.
    """

    def __init__(self, document: Mapping[str, Any], *, naive_times: bool = False) -> None:
        base: type[Validator] = jsonschema.validators.validator_for(
            document, default=jsonschema.Draft202012Validator
        )
        self.draft = base
        self.cls = linear_validator_class(base)
        #: Formats as checked here: ``naive_times`` (a plan compiled from a Pydantic
        #: model) reads ``time`` and ``date-time`` as the model does.
        self.format_checker: jsonschema.FormatChecker = (
            naive_times_checker(self.cls) if naive_times else self.cls.FORMAT_CHECKER
        )
        dialect = str(base.META_SCHEMA.get("$schema", ""))
        self.specification = referencing.jsonschema.specification_with(
            dialect, default=referencing.jsonschema.DRAFT202012
        )
        self.document = document
        resource = self.specification.create_resource(document)
        self.base_uri = resource.id() or ROOT_URI
        registry = META_SCHEMAS
        # crawled lazily, when a reference needs an anchor or an embedded $id
        self.registry = registry.with_resource(self.base_uri, resource)

    @property
    def legacy_refs(self) -> bool:
        """Whether ``$ref`` ignores its siblings (drafts 3 to 7)."""
        return self.draft in LEGACY_REF_DRAFTS

    def resolver(self) -> Resolver[Any]:
        """A resolver at the document's root (base URI: its ``$id`` or :data:`ROOT_URI`)."""
        resolver: Resolver[Any] = self.registry.resolver(self.base_uri)
        return resolver

    def uri(self, pointer: str) -> str:
        """The absolute reference to the subschema at ``pointer``."""
        return f"{self.base_uri}#{quote(pointer, safe='/~')}"

    def validator(self, *, at: str | None = None) -> Validator:
        """A validator (formats checked) for the document or the subschema at ``at``."""
        schema = self.document if at is None else {"$ref": self.uri(at)}
        return self.cls(schema, registry=self.registry, format_checker=self.format_checker)

    def standalone(self, schema: Mapping[str, Any] | bool) -> Validator:
        """A validator for a self-contained ``schema`` (a slot's bundle) in this draft:
        its references resolve inside it alone."""
        return self.cls(schema, registry=_EMPTY, format_checker=self.format_checker)


def standalone_validator(schema: Mapping[str, Any] | bool) -> Validator:
    """A draft 2020-12 validator (linear regexes, formats) for a self-contained schema."""
    cls = linear_validator_class(jsonschema.Draft202012Validator)
    return cls(schema, registry=_EMPTY, format_checker=cls.FORMAT_CHECKER)


_EMPTY: Final[referencing.Registry[Any]] = META_SCHEMAS
