"""Fixtures shared by the test modules."""

from __future__ import annotations

import os
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


@pytest.fixture(scope="session", autouse=True)
def _model_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Converted model weights go to a folder of this session, not the user's cache
    (``slotflight.local.CACHE_ENV_VAR``, spelled out: that package needs the extra)."""
    if not os.environ.get("SLOTFLIGHT_CACHE_DIR"):
        os.environ["SLOTFLIGHT_CACHE_DIR"] = str(tmp_path_factory.mktemp("slotflight-cache"))
