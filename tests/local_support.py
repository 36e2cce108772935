"""Gate for tests that need the embedded model: skip without it, fail under CI."""

from __future__ import annotations

import os

import pytest


def _unavailable() -> str | None:
    try:
        import llama_cpp  # noqa: F401
    except ImportError as exc:
        return f"llama-cpp-python is not importable ({exc}); install the 'local' extra"
    from slotflight import SlotflightError
    from slotflight.local import default_model_path

    try:
        default_model_path()
    except SlotflightError as exc:
        return f"no GGUF model: {exc.message}"
    return None


def require_local_model() -> None:
    """Call at module level: skips the module, or fails it when ``CI=true``."""
    reason = _unavailable()
    if reason is None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true and the local model cannot run: {reason}", pytrace=False)
    pytest.skip(reason, allow_module_level=True)
