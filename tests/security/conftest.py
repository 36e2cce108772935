"""Fixtures of the security tests: the trap server and the scripted upstream."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.security.trap import Trap, trap_server
from tests.web_support import upstream

__all__ = ["trap", "upstream"]


@pytest.fixture
def trap() -> Iterator[Trap]:
    with trap_server() as started:
        yield started
