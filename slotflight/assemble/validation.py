"""Per-slot validation: frame text in, a JSON value or an :class:`ErrorDetail` out.

Frame bodies are trimmed, then parsed by kind, strictly:

- ``integer``: optional sign and digits (``"12"``; not ``"12.0"``, ``"twelve"``), at most
  :data:`MAX_DIGITS` digits.
- ``number``: a JSON number (``"-1.5e3"``) that is finite as a double; no ``nan``/``inf``,
  ``1e999`` fails, and so does an integer written out beyond a double's range (``1``
  and 400 zeros; one within it is kept as written); comma digit groups and a leading
  currency sign are dropped (``$1,899.99``, :func:`slotflight._written.plain_number`).
- ``boolean``: ``true`` or ``false``, any letter case; nothing else (``"yes"`` fails).
- ``enum``: the exact value; a JSON string of a text member is that member (``"1"`` is
  the text beside the number ``1``, and is how the writer writes it); a number equal to
  a numeric member (``2.0`` for ``2``) and, for strings, a unique case-insensitive match
  are accepted and reported as the member.
- ``date``/``datetime``/``time``/``uuid``: ISO text, checked by Pydantic, kept as written
  (``.000Z`` stays); a ``date`` written out with a month name (``12 March 2024``) is
  read as its ISO text (:func:`slotflight._written.iso_date`).
- ``json``: JSON text (a surrounding Markdown code fence is tolerated), strict: no
  ``NaN``/``Infinity``, no number beyond a double (an integer written out in digits
  included; one within a double's range is kept exact), at most ``max_depth`` levels
  deep. A lone surrogate an escape writes (``"\\ud800"``) in a string or a key becomes
  U+FFFD, as in quoted text.
- ``string``: the trimmed text.

A nullable slot accepts the body ``null`` as ``None``. The parsed value is then checked
against the slot's own schema (:attr:`Slot.schema`) by the plan's validator class (the
declared draft, local references only, linear-time regexes), so a slot accepts exactly
what the final check accepts there (a hand-built slot without a schema: against its
:attr:`Slot.constraints`). Nothing raises: every failure, expected or not, is
an :class:`ErrorDetail`.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Mapping
from datetime import date, datetime, time
from typing import TYPE_CHECKING, Any, Final
from uuid import UUID

import jsonschema
from jsonpointer import JsonPointer
from pydantic import TypeAdapter, ValidationError

from .._errors import ErrorDetail
from .._jsonable import depth_over, finite_float, loads_strict
from .._written import iso_date, plain_number
from ..plan.model import Slot, SlotPlan, json_string_of
from ..plan.validators import standalone_validator
from .decode import replace_surrogates_in

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

__all__ = ["MAX_DIGITS", "SlotValidator", "validator_for"]

_INT = re.compile(r"[+-]?\d+")
#: Unambiguous (no two ways to split the digits), so a failing match is linear.
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
#: The language name is read possessively: given back a letter at a time, each try scanned
#: the rest of the text again, quadratic in a fence's unclosed run of letters.
_FENCE = re.compile(r"```[a-zA-Z]*+\n?(.*?)\n?```", re.S)
_MAX_ECHO: Final = 200
_MAX_MESSAGE: Final = 300
#: The longest integer text accepted (Python's default integer/text conversion bound).
MAX_DIGITS: Final = 4300

_TEMPORAL: Final[dict[str, type]] = {"date": date, "datetime": datetime, "time": time, "uuid": UUID}
#: Error codes for schema keywords (Pydantic's names where they exist).
_CODES: Final[dict[str, str]] = {
    "minLength": "string_too_short",
    "maxLength": "string_too_long",
    "pattern": "string_pattern_mismatch",
    "minimum": "greater_than_equal",
    "maximum": "less_than_equal",
    "exclusiveMinimum": "greater_than",
    "exclusiveMaximum": "less_than",
    "multipleOf": "multiple_of",
    "enum": "enum",
    "const": "literal_error",
    "format": "format",
    "type": "type_error",
}


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


class SlotValidator:
    """Validates one slot's frame text. Built once per slot and cached on the plan."""

    def __init__(self, slot: Slot, plan: SlotPlan) -> None:
        self.slot = slot
        # a model's int field takes ``2.0`` only as ``2`` in the strict final check
        self._whole_as_int = plan.model is not None
        self._temporal: TypeAdapter[Any] | None = None
        if slot.kind in _TEMPORAL:
            self._temporal = TypeAdapter(_TEMPORAL[slot.kind])
        # a hand-built slot may carry constraints and no schema: they are checked then
        self._schema: Validator | None = None
        # a rest slot's keys are looked up among the declared names in O(1) each, not
        # compared with every one (jsonschema's enum): O(keys x fields) otherwise
        self._declared, schema = _declared_names(slot)
        try:
            self._schema = (
                plan.context.standalone(schema)
                if schema
                else standalone_validator(dict(slot.constraints))
            )
        except Exception:  # a schema no validator can be built for: every value fails
            self._schema = None
        self._enum_exact: dict[str, Any] = {}
        self._enum_texts: set[str] = set()
        self._enum_folded: dict[str, list[Any]] = {}
        self._enum_numbers: list[Any] = []
        members = slot.enum or ()
        # a number's or boolean's JSON text is that member; a text member written the
        # same way is written as a JSON string (plan.instance.value_text)
        for value in members:
            if not isinstance(value, str):
                self._enum_exact.setdefault(json.dumps(value), value)
                if not isinstance(value, bool):
                    self._enum_numbers.append(value)
        for value in members:
            if isinstance(value, str):
                self._enum_exact.setdefault(value, value)
                self._enum_texts.add(value)
                self._enum_folded.setdefault(value.casefold(), []).append(value)

    def __call__(
        self, raw: str, index: int | None = None, *, max_depth: int = 64, quoted: bool = False
    ) -> tuple[Any, ErrorDetail | None]:
        """``(value, None)`` when ``raw`` is valid, else ``(None, error)``. Never raises.
        ``quoted``: the frame wrote the value as a quoted string, so ``null`` is the text
        "null"."""
        # an enum member decoded from quotes is exact (" a" is a member of its own)
        text = raw if quoted and self.slot.kind == "enum" else raw.strip()
        try:
            null = self.slot.nullable and text == "null" and not quoted
            value = None if null else self._parse(text, max_depth, quoted)
            self._check(value)
        except _SlotInvalid as exc:
            return None, self._error(exc.code, exc.message, text, index)
        except ValidationError as exc:
            first = exc.errors(include_url=False)[0]
            return None, self._error(first["type"], first["msg"], text, index)
        except Exception as exc:  # a value no check foresaw: a failure, never a crash
            return None, self._error("validation_error", f"{type(exc).__name__}", text, index)
        return value, None

    def _error(self, code: str, message: str, raw: str, index: int | None) -> ErrorDetail:
        pointer = self.slot.concrete_pointer(index) if self.slot.repeatable else self.slot.pointer
        return ErrorDetail(
            code=code,
            message=_shorten(message, _MAX_MESSAGE),
            location=pointer,
            slot=self.slot.display(index),
            input=_shorten(raw, _MAX_ECHO),
        )

    def _parse(self, text: str, max_depth: int, quoted: bool = False) -> Any:
        kind = self.slot.kind
        if kind == "string":
            return text
        if kind == "integer":
            if _INT.fullmatch(text):
                return self._integer(text)
            whole = self._integral_float(text)
            return int(whole) if self._whole_as_int else whole
        if kind == "number":
            text = plain_number(text)
            if not _NUMBER.fullmatch(text):
                raise _SlotInvalid("float_parsing", f"expected a number, got {text!r}")
            integer = self._integer(text) if _INT.fullmatch(text) else None
            try:
                number = finite_float(text)  # an integer too: finite as a double
            except ValueError as exc:
                raise _SlotInvalid("float_parsing", str(exc)) from None
            return number if integer is None else integer
        if kind == "boolean":
            folded = text.casefold()
            if folded in ("true", "false"):
                return folded == "true"
            raise _SlotInvalid("bool_parsing", f"expected true or false, got {text!r}")
        if kind == "enum":
            return self._enum(text, quoted)
        if kind == "date" and (written := iso_date(text)) is not None:
            return written
        if self._temporal is not None:
            self._temporal.validate_json(json.dumps(text), strict=True)
            return text
        if kind == "json":
            return self._json(text, max_depth)
        raise _SlotInvalid("unknown_kind", f"unknown slot kind {kind!r}")

    @staticmethod
    def _integral_float(text: str) -> float:
        """``2.0`` for an integer slot: JSON Schema's integers include numbers with a zero
        fraction, kept as written (for a Pydantic model's field, as the ``int`` it is)."""
        if _NUMBER.fullmatch(text) and len(text) <= MAX_DIGITS:
            with contextlib.suppress(ValueError):  # not finite
                value = finite_float(text)
                if value.is_integer():
                    return value
        raise _SlotInvalid("int_parsing", f"expected an integer, got {text!r}")

    @staticmethod
    def _integer(text: str) -> int:
        if len(text.lstrip("+-")) > MAX_DIGITS:
            raise _SlotInvalid("int_parsing", f"integer with more than {MAX_DIGITS} digits")
        return int(text)

    def _enum(self, text: str, quoted: bool = False) -> Any:
        """The member ``text`` names: a text member first where the value was a JSON
        string (decoded by the frame, ``quoted``, white space kept; or written so,
        ``"1"``), then the member written exactly so (a number's or boolean's JSON text
        before a text member's), then as below."""
        if quoted:
            if text in self._enum_texts:
                return text
            text = text.strip()  # not a member as written: read as any value is
        if text.startswith('"') and (spelled := json_string_of(text)) in self._enum_texts:
            return spelled
        if text in self._enum_exact:
            return self._enum_exact[text]
        unquoted = text[1:-1] if len(text) >= 2 and text[0] == text[-1] == '"' else text
        if unquoted in self._enum_exact:
            return self._enum_exact[unquoted]
        if self._enum_numbers and _NUMBER.fullmatch(text) and len(text) <= MAX_DIGITS:
            number = float(text)
            for member in self._enum_numbers:
                if member == number:  # the same number, kept as written (2 or 2.0)
                    return int(text) if _INT.fullmatch(text) else number
        matches = self._enum_folded.get(unquoted.casefold(), [])
        if len(matches) == 1:
            return matches[0]
        allowed = ", ".join(str(v) for v in self.slot.enum or ())
        raise _SlotInvalid("enum", f"expected one of: {allowed}; got {text!r}")

    def _json(self, text: str, max_depth: int) -> Any:
        fenced = _FENCE.fullmatch(text)
        if fenced is not None:
            text = fenced.group(1).strip()
        try:
            value = loads_strict(text)
        except RecursionError:
            raise _SlotInvalid("json_too_deep", f"JSON nested deeper than {max_depth}") from None
        except ValueError as exc:
            raise _SlotInvalid("json_invalid", f"invalid JSON: {exc}") from None
        if depth_over(value, max_depth):
            raise _SlotInvalid("json_too_deep", f"JSON nested deeper than {max_depth}")
        if _integer_beyond_double(value):
            message = "invalid JSON: an integer beyond the range of a double"
            raise _SlotInvalid("json_invalid", message)
        return replace_surrogates_in(value)  # an escaped lone surrogate: U+FFFD

    def _check(self, value: Any) -> None:
        """``value`` against the slot's schema; the most relevant error is reported."""
        if self._schema is None:
            raise _SlotInvalid("validation_error", "the slot's schema cannot be checked")
        if self._declared and isinstance(value, dict):
            declared = next((key for key in value if key in self._declared), None)
            if declared is not None:
                message = f"{declared!r} is a declared field, not one of the other keys"
                raise _SlotInvalid("json_schema", message)
        error = jsonschema.exceptions.best_match(self._schema.iter_errors(value))
        if error is None:
            return
        if self.slot.kind == "json":
            where = JsonPointer.from_parts(error.absolute_path).path
            raise _SlotInvalid("json_schema", error.message + (f" at {where}" if where else ""))
        keyword = str(error.validator)
        if keyword in ("minimum", "maximum"):  # drafts 3 and 4: exclusive as a flag
            flag = "exclusive" + keyword[0].upper() + keyword[1:]
            if isinstance(error.schema, dict) and error.schema.get(flag) is True:
                keyword = flag
        raise _SlotInvalid(_CODES.get(keyword, f"schema_{keyword}"), error.message)


