"""docs/web.md against the code: the ``slotflight serve`` usage, the request options, the
gateway's and the stores' defaults, and the route helper's, as the page states them."""

from __future__ import annotations

import argparse
import ast
import inspect
import json
import re
from pathlib import Path
from typing import Any, get_args

import pytest

from slotflight.syntax import SYNTAXES
from slotflight.web import (
    DEFAULT_COALESCE_MS,
    FULL_MODE_MIN_COALESCE_MS,
    MemoryEventStore,
    RedisEventStore,
    add_serve_arguments,
    create_app,
    slot_event_response,
)
from slotflight.web._request import StreamRequestOptions
from slotflight.web._sse import MIN_PING_S
from tests.test_docs_claims_testing import documented_parameters

PAGE = (Path(__file__).resolve().parent.parent / "docs" / "web.md").read_text("utf-8")


def flat(text: str) -> str:
    """``text`` with every run of blanks and line breaks one space."""
    return " ".join(text.split())


def block_after(heading: str) -> str:
    """The first fenced block after ``heading``."""
    rest = PAGE[PAGE.index(heading) :]
    start = rest.index("```")
    start = rest.index("\n", start) + 1
    return rest[start : rest.index("```", start)]


def paragraph_from(opening: str) -> str:
    """The paragraph of the page that begins with ``opening``, on one line."""
    start = PAGE.index(opening)
    end = PAGE.find("\n\n", start)
    return flat(PAGE[start : end if end != -1 else len(PAGE)])


def test_the_serve_usage_shows_every_option_with_its_default() -> None:
    usage = block_after("## The gateway: `slotflight serve`")
    shown = dict(re.findall(r"(--[a-z-]+)(?: ([^\]\s]+))?", usage))
    parser = argparse.ArgumentParser()
    add_serve_arguments(parser)
    options = [a for a in parser._actions if a.option_strings and a.dest != "help"]
    assert {a.option_strings[0] for a in options} == set(shown)
    for action in options:
        if action.default in (None, ""):
            continue  # the usage shows an example value
        given = shown[action.option_strings[0]]
        read = action.type(given) if callable(action.type) else given
        assert read == action.default, action.option_strings[0]


def documented_options() -> dict[str, Any]:
    """The ``options`` object of the page's ``POST /v1/slot-streams`` example."""
    example = block_after("`POST /v1/slot-streams` with")
    found = re.search(r'"options": (\{.*?\})', example, re.S)
    assert found is not None
    options: dict[str, Any] = json.loads(found[1])
    return options


def test_the_request_example_shows_every_option_with_its_default() -> None:
    # "the values shown are the defaults, except `temperature` and `max_tokens`, which
    # are left to the model server when absent"
    shown = documented_options()
    defaults = StreamRequestOptions().model_dump()
    assert set(shown) == set(defaults)
    assert defaults["temperature"] is None and defaults["max_tokens"] is None
    for name, default in defaults.items():
        if name not in ("temperature", "max_tokens"):
            assert shown[name] == default, name


def _bounds(name: str) -> tuple[float, float]:
    """The ``ge`` and ``le`` of a request option."""
    metadata = StreamRequestOptions.model_fields[name].metadata
    low = next(m.ge for m in metadata if hasattr(m, "ge"))
    high = next(m.le for m in metadata if hasattr(m, "le"))
    return low, high


def test_the_documented_option_bounds_and_values_are_the_checked_ones() -> None:
    text = paragraph_from("(messages are `system`, `user` or `assistant`")
    ranges = {
        name: (float(low.replace(",", "")), float(high.replace(",", "")))
        for name, low, high in re.findall(r"`(\w+)` ([\d,]+) to ([\d,]+)", text)
    }
    assert set(ranges) == {"coalesce_ms", "max_attempts", "temperature", "max_tokens"}
    for name, documented in ranges.items():
        assert documented == _bounds(name), name
    grammar = re.search(r"`grammar` (.*?) \(as in", text)
    assert grammar is not None
    values = [json.loads(v) for v in re.findall(r"`([^`]+)`", grammar[1])]
    annotation = StreamRequestOptions.model_fields["grammar"].annotation
    assert sorted(values, key=repr) == sorted(get_args(annotation), key=repr)
    syntax = re.search(r"`syntax` one of (.*?);", text)
    assert syntax is not None
    assert set(re.findall(r"`([^`]+)`", syntax[1])) == set(SYNTAXES)


def test_the_gateway_defaults_are_the_documented_ones() -> None:
    text = paragraph_from("`create_app(upstream_base_url, ...)` also takes")
    documented = {
        name: ast.literal_eval(given) for name, given in re.findall(r"`(\w+)=([^`]+)`", text)
    }
    parameters = inspect.signature(create_app).parameters
    assert set(documented) == {
        "resume_grace_s",
        "max_active_streams",
        "idle_timeout_s",
        "total_timeout_s",
        "ping_s",
        "retry_ms",
        "drain_s",
    }
    for name, default in documented.items():
        assert parameters[name].default == default, name
    named = set(re.findall(r"`(\w+)=", text)) | {"upstream_base_url"}
    documented_elsewhere = {"api_key", "token", "cors_origins"}
    assert set(parameters) == named | documented_elsewhere


@pytest.mark.parametrize(
    ("name", "target", "not_options"),
    [
        ("MemoryEventStore", MemoryEventStore.__init__, {"self"}),
        # from_url passes its keywords to the constructor, which also takes the client.
        ("RedisEventStore.from_url", RedisEventStore.__init__, {"self", "client", "owns_client"}),
    ],
)
def test_a_store_is_documented_with_its_defaults(
    name: str, target: Any, not_options: set[str]
) -> None:
    documented = dict(documented_parameters(PAGE, name))
    documented.pop("url", None)
    parameters = inspect.signature(target).parameters
    assert set(documented) == set(parameters) - not_options
    for option, default in documented.items():
        assert parameters[option].default == default, option


def test_the_route_helper_defaults_are_the_documented_ones() -> None:
    text = flat(PAGE)
    parameters = inspect.signature(slot_event_response).parameters
    # "The first message carries a `retry:` hint (1000 ms, `retry_ms=`)"
    assert "a `retry:` hint (1000 ms, `retry_ms=`)" in text
    assert parameters["retry_ms"].default == 1000
    # "one short comment line every 15 s while the stream lasts, `ping_s=` (0 turns them
    # off; otherwise at least 1 s"
    assert (
        "every 15 s while the stream lasts, `ping_s=` (0 turns them off; otherwise at least 1 s"
        in text
    )
    assert parameters["ping_s"].default == 15
    assert MIN_PING_S == 1
    # "`coalesce_ms=N` (default 50; 0 sends every delta; in full mode at least 50"
    assert "`coalesce_ms=N` (default 50; 0 sends every delta; in full mode at least 50" in text
    assert parameters["coalesce_ms"].default == DEFAULT_COALESCE_MS == 50
    assert FULL_MODE_MIN_COALESCE_MS == 50
    assert parameters["state_mode"].default == "patch"
