"""docs/testing.md against the code: every signature the page writes out names the
parameters the class takes, in order, with the defaults it has. The readers of
documented signatures here serve the other pages' tests too."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path
from typing import Any

import pytest

from slotflight.testing import AppServer, RandomChunks, Reply, ScriptedServer, Usage

PAGE = (Path(__file__).resolve().parent.parent / "docs" / "testing.md").read_text("utf-8")

_SIZE = re.compile(r"(\d+) (KiB|MiB)")


def documented_call(text: str, name: str) -> str:
    """The longest argument list of a `` `name(...)` `` in ``text`` (the page's
    signature, not a call such as ``Reply(text)``), parentheses balanced (a default
    such as ``()`` inside it included)."""
    calls = []
    for match in re.finditer(re.escape(f"`{name}("), text):
        depth = 1
        for position in range(match.end(), len(text)):
            depth += {"(": 1, ")": -1}.get(text[position], 0)
            if depth == 0:
                calls.append(text[match.end() : position])
                break
    assert calls, f"the page writes no `{name}(...)`"
    return max(calls, key=len)


def split_arguments(arguments: str) -> list[str]:
    """The comma-separated parts of an argument list, outside brackets and quotes."""
    parts, depth, quoted, current = [], 0, False, ""
    for character in arguments:
        if character == '"':
            quoted = not quoted
        elif not quoted and character in "([{":
            depth += 1
        elif not quoted and character in ")]}":
            depth -= 1
        if character == "," and depth == 0 and not quoted:
            parts.append(current.strip())
            current = ""
        else:
            current += character
    if current.strip():
        parts.append(current.strip())
    return parts


def value(text: str) -> Any:
    """A documented default: a Python literal, or a size such as ``8 MiB``."""
    size = _SIZE.fullmatch(text)
    if size is not None:
        return int(size[1]) * {"KiB": 2**10, "MiB": 2**20}[size[2]]
    return ast.literal_eval(text)


def documented_parameters(text: str, name: str) -> list[tuple[str, Any]]:
    """``(parameter, default)`` pairs of the signature ``text`` writes for ``name``;
    the default is :data:`inspect.Parameter.empty` where the page gives none."""
    pairs = []
    for part in split_arguments(" ".join(documented_call(text, name).split())):
        if part == "*":
            continue
        parameter, equals, default = part.partition("=")
        pairs.append((parameter, value(default) if equals else inspect.Parameter.empty))
    return pairs


@pytest.mark.parametrize(
    ("name", "target"),
    [
        ("ScriptedServer", ScriptedServer),
        ("Reply", Reply),
        ("AppServer", AppServer),
        ("RandomChunks", RandomChunks),
        ("Usage", Usage),
    ],
)
def test_a_documented_signature_is_the_code_signature(name: str, target: Any) -> None:
    documented = documented_parameters(PAGE, name)
    actual = inspect.signature(target).parameters
    assert [parameter for parameter, _ in documented] == list(actual)
    for parameter, default in documented:
        if default is not inspect.Parameter.empty:
            assert actual[parameter].default == default, parameter
