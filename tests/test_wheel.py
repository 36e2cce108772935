"""The package as users install it: a built wheel in a fresh virtualenv, core extras only.

``pip install slotflight`` must give a working ``import slotflight`` and CLI: the
prompt templates and benchmark tasks ship inside the wheel, and a command whose extra
is missing says which one to install instead of failing with a traceback.
"""

from __future__ import annotations

import json
import subprocess
import sys
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _run(*command: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(c) for c in command], capture_output=True, text=True, timeout=600, cwd=cwd
    )


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The ``bin`` folder of a fresh virtualenv holding the wheel built from this tree."""
    work = tmp_path_factory.mktemp("wheel")
    built = _run(sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", work, ROOT)
    assert built.returncode == 0, built.stderr
    (wheel,) = work.glob("slotflight-*.whl")
    venv.create(work / "venv", with_pip=True)
    bin_dir = work / "venv" / "bin"
    done = _run(bin_dir / "python", "-m", "pip", "install", "-q", wheel)
    assert done.returncode == 0, done.stderr
    return bin_dir


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
