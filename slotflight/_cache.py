"""The folder where slotflight keeps files it derives from others, and how it writes them.

The engine keeps converted weight copies there and the benchmark the model files it
assembles from split packages. The folder is ``$SLOTFLIGHT_CACHE_DIR``, else
``$XDG_CACHE_HOME/slotflight``, else ``~/.cache/slotflight``.

A file is written under a partial name that carries the writing process's id
(``.NAME.PID.partial``) and renamed into place when it is whole, so a reader never
loads a half-written file; a partial file whose process is gone (killed while writing)
is deleted by the next writer of the same file.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from pathlib import Path

__all__ = [
    "CACHE_ENV_VAR",
    "cache_directory",
    "partial_path",
    "remove_abandoned",
    "remove_all_abandoned",
]

CACHE_ENV_VAR = "SLOTFLIGHT_CACHE_DIR"


def cache_directory() -> Path:
    """Where derived files are kept (see the module's documentation)."""
    explicit = os.environ.get(CACHE_ENV_VAR, "").strip()
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "slotflight"


def partial_path(target: Path) -> Path:
    """The name this process writes ``target`` under before renaming it into place."""
    return target.with_name(f".{target.name}.{os.getpid()}.partial")


def remove_abandoned(target: Path) -> None:
    """Delete the partial copies of ``target`` whose writing process is gone; a partial
    file of a live process is left to it."""
    _remove_dead_writers(target.parent.glob(f".{target.name}.*.partial"))


def remove_all_abandoned(directory: Path) -> None:
    """Delete every partial file in ``directory`` whose writing process is gone."""
    _remove_dead_writers(directory.glob(".*.partial"))


def _remove_dead_writers(partials: Iterable[Path]) -> None:
    with contextlib.suppress(OSError):  # a folder that cannot be read holds nothing to do
        for partial in partials:
            pid = partial.name[: -len(".partial")].rpartition(".")[2]
            if pid.isdigit() and not _alive(int(pid)):
                with contextlib.suppress(OSError):
                    partial.unlink()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # it exists, owned by someone else
        return True
    return True
