"""Per-slot validation: frame text in, a JSON value or an :class:`ErrorDetail` out.

Frame bodies are trimmed, then parsed by kind, strictly:

- ``integer``: optional sign and digits (``"12"``; not ``"12.0"``, ``"twelve"``).
- ``number``: a JSON number (``"-1.5e3"``); no ``nan``/``inf``.
- ``boolean``: ``true`` or ``false``, any letter case; nothing else (``"yes"`` fails).
- ``enum``: the exact value; for string enums a unique case-insensitive match is
  accepted and reported as the canonical value.
- ``date``/``datetime``/``time``/``uuid``: ISO text, checked by Pydantic, kept as the
  normalised ISO string in the state.
- ``json``: JSON text (a surrounding Markdown code fence is tolerated), checked
  against the slot's own JSON Schema.
- ``string``: the trimmed text.

A nullable slot accepts the body ``null`` as ``None``. Constraints (lengths, bounds,
patterns, formats) are checked by a Pydantic ``TypeAdapter`` built once per slot.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import date, datetime, time
from typing import Annotated, Any, Final
from uuid import UUID

import jsonschema
from jsonpointer import JsonPointer
from pydantic import AnyUrl, Field, TypeAdapter, ValidationError

from .._errors import ErrorDetail
from ..plan.model import Slot

__all__ = ["SlotValidator", "validator_for"]

_INT = re.compile(r"[+-]?\d+")
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_FENCE = re.compile(r"```[a-zA-Z]*\n?(.*?)\n?```", re.S)
_MAX_ECHO: Final = 200

_TEMPORAL: Final[dict[str, type]] = {"date": date, "datetime": datetime, "time": time, "uuid": UUID}


def _field_kwargs(c: Mapping[str, Any]) -> dict[str, Any]:
    kw: dict[str, Any] = {}
    for key, name in (
        ("minimum", "ge"),
        ("maximum", "le"),
        ("exclusiveMinimum", "gt"),
        ("exclusiveMaximum", "lt"),
        ("multipleOf", "multiple_of"),
        ("minLength", "min_length"),
        ("maxLength", "max_length"),
        ("pattern", "pattern"),
    ):
        if key in c and c[key] is not None:
            kw[name] = c[key]
    return kw


class SlotValidator:
    """Validates one slot's frame text. Built once per slot and cached on the plan."""

    def __init__(self, slot: Slot) -> None:
        self.slot = slot
        kind = slot.kind
        kw = _field_kwargs(slot.constraints)
        self._adapter: TypeAdapter[Any] | None = None
        self._schema_validator: jsonschema.protocols.Validator | None = None
        self._url = TypeAdapter(AnyUrl) if slot.constraints.get("format") == "uri" else None
        if kind == "string":
            self._adapter = TypeAdapter(Annotated[str, Field(**kw)])
        elif kind == "integer":
            self._adapter = TypeAdapter(Annotated[int, Field(strict=True, **kw)])
        elif kind == "number":
            self._adapter = TypeAdapter(Annotated[float, Field(**kw)])
        elif kind in _TEMPORAL:
            self._adapter = TypeAdapter(_TEMPORAL[kind])
        elif kind == "json":
            cls = jsonschema.validators.validator_for(slot.schema, jsonschema.Draft202012Validator)
            self._schema_validator = cls(slot.schema, format_checker=cls.FORMAT_CHECKER)
        self._enum_exact: dict[str, Any] = {}
        self._enum_folded: dict[str, list[Any]] = {}
        for value in slot.enum or ():
            text = value if isinstance(value, str) else json.dumps(value)
            self._enum_exact[text] = value
            self._enum_folded.setdefault(text.casefold(), []).append(value)

    def __call__(
        self, raw: str, index: int | None = None, *, quoted: bool = False
    ) -> tuple[Any, ErrorDetail | None]:
        """``(value, None)`` when ``raw`` is valid, else ``(None, error)``. ``quoted``:
        the frame wrote the value as a quoted string, so ``null`` is the text "null"."""
        text = raw.strip()
        if self.slot.nullable and text == "null" and not quoted:
            return None, None
        try:
            return self._parse(text), None
        except _SlotInvalid as exc:
            return None, self._error(exc.code, exc.message, text, index)
        except ValidationError as exc:
            first = exc.errors(include_url=False)[0]
            return None, self._error(first["type"], first["msg"], text, index)

    def _error(self, code: str, message: str, raw: str, index: int | None) -> ErrorDetail:
        echo = raw if len(raw) <= _MAX_ECHO else raw[:_MAX_ECHO] + "…"
        pointer = self.slot.concrete_pointer(index) if self.slot.repeatable else self.slot.pointer
        return ErrorDetail(
            code=code,
            message=message,
            location=pointer,
            slot=self.slot.display(index),
            input=echo,
        )

    def _parse(self, text: str) -> Any:
        kind = self.slot.kind
        if kind == "string":
            assert self._adapter is not None
            value = self._adapter.validate_python(text)
            if self._url is not None:
                self._url.validate_python(text)
            return value
        if kind == "integer":
            if not _INT.fullmatch(text):
                raise _SlotInvalid("int_parsing", f"expected an integer, got {text!r}")
            assert self._adapter is not None
            return self._adapter.validate_python(int(text))
        if kind == "number":
            if not _NUMBER.fullmatch(text):
                raise _SlotInvalid("float_parsing", f"expected a number, got {text!r}")
            assert self._adapter is not None
            number = float(text)
            self._adapter.validate_python(number)
            return int(text) if _INT.fullmatch(text) else number
        if kind == "boolean":
            folded = text.casefold()
            if folded in ("true", "false"):
                return folded == "true"
            raise _SlotInvalid("bool_parsing", f"expected true or false, got {text!r}")
        if kind == "enum":
            return self._enum(text)
        if kind in _TEMPORAL:
            assert self._adapter is not None
            parsed = self._adapter.validate_json(json.dumps(text), strict=True)
            return self._adapter.dump_python(parsed, mode="json")
        if kind == "json":
            return self._json(text)
        raise _SlotInvalid("unknown_kind", f"unknown slot kind {kind!r}")

    def _enum(self, text: str) -> Any:
        if text in self._enum_exact:
            return self._enum_exact[text]
        unquoted = text[1:-1] if len(text) >= 2 and text[0] == text[-1] == '"' else text
        if unquoted in self._enum_exact:
            return self._enum_exact[unquoted]
        matches = self._enum_folded.get(unquoted.casefold(), [])
        if len(matches) == 1:
            return matches[0]
        allowed = ", ".join(str(v) for v in self.slot.enum or ())
        raise _SlotInvalid("enum", f"expected one of: {allowed}; got {text!r}")

    def _json(self, text: str) -> Any:
        fenced = _FENCE.fullmatch(text)
        if fenced is not None:
            text = fenced.group(1).strip()
        try:
            value = json.loads(text)
        except ValueError as exc:
            raise _SlotInvalid("json_invalid", f"invalid JSON: {exc}") from None
        assert self._schema_validator is not None
        error = jsonschema.exceptions.best_match(self._schema_validator.iter_errors(value))
        if error is not None:
            where = JsonPointer.from_parts(error.absolute_path).path
            raise _SlotInvalid(
                "json_schema", f"{error.message}" + (f" at {where}" if where else "")
            )
        return value


class _SlotInvalid(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def validator_for(slot: Slot, cache: dict[int, SlotValidator]) -> SlotValidator:
    """The cached validator for ``slot`` (``cache`` lives on the plan)."""
    found = cache.get(slot.id)
    if found is None:
        found = cache[slot.id] = SlotValidator(slot)
    return found
