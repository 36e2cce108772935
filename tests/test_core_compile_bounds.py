"""The compiler's work grows linearly with the schema: counted, never timed."""

from __future__ import annotations

from typing import Any

from slotflight import compile
from tests.schema_support import CountedName


def _compares(properties: int, names: int) -> int:
    """Comparisons of ``required`` names while compiling an object of ``properties``
    fields whose ``required`` repeats one name ``names`` times, then names them all."""
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {f"p{i}": {"type": "string"} for i in range(properties)},
        "required": [CountedName("p0")] * names + [CountedName(f"p{i}") for i in range(properties)],
        "additionalProperties": False,
    }
    CountedName.compared = 0
    plan = compile(schema)
    assert all(slot.required for slot in plan.slots)
    return CountedName.compared


def test_required_names_are_compared_linearly_in_the_schema() -> None:
    """Each property looks its name up once, not in a scan of ``required`` (which made
    the compile O(properties x names))."""
    small, large = _compares(100, 1000), _compares(200, 2000)
    assert large <= 4 * (200 + 2000)
    assert large <= 2 * small + 10
