"""MkDocs hook: files of the repository outside ``docs/`` that a page links to.

The pages link to committed results as they sit in the repository
(``../benchmarks/results/schemas.md``), which reads right on GitHub. For the site, each
such file that exists is added under ``repo/`` and the link rewritten to it, so the
site holds it and ``--strict`` still checks every link: a target that does not exist
is left as written and fails the build as a broken link.
"""

from __future__ import annotations

import os
import posixpath
import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files, InclusionLevel

_LINK = re.compile(r"\]\((\.\./[^)\s#]+)")
_PREFIX = "repo"


def _targets(docs: Path, root: Path, page: str, markdown: str) -> dict[str, str]:
    """Each ``../`` link of ``page`` to an existing file of the repository outside
    ``docs/``, with the path it gets in the site."""
    found: dict[str, str] = {}
    for link in _LINK.findall(markdown):
        target = Path(os.path.normpath(docs / posixpath.dirname(page) / link))
        if target.is_file() and root in target.parents and docs not in target.parents:
            found[link] = f"{_PREFIX}/{target.relative_to(root).as_posix()}"
    return found


def _folders(config: Any) -> tuple[Path, Path]:
    """The docs folder and the repository root (the folder of mkdocs.yml), absolute
    (symbolic links are kept: a linked folder counts as part of the repository)."""
    docs = Path(os.path.abspath(config["docs_dir"]))
    return docs, Path(os.path.abspath(config["config_file_path"])).parent


def on_files(files: Files, config: Any) -> Files:
    docs, root = _folders(config)
    added: set[str] = set()
    for page in list(files.documentation_pages()):
        text = Path(page.abs_src_path or "").read_text(encoding="utf-8")
        for uri in _targets(docs, root, page.src_uri, text).values():
            if uri not in added:
                added.add(uri)
                source = root / uri.removeprefix(f"{_PREFIX}/")
                files.append(
                    File.generated(
                        config,
                        uri,
                        abs_src_path=str(source),
                        inclusion=InclusionLevel.NOT_IN_NAV,
                    )
                )
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    docs, root = _folders(config)
    here = posixpath.dirname(page.file.src_uri)
    for link, uri in _targets(docs, root, page.file.src_uri, markdown).items():
        markdown = markdown.replace(f"]({link}", f"]({posixpath.relpath(uri, here or '.')}")
    return markdown
