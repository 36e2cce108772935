"""The prompt templates: Jinja2 files under ``prompts/<syntax>/``.

Installed from a wheel, the templates live in the package (``slotflight/prompts``);
in a source checkout they live in the repository's top-level ``prompts/`` folder.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import jinja2

__all__ = ["prompts_dir", "template"]


def prompts_dir() -> Path:
    """The folder holding ``v1/prompt.j2`` and its siblings."""
    packaged = Path(__file__).resolve().parent.parent / "prompts"
    if packaged.is_dir():
        return packaged
    checkout = Path(__file__).resolve().parent.parent.parent / "prompts"
    if checkout.is_dir():
        return checkout
    raise FileNotFoundError(f"prompt templates not found in {packaged} or {checkout}")


@cache
def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(prompts_dir()),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )


def template(syntax: str, name: str) -> jinja2.Template:
    """The template ``prompts/<syntax>/<name>``; :class:`ValueError` if there is none."""
    try:
        return _environment().get_template(f"{syntax}/{name}")
    except jinja2.TemplateNotFound:
        raise ValueError(f"no template {name!r} for frame syntax {syntax!r}") from None
