"""JSON that never fails to serialise: dates, enums, UUIDs, models, sets, Decimals."""

from __future__ import annotations

import json
from typing import Any

from pydantic_core import to_jsonable_python

__all__ = ["dumps", "to_jsonable"]

_PLAIN = (str, int, float, bool, type(None))


def to_jsonable(value: Any) -> Any:
    """``value`` as plain JSON types (``dict``/``list``/``str``/numbers/``None``)."""
    if isinstance(value, _PLAIN):
        return value
    return to_jsonable_python(value, fallback=str)


def dumps(value: Any) -> str:
    """Compact JSON text (UTF-8 characters kept) for any value ``to_jsonable`` accepts."""
    return json.dumps(to_jsonable(value), ensure_ascii=False, separators=(",", ":"))
