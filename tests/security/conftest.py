from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.security.trap import Trap, trap_server


@pytest.fixture
def trap() -> Iterator[Trap]:
    with trap_server() as started:
        yield started
