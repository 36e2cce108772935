"""The conformance vectors in tests/conformance/ hold for this implementation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conformance.make_vectors import CASES, run_vector

VECTORS = sorted((Path(__file__).parent / "conformance").glob("*.json"))


def test_every_case_has_a_vector_file() -> None:
    assert {p.stem for p in VECTORS} == set(CASES)


@pytest.mark.parametrize("path", VECTORS, ids=[p.stem for p in VECTORS])
def test_vector(path: Path) -> None:
    vector: dict[str, Any] = json.loads(path.read_text())
    got = run_vector(vector["schema"], vector["chunks"], vector["complete"])
    assert got == vector["expected"]
