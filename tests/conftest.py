"""Fixtures shared by the test modules."""

from __future__ import annotations

import os
from pathlib import Path
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
    (``slotflight._cache.CACHE_ENV_VAR``, spelled out)."""
    if not os.environ.get("SLOTFLIGHT_CACHE_DIR"):
        os.environ["SLOTFLIGHT_CACHE_DIR"] = str(tmp_path_factory.mktemp("slotflight-cache"))


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty cache folder of this test (not yet made), set as the one slotflight uses."""
    folder = tmp_path / "cache"
    monkeypatch.setenv("SLOTFLIGHT_CACHE_DIR", str(folder))
    return folder


def files_in(folder: Path) -> list[str]:
    """The names in ``folder``, sorted; none when it does not exist."""
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []
