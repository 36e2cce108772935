"""JSON that never fails to serialise (dates, enums, UUIDs, models, sets, Decimals), and
JSON read from outside that always serialises back to strict JSON."""

from __future__ import annotations

import json
import math
import re
from typing import Any, Final, NoReturn

from pydantic_core import to_jsonable_python

__all__ = [
    "LONE_SURROGATE",
    "depth_over",
    "dumps",
    "finite_float",
    "loads_strict",
    "lone_surrogate_at",
    "to_jsonable",
]

#: A lone surrogate: text UTF-8 cannot carry (a JSON escape such as ``"\ud800"``
#: decodes to one).
LONE_SURROGATE: Final = re.compile("[\ud800-\udfff]")

_PLAIN = (str, int, float, bool, type(None))


def to_jsonable(value: Any) -> Any:
    """``value`` as plain JSON types (``dict``/``list``/``str``/numbers/``None``)."""
    if isinstance(value, _PLAIN):
        return value
    return to_jsonable_python(value, fallback=str)


def dumps(value: Any) -> str:
    """Compact JSON text (UTF-8 characters kept) for any value ``to_jsonable`` accepts."""
    return json.dumps(to_jsonable(value), ensure_ascii=False, separators=(",", ":"))


def loads_strict(text: str | bytes) -> Any:
    """``json.loads`` that refuses ``NaN``/``Infinity`` and a number with a fraction or
    exponent beyond a double (``ValueError``), so what it returns serialises back to
    strict JSON; integers are kept exact, however large (Python's own limit on digits
    applies)."""
    return json.loads(text, parse_constant=_refuse_constant, parse_float=finite_float)


def depth_over(value: Any, limit: int) -> bool:
    """Whether ``value`` nests deeper than ``limit`` levels. Iterative, O(size)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def _refuse_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not a JSON number")


def finite_float(text: str) -> float:
    """``float(text)``, refusing a number beyond a double (``ValueError``)."""
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:40]} is beyond the range of a double")
    return value


def lone_surrogate_at(value: Any) -> str | None:
    """The JSON Pointer of the first key or string of ``value`` holding a lone surrogate,
    or ``None``. Iterative, O(size)."""
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        item, where = stack.pop()
        if isinstance(item, str):
            if LONE_SURROGATE.search(item) is not None:
                return where
        elif isinstance(item, dict):
            for key, child in item.items():
                here = f"{where}/{key.replace('~', '~0').replace('/', '~1')}"
                if LONE_SURROGATE.search(key) is not None:
                    return here
                stack.append((child, here))
        elif isinstance(item, list):
            stack.extend((child, f"{where}/{i}") for i, child in enumerate(item))
    return None
