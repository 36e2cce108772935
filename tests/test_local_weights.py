"""The weight format the local engine loads: the packaged model as a cached Q8_0 copy."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from openai import OpenAI

from tests.conftest import files_in
from tests.local_support import require_local_model

require_local_model()

import llama_cpp  # noqa: E402

from slotflight import SlotflightError  # noqa: E402
from slotflight.local import (  # noqa: E402
    CACHE_ENV_VAR,
    QUANTIZATIONS,
    LocalEngine,
    cache_directory,
    default_model_path,
    start_local_server,
)
from slotflight.local._weights import converted_copy, file_type  # noqa: E402

Q4_1 = llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_1  # the packaged model's file type

pytestmark = pytest.mark.local_model


def test_the_cache_folder_follows_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CACHE_ENV_VAR, str(tmp_path / "mine"))
    assert cache_directory() == tmp_path / "mine"
    monkeypatch.delenv(CACHE_ENV_VAR)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_directory() == tmp_path / "xdg" / "slotflight"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_directory() == tmp_path / "home" / ".cache" / "slotflight"


def test_the_packaged_model_is_loaded_as_a_q8_0_copy_made_once(cache: Path) -> None:
    packaged = default_model_path()
    assert file_type(packaged) == Q4_1
    first = LocalEngine(seed=1)
    try:
        assert first.model_path == packaged
        assert first.converted is True
        assert first.weights_path.parent == cache
        assert file_type(first.weights_path) == QUANTIZATIONS["q8_0"]
        copy = first.weights_path.name  # and its record; no partial file left
        assert files_in(cache) == [copy, f"{copy}.source"]
        written = first.weights_path.stat().st_mtime_ns
        with start_local_server(engine=first) as server:
            client = OpenAI(base_url=server.base_url, api_key="local", max_retries=0)
            reply = client.chat.completions.create(
                model=server.model,
                messages=[
                    {"role": "user", "content": "What colour is the sky on a clear day? One word."}
                ],
                max_tokens=16,
                temperature=0,
            )
        assert "blue" in (reply.choices[0].message.content or "").lower()
        assert server.model == packaged.stem  # the model's name stays the file's
    finally:
        first.close()
    second = LocalEngine(seed=1)
    try:
        assert second.converted is False
        assert second.weights_path == first.weights_path
        assert second.weights_path.stat().st_mtime_ns == written
    finally:
        second.close()


def test_none_loads_the_file_as_it_is(cache: Path) -> None:
    engine = LocalEngine(quantization=None)
    try:
        assert engine.weights_path == engine.model_path == default_model_path()
        assert engine.converted is False
    finally:
        engine.close()
    assert files_in(cache) == []


def test_a_named_file_loads_as_it_is_unless_a_format_is_named(tmp_path: Path, cache: Path) -> None:
    mine = tmp_path / "mine.gguf"
    shutil.copyfile(default_model_path(), mine)
    engine = LocalEngine(mine)
    try:
        assert engine.weights_path == mine.resolve()
    finally:
        engine.close()
    assert files_in(cache) == []
    engine = LocalEngine(mine, quantization="q4_0")
    try:
        assert engine.converted is True
        assert engine.weights_path.parent == cache
        assert engine.weights_path.name.startswith("mine.")
        assert file_type(engine.weights_path) == QUANTIZATIONS["q4_0"]
    finally:
        engine.close()


def test_a_file_already_in_the_format_is_not_copied(tmp_path: Path) -> None:
    copy, converted = converted_copy(default_model_path(), "q8_0", tmp_path, threads=1)
    assert converted is True
    again, converted = converted_copy(copy, "q8_0", tmp_path / "other", threads=1)
    assert (again, converted) == (copy, False)
    assert not (tmp_path / "other").exists()


def test_a_partial_copy_of_a_dead_process_is_removed_and_a_live_one_s_kept(
    tmp_path: Path,
) -> None:
    source = default_model_path()
    copy, _ = converted_copy(source, "q8_0", tmp_path, threads=1)
    copy.unlink()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    abandoned = tmp_path / f".{copy.name}.{dead.pid}.partial"
    running = tmp_path / f".{copy.name}.{os.getppid()}.partial"
    for partial in (abandoned, running):
        partial.write_bytes(b"half a model")
    again, converted = converted_copy(source, "q8_0", tmp_path, threads=1)
    assert (again, converted) == (copy, True)
    assert files_in(tmp_path) == sorted([running.name, copy.name, f"{copy.name}.source"])


def test_a_changed_source_gets_a_new_copy(tmp_path: Path) -> None:
    mine = tmp_path / "mine.gguf"
    shutil.copyfile(default_model_path(), mine)
    first, _ = converted_copy(mine, "q8_0", tmp_path / "cache", threads=1)
    mine.touch()  # a new modification time: the file may hold other weights now
    second, converted = converted_copy(mine, "q8_0", tmp_path / "cache", threads=1)
    assert converted is True
    assert second != first
    assert files_in(tmp_path / "cache") == [second.name, f"{second.name}.source"]


def test_writing_a_copy_deletes_the_copies_no_one_can_load(tmp_path: Path) -> None:
    """A copy stays while the file it was made from is there as it was; copies of gone or
    changed sources, and copies without a record, go when the next copy is written."""
    cache = tmp_path / "cache"
    sources = {name: tmp_path / name / "model.gguf" for name in ("gone", "kept", "new")}
    copies = {}
    for name, source in sources.items():
        if name != "new":
            source.parent.mkdir()
            shutil.copyfile(default_model_path(), source)
            copies[name] = converted_copy(source, "q8_0", cache, threads=1)[0]
    assert copies["gone"] != copies["kept"]  # one copy per source path
    shutil.rmtree(sources["gone"].parent)  # a virtual environment deleted
    unrecorded = cache / "model.0123456789abcdef.q4_0.gguf"  # written before records
    unrecorded.write_bytes(b"weights")
    others = {  # files the cache holds that are not converted copies
        "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf": b"joined from split packages",
        "notes.gguf": b"the user's own",
    }
    for name, data in others.items():
        (cache / name).write_bytes(data)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    abandoned = cache / f".qwen2.5-coder-1.5b-instruct-q4_k_m.gguf.{dead.pid}.partial"
    abandoned.write_bytes(b"half")
    before = files_in(cache)
    assert converted_copy(sources["kept"], "q8_0", cache, threads=1) == (copies["kept"], False)
    assert files_in(cache) == before  # a start that finds its copy deletes nothing

    sources["new"].parent.mkdir()
    shutil.copyfile(default_model_path(), sources["new"])
    new, converted = converted_copy(sources["new"], "q8_0", cache, threads=1)
    assert converted is True
    kept = [copies["kept"].name, new.name]
    assert files_in(cache) == sorted([*others, *kept, *(f"{name}.source" for name in kept)])


def test_a_copy_found_without_a_record_gets_one_and_is_kept(tmp_path: Path) -> None:
    source = tmp_path / "model.gguf"
    shutil.copyfile(default_model_path(), source)
    copy, _ = converted_copy(source, "q8_0", tmp_path / "cache", threads=1)
    record = copy.with_name(f"{copy.name}.source")
    record.unlink()  # as a copy written before records were kept
    assert converted_copy(source, "q8_0", tmp_path / "cache", threads=1) == (copy, False)
    assert record.is_file()
    other = tmp_path / "other.gguf"
    shutil.copyfile(default_model_path(), other)
    converted_copy(other, "q8_0", tmp_path / "cache", threads=1)
    assert copy.is_file()  # its source is there as it was: someone may load it


def test_an_unwritable_cache_loads_the_file_as_it_is_unless_a_format_was_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv(CACHE_ENV_VAR, str(blocker / "cache"))
    with caplog.at_level(logging.WARNING, logger="slotflight.local"):
        engine = LocalEngine()
    try:
        assert engine.weights_path == default_model_path()
        assert "model_conversion_failed" in caplog.text
    finally:
        engine.close()
    with pytest.raises(SlotflightError) as raised:
        LocalEngine(quantization="q8_0")
    assert raised.value.code == "model_load_failed"
    assert "model_conversion_failed" in raised.value.message


def test_an_unknown_format_is_refused_before_anything_loads() -> None:
    with pytest.raises(SlotflightError) as raised:
        LocalEngine(quantization="q3_k")
    assert raised.value.code == "invalid_quantization"
    assert "q8_0" in raised.value.message
