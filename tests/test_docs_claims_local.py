"""docs/local.md against the code: the options table and the bounds table give each
option's default as the code has it and leave none out, the command line's flags are
the ones listed, and the request fields are read as the page says. Nothing here loads
a model."""

from __future__ import annotations

import ast
import inspect
import json
import re
from pathlib import Path
from typing import Any

import pytest

from slotflight._errors import SlotflightError
from slotflight.cli import build_parser
from slotflight.local import (
    GrammarLimits,
    LocalEngine,
    create_app,
    serve_local,
    start_local_server,
)
from slotflight.local._request import parse_chat_request

PAGE = (Path(__file__).resolve().parent.parent / "docs" / "local.md").read_text("utf-8")

_NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")
_UNITS = {"s": 1, "KiB": 2**10, "MiB": 2**20}


def default(cell: str) -> Any:
    """A default as a table cell writes it: ``4096``, ``2,000``, ``60 s``, ``1 MiB``,
    a Python literal or ``GrammarLimits()`` in backticks; ``None`` for words (``see
    above``, ``every usable core``, ``llama.cpp's default``)."""
    text = cell.strip().strip("`")
    number, _, unit = text.partition(" ")
    if _NUMBER.fullmatch(number) and (not unit or unit in _UNITS):
        value = float(number.replace(",", "")) * _UNITS.get(unit, 1)
        return int(value) if value.is_integer() else value
    if text == "GrammarLimits()":
        return GrammarLimits()
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text if re.fullmatch(r"[\w.]+", text) else None


def table_rows(heading: str) -> list[list[str]]:
    """The body rows of the first table after ``heading``, as cells."""
    rest = PAGE[PAGE.index(heading) :]
    lines = rest[rest.index("\n|") + 1 :].split("\n")
    rows = []
    for line in lines[2:]:  # after the header and its rule
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def option_rows() -> dict[str, tuple[str, Any]]:
    """The options table: Python name -> (flag, default)."""
    return {
        row[1].strip("`"): (row[0].strip("`"), default(row[2])) for row in table_rows("## Options")
    }


def test_the_options_table_leaves_no_option_out() -> None:
    documented = set(option_rows())
    engine = set(inspect.signature(LocalEngine).parameters) - {"stream_buffer"}  # deprecated
    assert documented == set(inspect.signature(serve_local).parameters) | engine


@pytest.mark.parametrize(
    "target", [serve_local, LocalEngine, create_app, start_local_server], ids=lambda t: t.__name__
)
def test_the_options_table_gives_each_default(target: Any) -> None:
    parameters = inspect.signature(target).parameters
    # start_local_server serves on a free port, and its own start_timeout bounds
    # uvicorn's start (the page says so), unlike the table's; the model path's default
    # is a search.
    own = {"port", "start_timeout", "model_path"} if target is start_local_server else set()
    for name, (_, documented) in option_rows().items():
        if name in parameters and name not in own and name != "model_path":
            assert parameters[name].default == documented, name


def test_the_command_line_flags_are_the_listed_ones() -> None:
    flags = {
        flag.removeprefix("--"): documented
        for flag, documented in option_rows().values()
        if flag.startswith("--")
    }
    parsed = vars(build_parser().parse_args(["local-server"]))
    given = {key: parsed[key] for key in parsed if key not in ("command", "func")}
    assert set(given) == set(flags)
    for flag, documented in flags.items():
        assert given[flag] == documented, flag


def test_the_bounds_table_gives_each_default() -> None:
    limits = GrammarLimits()
    options = {
        **{name: p.default for name, p in inspect.signature(LocalEngine).parameters.items()},
        **{name: p.default for name, p in inspect.signature(serve_local).parameters.items()},
    }
    checked = 0
    for bound, documented, change, _ in table_rows("## Bounds"):
        limit = re.fullmatch(r"`GrammarLimits\((\w+)=\.\.\.\)`", change)
        if limit is not None:
            assert getattr(limits, limit[1]) == default(documented), bound
            checked += 1
        elif re.fullmatch(r"`\w+`", change) and default(documented) is not None:
            assert options[change.strip("`")] == default(documented), bound
            checked += 1
    assert checked >= 15


def chat(**fields: Any) -> Any:
    return parse_chat_request(
        json.dumps({"messages": [{"role": "user", "content": "hi"}], **fields}).encode()
    )


def refused_code(**fields: Any) -> str:
    with pytest.raises(SlotflightError) as refused:
        chat(**fields)
    return refused.value.code


def test_the_request_fields_are_read_as_documented() -> None:
    plain = chat()
    # "| `temperature` | 0 to 2, default 0.8" and "| `top_p` | 0 to 1, default 0.95"
    assert (plain.temperature, plain.top_p) == (0.8, 0.95)
    assert "0 to 2, default 0.8" in PAGE and "0 to 1, default 0.95" in PAGE
    assert chat(max_tokens=5, max_completion_tokens=7).max_tokens == 7
    assert chat(stop=["x"] * 16).stop == ("x",) * 16
    assert refused_code(stop=["x"] * 17) == refused_code(stop="") == "invalid_value"
    assert chat(seed=2**32 - 1).seed == 2**32 - 1
    assert refused_code(seed=2**32) == "invalid_value"
    for field in ("tools", "tool_choice", "functions", "function_call"):
        assert refused_code(**{field: "auto"}) == "unsupported_parameter", field
        assert f"`{field}`" in PAGE
    assert refused_code(n=True) == refused_code(n=1.0) == "invalid_value"
    assert refused_code(n=2) == refused_code(top_logprobs=2) == "unsupported_parameter"
    assert chat(messages=[{"role": "developer", "content": "x"}]).messages[0]["role"] == "system"
