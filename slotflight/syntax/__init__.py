"""Frame syntaxes: how slot values are written as text, and read back.

Every syntax is one object (:class:`~.base.Syntax`) that owns its lexer, writer,
grammar and prompt templates; the registry below names them, and
:data:`DEFAULT_SYNTAX` is the one every entry point uses unless told otherwise
(the SDK, :class:`~slotflight.Assembler`, :func:`~slotflight.prompt`,
:func:`grammar`, :func:`render_frames`, the CLI and the gateway).

- ``v1``: tag frames, wire-compatible with slot-flight (:mod:`.tags`).
- ``v2``: one line per value, numeric ids (:mod:`.lines`).
- ``v3``: one line per value, slots named by their shortest unambiguous path.
- ``v3-quoted``: as ``v3``, text values written as JSON strings.
- ``v4``: as ``v3``, every list written as a block: its name alone on a line, then one
  ``- `` line per item (:mod:`.lines.blocks`); a text value may be a JSON string.
- ``v4-quoted``: as ``v4``, each item of a list of texts written as a JSON string
  (``- "Hannah Schmidt"``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from pydantic import BaseModel

from ..plan.instance import walk_instance
from ..plan.model import SlotPlan
from .base import Syntax
from .lines import LineSyntax
from .lines.blocks import BlockSyntax
from .tags import TAGS

__all__ = ["DEFAULT_SYNTAX", "SYNTAXES", "Syntax", "get_syntax", "grammar", "render_frames"]

SYNTAXES: Final[Mapping[str, Syntax]] = {
    s.name: s
    for s in (
        TAGS,
        LineSyntax(
            "v2",
            ids="numeric",
            quoted=False,
            templates="v2",
            summary="one line per value, numeric ids: 3 value",
        ),
        LineSyntax(
            "v3",
            ids="named",
            quoted=False,
            templates="v3",
            summary="one line per value, named ids: owner: value",
        ),
        LineSyntax(
            "v3-quoted",
            ids="named",
            quoted=True,
            templates="v3",
            summary='one line per value, named ids, JSON strings: owner: "value"',
        ),
        BlockSyntax(
            "v4",
            templates="v4",
            summary="as v3, lists as blocks: tags: then one - value line per item",
        ),
        BlockSyntax(
            "v4-quoted",
            templates="v4",
            summary='as v4, a list\'s text items as JSON strings: - "value" (other text may be)',
            quoted_items=True,
        ),
    )
}
"""Every registered frame syntax by name (``v1``, ``v2``, ``v3``, ``v3-quoted``, ``v4``,
``v4-quoted``). A syntax
registered here gets the whole syntax contract suite of the tests."""

DEFAULT_SYNTAX: Final = "v4"
"""The frame syntax every entry point uses unless told otherwise: ``v4``, named lines
(``owner: value``) with every list written as a block (its name alone on a line, then
``- item`` lines). It reads every ``v3`` answer as ``v3`` does, except text that starts
with a quote, which it reads as a JSON string."""


def get_syntax(syntax: str | Syntax | None = None) -> Syntax:
    """The syntax named ``syntax`` (a :class:`Syntax` is returned as is; ``None`` is the
    default). :class:`ValueError` for an unknown name."""
    if syntax is None:
        syntax = DEFAULT_SYNTAX
    if isinstance(syntax, Syntax):
        return syntax
    found = SYNTAXES.get(syntax) if isinstance(syntax, str) else None
    if found is None:
        raise ValueError(f"unknown frame syntax {syntax!r} (known: {', '.join(sorted(SYNTAXES))})")
    return found


def render_frames(
    plan: SlotPlan, instance: Mapping[str, Any] | BaseModel, syntax: str | Syntax | None = None
) -> str:
    """The canonical frame text of a valid ``instance`` (a mapping or a model)."""
    return get_syntax(syntax).write(plan, walk_instance(plan, instance))


def grammar(
    plan: SlotPlan, syntax: str | Syntax | None = None, *, max_string_chars: int | None = None
) -> str:
    """The GBNF grammar (root rule ``root``) of the frame streams valid for ``plan``.

    ``max_string_chars``: compact mode for small models. String values are then one
    line of at least one and at most that many characters (and the slot's
    ``maxLength``), which stops a small model from running on inside a value until its
    token limit. The default grammar admits every valid frame stream, multi-line strings
    included.
    """
    return get_syntax(syntax).grammar(plan, max_string_chars=max_string_chars)
