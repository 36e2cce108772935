"""Bounds of compiling that no document size bound covers: what regexes compile to, how
deep references nest, how large one enum is; and ``$id`` scopes of copied slot schemas."""

from __future__ import annotations

from typing import Any

import pytest

import slotflight
from slotflight import CompileLimits, SchemaError
from slotflight.plan import instance, validators
from slotflight.plan.compiler import compile
from slotflight.plan.validators import pattern_error, pattern_size
from tests.schema_support import round_trip

# -- regexes ------------------------------------------------------------------------------


@pytest.fixture
def compiled(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The patterns compiled on the engine during the test (none come from the cache)."""
    seen: list[str] = []
    real = validators._compile

    def counting(pattern: str) -> Any:
        seen.append(pattern)
        return real(pattern)

    monkeypatch.setattr(validators, "_compile", counting)
    monkeypatch.setattr(validators, "PATTERNS", validators._PatternCache(validators.CACHE_BYTES))
    return seen


def _pattern_properties(patterns: list[str]) -> dict[str, Any]:
    return {"type": "object", "patternProperties": {p: {"type": "string"} for p in patterns}}


def test_a_pattern_too_large_to_compile_is_refused_before_it_is_compiled(
    compiled: list[str],
) -> None:
    # \w{200} compiles to about 10 MB on the engine (0.1 s): refused from its text
    schema = _pattern_properties([rf"\w{{200}}{i}" for i in range(200)])
    with pytest.raises(SchemaError) as info:
        compile(schema)
    assert info.value.code == "schema_too_large"
    assert "max_pattern_bytes" in str(info.value)
    assert info.value.location.startswith("/patternProperties/")
    assert compiled == []


def test_the_patterns_of_one_schema_are_bounded_together(compiled: list[str]) -> None:
    # each \w{60} is within the bound of one pattern, 200 of them are not
    patterns = [rf"\w{{60}}{i}" for i in range(200)]
    with pytest.raises(SchemaError) as info:
        compile(_pattern_properties(patterns))
    assert "max_total_pattern_bytes" in str(info.value)
    assert len(compiled) == 16_000_000 // pattern_size(patterns[0])
    assert compile(_pattern_properties(patterns[:3])).slots  # a few of them compile


def test_a_pattern_used_again_is_charged_once(compiled: list[str]) -> None:
    pattern = r"^\w{60}$"
    props = {f"p{i}": {"type": "string", "pattern": pattern} for i in range(50)}
    plan = compile({"type": "object", "properties": props})
    assert len(plan.slots) == 51 and compiled == [pattern]


def test_format_regex_defaults_are_charged_to_the_compile(compiled: list[str]) -> None:
    props = {
        f"p{i}": {"type": "string", "format": "regex", "default": rf"\w{{60}}{i}"}
        for i in range(40)
    }
    with pytest.raises(SchemaError, match="max_total_pattern_bytes"):
        compile({"type": "object", "properties": props})
    assert len(compiled) <= 5


def test_pattern_bounds_follow_the_limits() -> None:
    schema = _pattern_properties([r"^\w{1,64}$"])
    assert compile(schema).slots  # about 3.3 MB: within the default
    with pytest.raises(SchemaError, match="max_pattern_bytes"):
        compile(schema, limits=CompileLimits(max_pattern_bytes=1_000_000))
    with pytest.raises(SchemaError, match="max_total_pattern_bytes"):
        compile(schema, limits=CompileLimits(max_total_pattern_bytes=1_000_000))


@pytest.mark.parametrize(
    ("pattern", "low", "high"),
    [
        ("a", 10_000, 12_000),
        (r"^[a-zA-Z0-9_]+$", 10_000, 12_000),
        (r"\w{200}", 10_000_000, 11_000_000),
        (r"(\w{10}){20}", 10_000_000, 11_000_000),
        (r"\d{100}", 500_000, 600_000),
        (r"[^a]{1000}", 1_000_000, 5_000_000),
        (r"(?i)[a-z]{1000}", 300_000, 1_000_000),
        ("a{1000}", 32_000, 200_000),
        (r"\w{1,1000000}", 50_000_000_000, 60_000_000_000),
    ],
)
def test_pattern_size_estimates_the_compiled_size(pattern: str, low: int, high: int) -> None:
    assert low <= pattern_size(pattern) <= high


def test_pattern_size_reads_any_text() -> None:
    for text in ["", "(", ")", "[", "[^", "\\", "\\p", "{", "a{", "a{1,", "(?", "(?P<", "[[:"]:
        assert pattern_size(text) >= 10_000
    assert pattern_size("((((" * 200 + "a{999}" + "){999}" * 200) == 1 << 62


def test_the_pattern_cache_is_bounded_by_what_it_holds(monkeypatch: pytest.MonkeyPatch) -> None:
    cache = validators._PatternCache(1_000_000)
    monkeypatch.setattr(validators, "PATTERNS", cache)
    for i in range(300):
        assert pattern_error(f"^a{i}$") is None  # about 10 KB each
    assert cache.held <= 1_000_000 and len(cache) < 300
    assert pattern_error(r"\d{100}x") is None  # over a quarter of the cache: not kept
    assert r"\d{100}x" not in cache._entries and cache.held <= 1_000_000


# -- nesting ------------------------------------------------------------------------------


def _nested_objects(levels: int) -> dict[str, Any]:
    defs: dict[str, Any] = {
        f"d{i}": {
            "type": "object",
            "properties": {"n": {"$ref": f"#/$defs/d{i + 1}"}},
            "required": ["n"],
            "additionalProperties": False,
        }
        for i in range(levels)
    }
    defs[f"d{levels}"] = {"type": "string"}
    return {"$ref": "#/$defs/d0", "$defs": defs}


def _nested_wrappers(keyword: str, levels: int) -> dict[str, Any]:
    defs: dict[str, Any] = {
        f"d{i}": {keyword: [{"$ref": f"#/$defs/d{i + 1}"}]} for i in range(levels)
    }
    defs[f"d{levels}"] = {"type": "string"}
    return {"type": "object", "properties": {"a": {"$ref": "#/$defs/d0"}}, "$defs": defs}


@pytest.mark.parametrize("levels", [65, 400, 1200])
def test_objects_nested_through_references_are_bounded(levels: int) -> None:
    with pytest.raises(SchemaError) as info:
        compile(_nested_objects(levels))
    assert info.value.code == "schema_too_large"
    assert "max_expansion_depth" in str(info.value)
    assert "unresolvable" not in str(info.value)


@pytest.mark.parametrize("syntax", sorted(slotflight.SYNTAXES))
def test_the_deepest_plan_within_the_bound_has_a_prompt_and_a_grammar(syntax: str) -> None:
    plan = compile(_nested_objects(64))
    assert len(plan.slots[0].segments) == 64
    assert slotflight.prompt(plan, syntax) and slotflight.grammar(plan, syntax)
    instance: Any = "x"
    for _ in range(64):
        instance = {"n": instance}
    round_trip(plan, instance, syntax)


@pytest.mark.parametrize("keyword", ["allOf", "anyOf", "oneOf"])
def test_wrappers_nested_through_references_are_bounded(keyword: str) -> None:
    assert compile(_nested_wrappers(keyword, 60)).slots[0].kind == "string"
    for levels in (70, 1200):
        with pytest.raises(SchemaError, match="max_expansion_depth"):
            compile(_nested_wrappers(keyword, levels))


def test_a_depth_above_the_stack_is_still_a_schema_error() -> None:
    limits = CompileLimits(max_expansion_depth=1_000_000)
    with pytest.raises(SchemaError, match="max_expansion_depth"):
        compile(_nested_objects(1200), limits=limits)
    plan = compile(_nested_objects(400), limits=limits)
    for build in (slotflight.prompt, slotflight.grammar):
        with pytest.raises(SchemaError, match="max_expansion_depth"):
            build(plan)


# -- large enums ----------------------------------------------------------------------------


def test_prompt_and_grammar_are_linear_in_the_size_of_an_enum(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Each member is written once and checked against the members once, by key: a
    # scan of the members per member (what made 16,000 members take 20 s) would be
    # n * n keys.
    size = 20_000
    schema = {
        "type": "object",
        "additionalProperties": False,
        "required": ["code"],
        "properties": {"code": {"description": "A code.", "enum": list(range(size))}},
    }
    plan = compile(schema)
    keys = 0
    real = instance.enum_key

    def counting(value: Any) -> Any:
        nonlocal keys
        keys += 1
        return real(value)

    monkeypatch.setattr(instance, "enum_key", counting)
    for syntax in ("v1", "v4"):
        assert "19999" in slotflight.prompt(plan, syntax)
        assert '"19999"' in slotflight.grammar(plan, syntax)
    assert keys <= 8 * size, keys  # 4 per member now: prompt and grammar, two syntaxes
    round_trip(plan, {"code": 19_999}, "v4")


# -- the prompt's example -------------------------------------------------------------------


def _repeated_example(items: int, chars: int) -> dict[str, Any]:
    """A list whose schema example is ``chars`` long, shown once per item of ``items``."""
    tags = {
        "type": "array",
        "minItems": items,
        "items": {"type": "string", "examples": ["x" * chars]},
    }
    return {"type": "object", "required": ["tags"], "properties": {"tags": tags}}


def test_a_schema_example_repeated_past_the_prompt_bound_is_refused_at_compile() -> None:
    schema = _repeated_example(1000, 100_000)  # 100 KB of schema, 100 million characters
    with pytest.raises(SchemaError, match="max_prompt_chars"):
        compile(schema)
    schema["properties"]["tags"]["minItems"] = 2  # two copies fit: shown in the example
    assert slotflight.prompt(compile(schema)).count("x" * 100_000) == 2


def test_the_prompt_refuses_an_example_past_its_bound_before_writing_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from slotflight.plan import compiler
    from slotflight.prompting import prompt as prompting

    monkeypatch.setattr(compiler, "_own_example_chars", lambda value: 0)
    schema = _repeated_example(50, 10_000)
    plan = compile(schema, limits=CompileLimits(max_prompt_chars=100_000))  # the estimate errs low
    written: list[object] = []
    real = prompting.get_syntax

    def spying(syntax: object) -> object:
        chosen = real(syntax)  # type: ignore[arg-type]
        monkeypatch.setattr(chosen, "write", lambda plan, frames: written.append(1) or "")
        return chosen

    monkeypatch.setattr(prompting, "get_syntax", spying)
    with pytest.raises(SchemaError, match="max_prompt_chars"):
        slotflight.prompt(plan)
    assert written == []  # refused before the example was written


# -- text the prompt and the grammar could not carry ----------------------------------------


@pytest.mark.parametrize(
    ("schema", "where"),
    [
        (
            {"type": "object", "properties": {"e": {"enum": ["\ud800", "b"]}}},
            "/properties/e/enum/0",
        ),
        ({"type": "object", "description": "x \udc00"}, "/description"),
        ({"type": "object", "properties": {"k\ud800": {"type": "string"}}}, "/properties"),
    ],
)
def test_a_lone_surrogate_in_the_schema_is_refused_where_it_is(
    schema: dict[str, Any], where: str
) -> None:
    with pytest.raises(SchemaError) as info:
        compile(schema)
    assert (info.value.code, info.value.location) == ("invalid_schema", where)


def test_line_breaks_of_unicode_in_a_json_slot_stay_escaped_in_the_prompt() -> None:
    schema = {
        "type": "object",
        "properties": {"j": {"type": "object", "description": "a\u2028b\u2029c\x85d"}},
    }
    text = slotflight.prompt(compile(schema))
    assert len(text.splitlines()) == text.count("\n")
    assert "\\u2028" in text
