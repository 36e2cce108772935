"""The weight format the generating process loads, and the converted copies it keeps.

llama.cpp's CPU kernels evaluate some weight formats much faster than others. The
embedded model ships as Q4_1 (4-bit values with a scale and an offset per block of 32);
the same weights stored as Q8_0 (8-bit values with a scale per block, which hold the
4-bit ones almost exactly) evaluate a prompt in about 0.6 of the time on the machine
of the benchmark figures, and generate each token about a tenth slower
(``benchmarks/weights.py``).
So by default the packaged model is converted once, with llama.cpp's own
``llama_model_quantize``, into a cache folder, and that copy is loaded; a model file the
user names is loaded as it is unless a format is asked for.

The cache folder is ``$SLOTFLIGHT_CACHE_DIR``, else ``$XDG_CACHE_HOME/slotflight``,
else ``~/.cache/slotflight``. A copy is named after its source's path, size and
modification time and llama.cpp's version, written under a temporary name, flushed to
disk and renamed into place, so processes converting at once never load a half-written
file, nor does a start after a crash. A kept copy that llama.cpp cannot load all the same
(damaged on disk) is deleted and written again (:func:`discard_copy`). Beside it a
small record (``NAME.gguf.source``) names the source it was made from; whenever a copy
is written, the copies no one can load any more are deleted: those whose source is gone
or changed (a deleted virtual environment, a reinstalled package), the earlier copies of
the same source (another llama.cpp version), and copies without a record.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path

import llama_cpp
from llama_cpp._internals import LlamaModel
from llama_cpp._logger import set_verbose

from .._cache import (
    CACHE_ENV_VAR,
    cache_directory,
    partial_path,
    remove_abandoned,
    remove_all_abandoned,
)
from .._errors import SlotflightError

__all__ = [
    "AUTO",
    "CACHE_ENV_VAR",
    "QUANTIZATIONS",
    "cache_directory",
    "converted_copy",
    "discard_copy",
    "file_type",
    "resolve_quantization",
    "weights_to_load",
]

AUTO = "auto"
"""Convert the packaged model to :data:`PACKAGED_QUANTIZATION`; load any other file as it is."""

PACKAGED_QUANTIZATION = "q8_0"

QUANTIZATIONS: Mapping[str, int] = {
    "f16": llama_cpp.LLAMA_FTYPE_MOSTLY_F16,
    "q4_0": llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_0,
    "q8_0": llama_cpp.LLAMA_FTYPE_MOSTLY_Q8_0,
}
"""The formats a model can be converted to, by name: llama.cpp's ``enum llama_ftype``
(the GGUF key ``general.file_type``)."""

_FORMATS = "|".join(map(re.escape, QUANTIZATIONS))
_COPY_NAME = re.compile(rf"\A.+\.[0-9a-f]{{16}}\.(?:{_FORMATS})\.gguf\Z")
"""How :func:`converted_copy` names a copy; nothing else in the folder is one."""

_RECORD_SUFFIX = ".source"
_RECORD_BYTES = 64 * 1024


def resolve_quantization(quantization: str | None, *, packaged: bool) -> str | None:
    """The format to convert to (``None``: load the file as it is).

    Raises:
        SlotflightError: ``invalid_quantization`` for a name not in :data:`QUANTIZATIONS`.
    """
    if quantization == AUTO:
        return PACKAGED_QUANTIZATION if packaged else None
    if quantization is None or quantization in QUANTIZATIONS:
        return quantization
    known = ", ".join([AUTO, *QUANTIZATIONS])
    raise SlotflightError(
        f"unknown quantization {quantization!r}; use one of {known}, or None",
        code="invalid_quantization",
    )


def file_type(path: Path) -> int | None:
    """The GGUF file's ``general.file_type`` (its weights' format), if it says."""
    params = llama_cpp.llama_model_default_params()
    params.vocab_only = True
    model = LlamaModel(path_model=str(path), params=params, verbose=False)
    try:
        value = model.metadata().get("general.file_type")
    finally:
        model.close()  # type: ignore[no-untyped-call]
    return int(value) if value is not None and value.isdigit() else None


def converted_copy(
    source: Path, quantization: str, directory: Path, threads: int
) -> tuple[Path, bool]:
    """``source``'s weights in ``quantization``'s format, and whether this call wrote them.

    The source itself when it is in that format already; otherwise the cached copy,
    made first if there is none. Runs llama.cpp's native code: call it in a process
    whose crash costs nothing (the generating process).

    Raises:
        SlotflightError: ``model_conversion_failed`` when the copy cannot be written.
    """
    stat = source.stat()
    key = f"{source}\0{stat.st_size}\0{stat.st_mtime_ns}\0{llama_cpp.__version__}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    target = directory / f"{source.stem}.{digest}.{quantization}.gguf"
    if target.is_file():  # every start after the first: no need to read the source
        if not _record_of(target).is_file():  # a copy written before records were kept
            with contextlib.suppress(OSError):  # without one, the next writer deletes it
                _write_record(target, source, stat)
        return target, False
    ftype = QUANTIZATIONS[quantization]
    if file_type(source) == ftype:
        return source, False
    remove_abandoned(target)
    partial = partial_path(target)
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = ftype
    params.allow_requantize = True
    params.nthread = threads
    set_verbose(False)  # llama.cpp logs a line per tensor otherwise
    try:
        directory.mkdir(parents=True, exist_ok=True)
        status = llama_cpp.llama_model_quantize(
            str(source).encode(), str(partial).encode(), ctypes.byref(params)
        )
        if status != 0:
            raise OSError(f"llama_model_quantize returned {status}")
        _flush_to_disk(partial)
        _write_record(target, source, stat)
        os.replace(partial, target)
    except OSError as exc:
        with contextlib.suppress(OSError):  # a folder that cannot be made holds nothing
            partial.unlink(missing_ok=True)
        raise SlotflightError(
            f"could not convert {str(source)!r} to {quantization} in {str(directory)!r}: {exc}",
            code="model_conversion_failed",
        ) from exc
    remove_unused_copies(directory, keep=target, source=source)
    return target, True


def discard_copy(copy: Path) -> None:
    """Delete a converted copy and its record (one llama.cpp could not load), so that
    the next :func:`converted_copy` writes it again. Never a file not named as a copy."""
    if not _COPY_NAME.match(copy.name):
        return
    for path in (copy, _record_of(copy)):
        with contextlib.suppress(OSError):
            path.unlink(missing_ok=True)


def _flush_to_disk(path: Path) -> None:
    """Wait until ``path``'s bytes are on disk, so that the rename that follows never
    names a file a crash cut short."""
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def remove_unused_copies(directory: Path, *, keep: Path, source: Path) -> None:
    """Delete the converted copies in ``directory`` that no one can load any more, and
    the partial files of writers that are gone.

    A copy is kept while the source its record names exists with the size and
    modification time recorded, unless that source is ``source`` (whose copy now is
    ``keep``: the others were made from an earlier state of it or by another llama.cpp).
    A copy without a readable record is deleted: it came before records were kept, and
    whoever still loads it writes it again (about a second for the packaged model).
    Files not named as copies (models joined from split packages, the user's own) are
    never touched. Runs only after a conversion, so a start that finds its copy does no
    more than before.
    """
    try:
        entries = list(directory.iterdir())
    except OSError:
        return
    names = {entry.name for entry in entries}
    for entry in entries:
        name = entry.name
        if entry == keep or not _COPY_NAME.match(name) or _loadable(entry, source):
            continue
        with contextlib.suppress(OSError):
            entry.unlink()
        with contextlib.suppress(OSError):
            _record_of(entry).unlink(missing_ok=True)
    for name in names:  # records whose copy is gone
        if name.endswith(_RECORD_SUFFIX) and name[: -len(_RECORD_SUFFIX)] not in names:
            with contextlib.suppress(OSError):
                (directory / name).unlink()
    remove_all_abandoned(directory)


def _record_of(copy: Path) -> Path:
    return copy.with_name(copy.name + _RECORD_SUFFIX)


def _write_record(copy: Path, source: Path, stat: os.stat_result) -> None:
    """Name ``copy``'s source beside it (written whole or not at all)."""
    record = _record_of(copy)
    partial = partial_path(record)
    text = json.dumps({"source": str(source), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns})
    try:
        partial.write_text(text, encoding="utf-8")
        os.replace(partial, record)
    finally:
        with contextlib.suppress(OSError):
            partial.unlink(missing_ok=True)


def _loadable(copy: Path, source: Path) -> bool:
    """Whether someone may still load ``copy``: its recorded source, other than
    ``source``, exists as it was when the copy was made."""
    try:
        with _record_of(copy).open("rb") as file:
            record = json.loads(file.read(_RECORD_BYTES))
        recorded = Path(record["source"])
        size, mtime_ns = int(record["size"]), int(record["mtime_ns"])
        if recorded == source:
            return False
        now = recorded.stat()
    except (OSError, ValueError, TypeError, KeyError):
        return False
    return now.st_size == size and now.st_mtime_ns == mtime_ns


def weights_to_load(
    source: Path,
    quantization: str | None,
    threads: int,
    *,
    required: bool = False,
    directory: Path | None = None,
) -> tuple[Path, bool, str]:
    """The file to load for ``source`` in ``quantization``'s format (``None``: the
    source as it is; :func:`resolve_quantization` says which), whether it was converted
    just now, and why not the asked-for format when the conversion failed and was not
    ``required`` (the source is loaded as it is then). ``directory``: where converted
    copies are kept (:func:`cache_directory` by default).

    Raises:
        SlotflightError: ``model_conversion_failed`` when a ``required`` conversion fails.
    """
    if quantization is None:
        return source, False, ""
    try:
        path, converted = converted_copy(
            source, quantization, directory or cache_directory(), threads
        )
    except SlotflightError as exc:
        if required:
            raise
        return source, False, str(exc)
    return path, converted, ""
