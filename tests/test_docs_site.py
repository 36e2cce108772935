"""The documentation site builds with ``--strict``, its API reference covers the whole
public surface, and a broken link fails the build.

The site is built by MkDocs itself (``python -m mkdocs build --strict``) from
``mkdocs.yml``, as ``make docs`` builds it, into a temporary folder.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import slotflight

griffe = pytest.importorskip("griffe", reason="the docs extra is not installed")

ROOT = Path(__file__).resolve().parent.parent


def _build(root: Path, site: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(site)],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    built = _build(ROOT, out)
    assert built.returncode == 0, built.stderr
    assert "WARNING" not in built.stderr, built.stderr
    return out


def test_every_public_name_has_a_reference_entry(site: Path) -> None:
    page = (site / "api" / "index.html").read_text(encoding="utf-8")
    entries = set(re.findall(r'id="slotflight\.([A-Za-z_]+)"', page))
    assert set(slotflight.__all__) <= entries, set(slotflight.__all__) - entries
    assert entries <= set(slotflight.__all__), "the reference shows private names"


def test_every_public_name_has_a_docstring() -> None:
    package = griffe.load("slotflight", search_paths=[str(ROOT)])
    missing = [
        name
        for name in slotflight.__all__
        if not (package[name].docstring and package[name].docstring.value.strip())
    ]
    assert not missing


def test_every_page_is_built(site: Path) -> None:
    for page in (ROOT / "docs").glob("*.md"):
        name = "" if page.stem == "index" else page.stem
        assert (site / name / "index.html").is_file(), page.name
    # a repository file a page links to is in the site, with the page's link to it
    assert (site / "repo" / "benchmarks" / "results" / "bench-smollm2.png").is_file()
    assert "../repo/benchmarks/results/bench-smollm2.png" in (
        site / "bench" / "index.html"
    ).read_text(encoding="utf-8")


def test_a_broken_link_fails_the_build(tmp_path: Path) -> None:
    root = tmp_path / "checkout"
    root.mkdir()
    shutil.copy(ROOT / "mkdocs.yml", root / "mkdocs.yml")
    shutil.copytree(ROOT / "docs", root / "docs")
    for name in ("slotflight", "benchmarks"):
        (root / name).symlink_to(ROOT / name)
    index = root / "docs" / "index.md"
    index.write_text(
        index.read_text(encoding="utf-8")
        + "\n[gone](no-such-page.md) [moved](../benchmarks/results/no-such-file.md)"
        + " [anchor](sdk.md#no-such-section)\n",
        encoding="utf-8",
    )
    built = _build(root, tmp_path / "site")
    assert built.returncode != 0
    for target in ("no-such-page.md", "no-such-file.md", "no-such-section"):
        assert target in built.stderr, built.stderr