class _SlotInvalid(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def validator_for(plan: SlotPlan, slot: Slot) -> SlotValidator:
    """The validator for ``slot``, built once and cached on ``plan``."""
    cache = plan._validators
    found = cache.get(slot.id)
    if found is None:
        found = cache[slot.id] = SlotValidator(slot, plan)
    return found


def _declared_names(slot: Slot) -> tuple[frozenset[str], Mapping[str, Any]]:
    """The declared field names a rest slot's keys may not take, and the slot's schema
    without them, when its schema holds them as the compiler writes them
    (``"propertyNames": {"not": {"enum": [names]}}``); else no names and the schema."""
    schema = slot.schema
    names = schema.get("propertyNames") if slot.is_rest else None
    inner = names.get("not") if isinstance(names, Mapping) and len(names) == 1 else None
    enum = inner.get("enum") if isinstance(inner, Mapping) and len(inner) == 1 else None
    if not isinstance(enum, list) or not all(isinstance(name, str) for name in enum):
        return frozenset(), schema
    return frozenset(enum), {k: v for k, v in schema.items() if k != "propertyNames"}


def _integer_beyond_double(value: Any) -> bool:
    """Whether a parsed JSON value holds an integer beyond the range of a double (which a
    float field would read as infinity, as it would ``1e999``). Iterative, O(size)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, int) and not isinstance(item, bool):
            try:
                float(item)
            except OverflowError:
                return True
    return False
