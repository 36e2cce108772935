"""Values as people write them, read as the JSON value they mean.

A model that reads a value written out in its input can copy it as written instead of
converting it character by character, so a slot also takes these forms (the grammar
admits them, see :mod:`slotflight.syntax.gbnf`), and the state only ever holds the
plain value:

- a ``date`` written out with an English month name: ``12 March 2024``,
  ``March 12, 2024``, the abbreviated months (``12 Mar 2024``, ``Sept 3, 2025``), any
  letter case: :func:`iso_date`, ``2024-03-12``;
- a ``number`` with comma digit groups or one leading currency sign (``1,899.99``,
  ``$348.00``, ``€59.90``): :func:`plain_number`, ``1899.99``.

See docs/protocol.md, "Values".
"""

from __future__ import annotations

import re
from datetime import date
from typing import Final

__all__ = ["CURRENCY_SIGNS", "MONTH_NAMES", "iso_date", "plain_number"]

_FULL: Final = (
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
)  # fmt: skip

#: Month names a written-out date may use, each with its month number.
MONTH_NAMES: Final[dict[str, int]] = {
    **{name: number for number, name in enumerate(_FULL, start=1)},
    **{name[:3]: number for number, name in enumerate(_FULL, start=1) if name != "May"},
    "Sept": 9,
}

_MONTH: Final = "|".join(sorted(MONTH_NAMES, key=len, reverse=True))
_DAY_FIRST: Final = re.compile(rf"([0-9]{{1,2}}) ({_MONTH}) ([0-9]{{4}})", re.IGNORECASE)
_MONTH_FIRST: Final = re.compile(rf"({_MONTH}) ([0-9]{{1,2}}), ([0-9]{{4}})", re.IGNORECASE)
_BY_FOLDED: Final = {name.casefold(): number for name, number in MONTH_NAMES.items()}


def iso_date(text: str) -> str | None:
    """``text`` as ``YYYY-MM-DD`` when it is a written-out date (``12 March 2024``,
    ``March 12, 2024``) of a real day; ``None`` otherwise (ISO text included)."""
    if match := _DAY_FIRST.fullmatch(text):
        day, month, year = match.groups()
    elif match := _MONTH_FIRST.fullmatch(text):
        month, day, year = match.groups()
    else:
        return None
    try:
        return date(int(year), _BY_FOLDED[month.casefold()], int(day)).isoformat()
    except ValueError:
        return None


#: Currency signs a number may start with (after its minus sign); dropped on reading.
CURRENCY_SIGNS: Final = ("$", "€", "£", "¥")

_WRITTEN_NUMBER: Final = re.compile(
    rf"([+-]?)[{re.escape(''.join(CURRENCY_SIGNS))}]?"
    r"(?:([0-9]{1,3}(?:,[0-9]{3})+)(\.[0-9]+)?|([0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?))"
)


def plain_number(text: str) -> str:
    """``text`` without its digit-group commas and currency sign when it is a number
    written that way (``$1,899.99`` is ``1899.99``, ``$1.5e3`` is ``1.5e3``: the
    grammar admits an exponent after a sign, not after digit groups); any other text
    unchanged."""
    match = _WRITTEN_NUMBER.fullmatch(text)
    if match is None:
        return text
    sign, grouped, fraction, plain = match.groups()
    if plain is not None:
        return sign + plain
    return sign + grouped.replace(",", "") + (fraction or "")
