"""Dates written out with an English month name, read as ISO ``YYYY-MM-DD``.

A ``date`` slot accepts ``12 March 2024``, ``March 12, 2024`` and the abbreviated
months (``12 Mar 2024``, ``Sept 3, 2025``; any letter case) besides ISO text, and its
value in state is always ISO. A model that reads a date written out in its input can
copy it as written instead of converting it digit by digit; the grammar admits these
forms with the month names of :data:`MONTH_NAMES` as spelled there. See
docs/protocol.md, "Values".
"""

from __future__ import annotations

import re
from datetime import date
from typing import Final

__all__ = ["MONTH_NAMES", "iso_date"]

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
        day, month, year = match.group(1), match.group(2), match.group(3)
    elif match := _MONTH_FIRST.fullmatch(text):
        month, day, year = match.group(1), match.group(2), match.group(3)
    else:
        return None
    try:
        return date(int(year), _BY_FOLDED[month.casefold()], int(day)).isoformat()
    except ValueError:
        return None
