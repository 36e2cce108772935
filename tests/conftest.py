"""Fixtures shared by the test modules."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from tests.grammar_support import GrammarEngine


@pytest.fixture(scope="session")
def engine() -> GrammarEngine:
    """llama.cpp's grammar engine over the embedded model's vocabulary, loaded once;
    skips the test (fails it on CI) without llama-cpp-python or the model."""
    from tests.grammar_support import grammar_engine

    return grammar_engine()
