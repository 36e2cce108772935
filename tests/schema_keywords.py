"""Every JSON Schema keyword of drafts 7, 2019-09 and 2020-12, its handling, and a
Hypothesis strategy of schemas that use it.

:data:`KEYWORDS` is the table ``docs/schema-support.md`` prints (a test holds the two
equal, and another holds the table to every keyword the meta-schemas define). For each
keyword, :func:`fragments` draws a :class:`Fragment`: a subschema using the keyword
(often beside others), the definitions it needs at the root, and a strategy of candidate
values, valid and invalid alike. ``jsonschema`` labels each value; the tests place the
fragment at the root, as a field beside other fields, or as an array's items, and check
that slotflight agrees with the label in every syntax.

Values keep to what frames write exactly (``docs/schema-support.md``, "What the frames
cannot write"): text without surrounding white space, no number written as ``2.0``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from hypothesis import strategies as st

from tests.strategies import frame_safe_text

__all__ = ["DRAFTS", "HANDLINGS", "KEYWORDS", "Fragment", "Keyword", "fragments", "json_values"]

DRAFTS: Final = {
    "draft4": "http://json-schema.org/draft-04/schema#",
    "draft7": "http://json-schema.org/draft-07/schema#",
    "2019-09": "https://json-schema.org/draft/2019-09/schema",
    "2020-12": "https://json-schema.org/draft/2020-12/schema",
}
#: The handlings, as ``docs/schema-support.md`` names them.
HANDLINGS: Final = {
    "dialect": "selects the draft whose validator every check uses",
    "slot": "compiled into slots: kind, grammar and slot check enforce it",
    "checked": "compiled; checked by jsonschema when the slot closes or on the whole output",
    "reference": "resolved inside the document (meta-schemas included); else SchemaError",
    "whole": "the document becomes one json slot checked against all of it",
    "annotation": "no effect on validity (prompt text, defaults and examples use some)",
}


@dataclass(frozen=True)
class Keyword:
    name: str
    vocabulary: str
    handling: str
    drafts: tuple[str, ...] = ("draft7", "2020-12")


@dataclass(frozen=True)
class Fragment:
    """A subschema using the keyword, what it needs at the root, candidate values."""

    schema: Mapping[str, Any]
    values: st.SearchStrategy[Any]
    #: merged into the root schema (``$defs``/``definitions`` it refers to, ``$id``)
    root: Mapping[str, Any] = field(default_factory=dict)
    #: only at the root (``$dynamicRef``: the document is one slot anyway)
    root_only: bool = False


def _k(name: str, vocabulary: str, handling: str, *drafts: str) -> Keyword:
    return Keyword(name, vocabulary, handling, drafts or ("draft7", "2020-12"))


KEYWORDS: Final[tuple[Keyword, ...]] = (
    # core
    _k("$schema", "core", "dialect"),
    _k("$id", "core", "reference"),
    _k("id", "core (draft 4)", "reference", "draft4"),
    _k("$ref", "core", "reference"),
    _k("$defs", "core", "reference", "2019-09", "2020-12"),
    _k("definitions", "core (draft 7)", "reference", "draft7"),
    _k("$anchor", "core", "reference", "2019-09", "2020-12"),
    _k("$dynamicRef", "core", "whole", "2020-12"),
    _k("$dynamicAnchor", "core", "whole", "2020-12"),
    _k("$recursiveRef", "core (2019-09)", "whole", "2019-09"),
    _k("$recursiveAnchor", "core (2019-09)", "whole", "2019-09"),
    _k("$vocabulary", "core", "annotation", "2019-09", "2020-12"),
    _k("$comment", "core", "annotation"),
    # applicator
    _k("properties", "applicator", "slot"),
    _k("patternProperties", "applicator", "checked"),
    _k("additionalProperties", "applicator", "checked"),
    _k("propertyNames", "applicator", "checked"),
    _k("dependentSchemas", "applicator", "checked", "2019-09", "2020-12"),
    _k("dependencies", "applicator (draft 7)", "checked", "draft7"),
    _k("items", "applicator", "slot"),
    _k("prefixItems", "applicator", "checked", "2020-12"),
    _k("additionalItems", "applicator (draft 7)", "checked", "draft7", "2019-09"),
    _k("contains", "applicator", "checked"),
    _k("allOf", "applicator", "checked"),
    _k("anyOf", "applicator", "checked"),
    _k("oneOf", "applicator", "checked"),
    _k("not", "applicator", "checked"),
    _k("if", "applicator", "checked"),
    _k("then", "applicator", "checked"),
    _k("else", "applicator", "checked"),
    # unevaluated
    _k("unevaluatedProperties", "unevaluated", "checked", "2019-09", "2020-12"),
    _k("unevaluatedItems", "unevaluated", "checked", "2019-09", "2020-12"),
    # validation
    _k("type", "validation", "slot"),
    _k("enum", "validation", "slot"),
    _k("const", "validation", "slot"),
    _k("multipleOf", "validation", "checked"),
    _k("maximum", "validation", "checked"),
    _k("exclusiveMaximum", "validation", "checked"),
    _k("minimum", "validation", "checked"),
    _k("exclusiveMinimum", "validation", "checked"),
    _k("maxLength", "validation", "slot"),
    _k("minLength", "validation", "slot"),
    _k("pattern", "validation", "checked"),
    _k("maxItems", "validation", "slot"),
    _k("minItems", "validation", "slot"),
    _k("uniqueItems", "validation", "checked"),
    _k("maxContains", "validation", "checked", "2019-09", "2020-12"),
    _k("minContains", "validation", "checked", "2019-09", "2020-12"),
    _k("maxProperties", "validation", "checked"),
    _k("minProperties", "validation", "checked"),
    _k("required", "validation", "slot"),
    _k("dependentRequired", "validation", "checked", "2019-09", "2020-12"),
    # format
    _k("format", "format", "slot"),
    # content (annotations in drafts 7 and 2020-12)
    _k("contentEncoding", "content", "annotation"),
    _k("contentMediaType", "content", "annotation"),
    _k("contentSchema", "content", "annotation", "2019-09", "2020-12"),
    # meta-data
    _k("title", "meta-data", "annotation"),
    _k("description", "meta-data", "annotation"),
    _k("default", "meta-data", "annotation"),
    _k("deprecated", "meta-data", "annotation", "2019-09", "2020-12"),
    _k("readOnly", "meta-data", "annotation"),
    _k("writeOnly", "meta-data", "annotation"),
    _k("examples", "meta-data", "annotation"),
)


# -- values -----------------------------------------------------------------------------

_TEXT = frame_safe_text(12)
_WORDS = st.sampled_from(["a", "ab", "abc", "x-1", "hello", "Zz", "42", "été"])
_INTS = st.integers(-20, 20)
_FLOATS = st.floats(-50, 50, allow_nan=False).filter(lambda f: not f.is_integer())
_SCALARS = st.one_of(_INTS, _FLOATS, _WORDS, _TEXT, st.booleans(), st.none())


def json_values(depth: int = 2) -> st.SearchStrategy[Any]:
    """Any JSON value (small), text kept to what frames write exactly."""
    return st.recursive(
        _SCALARS,
        lambda inner: st.one_of(
            st.lists(inner, max_size=3),
            st.dictionaries(st.sampled_from(["a", "b", "c", "x-1", "n"]), inner, max_size=3),
        ),
        max_leaves=6,
    )


_ANY = json_values()


def _near(value: int) -> st.SearchStrategy[int]:
    return st.integers(value - 3, value + 3)


def _strings(low: int = 0, high: int = 8) -> st.SearchStrategy[str]:
    letters = st.text(st.sampled_from("abcxyz-1é"), min_size=low, max_size=high)
    return letters.filter(lambda s: s == s.strip())


def _objects(values: st.SearchStrategy[Any], keys: list[str]) -> st.SearchStrategy[Any]:
    return st.dictionaries(st.sampled_from(keys), values, max_size=4)


def _arrays(values: st.SearchStrategy[Any], high: int = 5) -> st.SearchStrategy[list[Any]]:
    return st.lists(values, max_size=high)


def _mix(*strategies: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(*strategies, _ANY)


_STRING = {"type": "string", "maxLength": 12}
_INTEGER = {"type": "integer"}
_FORMATS: Final[Mapping[str, tuple[list[str], list[str]]]] = {
    "date": (["2025-01-31", "1999-12-01"], ["2025-13-01", "31/01/2025"]),
    "date-time": (["2025-01-31T09:30:00Z", "2025-01-31T09:30:00+02:00"], ["2025-01-31 9h"]),
    "time": (["09:30:00Z", "23:59:59+01:00"], ["25:00:00Z", "9.30"]),
    "uuid": (["123e4567-e89b-12d3-a456-426614174000"], ["123e4567", "not-a-uuid"]),
    "email": (["ada@example.com"], ["no-at-sign"]),
    "hostname": (["example.com", "a-b.example"], ["-bad-.com", "a..b"]),
    "ipv4": (["192.168.0.1"], ["256.1.1.1", "1.2.3"]),
    "ipv6": (["::1", "2001:db8::2"], ["12345::", "1:2:3"]),
    "uri": (["https://example.com/a?b=1", "urn:isbn:0451450523"], ["no scheme", "//x"]),
    "uri-reference": (["/a/b", "https://x.y/z"], ["\\\\bad"]),
    "uri-template": (["https://x.y/{id}"], ["https://x.y/{id"]),
    "json-pointer": (["/a/b", ""], ["a/b", "/~2"]),
    "relative-json-pointer": (["0/a", "1#"], ["/a", "-1"]),
    "regex": (["^[a-z]+$"], ["(unclosed"]),
    "duration": (["P1D", "PT2H30M"], ["1 day", "P"]),
    "idn-hostname": (["example.com"], ["-bad-"]),
    "iri": (["https://example.com/é"], ["no scheme"]),
    "color": (["red"], ["reddish-ish"]),
}


def _format_fragment(draw: st.DrawFn) -> Fragment:
    name = draw(st.sampled_from(sorted(_FORMATS)))
    good, bad = _FORMATS[name]
    return Fragment({"type": "string", "format": name}, _mix(st.sampled_from(good + bad)))


# -- one builder per keyword --------------------------------------------------------------

Builder = Callable[[st.DrawFn, str], Fragment]


def _type(draw: st.DrawFn, draft: str) -> Fragment:
    names = ["string", "integer", "number", "boolean", "null", "array", "object"]
    chosen = draw(
        st.one_of(st.sampled_from(names), st.lists(st.sampled_from(names), min_size=1, max_size=3))
    )
    if isinstance(chosen, list):
        chosen = list(dict.fromkeys(chosen))
    return Fragment({"type": chosen}, _ANY)


def _enum(draw: st.DrawFn, draft: str) -> Fragment:
    values = draw(st.lists(_ANY, min_size=1, max_size=4, unique_by=repr))
    return Fragment({"enum": values}, st.one_of(st.sampled_from(values), _ANY))


def _const(draw: st.DrawFn, draft: str) -> Fragment:
    value = draw(_ANY)
    return Fragment({"const": value}, st.one_of(st.just(value), _ANY))


def _numeric(keyword: str) -> Builder:
    def build(draw: st.DrawFn, draft: str) -> Fragment:
        bound = draw(st.sampled_from([0, 3, -2, 10]))
        kind = draw(st.sampled_from(["integer", "number"]))
        if keyword == "multipleOf":
            bound = draw(st.sampled_from([2, 3, 0.5, 5]))
        values = st.one_of(_near(int(bound)), _FLOATS, _INTS)
        return Fragment({"type": kind, keyword: bound}, _mix(values))

    return build


def _length(keyword: str) -> Builder:
    def build(draw: st.DrawFn, draft: str) -> Fragment:
        bound = draw(st.integers(0, 5))
        schema: dict[str, Any] = {"type": "string", keyword: bound}
        if draw(st.booleans()):
            schema["pattern"] = "^[a-z]*$"
        return Fragment(schema, _mix(_strings(0, 8)))

    return build


def _pattern(draw: st.DrawFn, draft: str) -> Fragment:
    pattern = draw(st.sampled_from(["^[a-z]+$", "^\\d{3}$", "b", "^x-", "^[^0-9]*$"]))
    values = st.one_of(st.from_regex(pattern, fullmatch=False).filter(_plain), _strings())
    return Fragment({"type": "string", "pattern": pattern}, _mix(values))


def _plain(text: str) -> bool:
    return text == text.strip() and "\r" not in text and "\n" not in text and len(text) < 20


def _array(keyword: str) -> Builder:
    def build(draw: st.DrawFn, draft: str) -> Fragment:
        item = draw(st.sampled_from([_INTEGER, _STRING, {"type": "boolean"}]))
        schema: dict[str, Any] = {"type": "array", "items": item}
        if keyword in ("minItems", "maxItems"):
            schema[keyword] = draw(st.integers(0, 3))
        elif keyword == "uniqueItems":
            schema[keyword] = draw(st.booleans())
        values = _arrays(st.one_of(_INTS, _WORDS, st.booleans()))
        return Fragment(schema, _mix(values))

    return build


def _items(draw: st.DrawFn, draft: str) -> Fragment:
    item = draw(
        st.sampled_from(
            [
                _INTEGER,
                _STRING,
                {"enum": ["red", "green", 3]},
                {"type": ["string", "null"]},
                {"type": "object", "properties": {"x": _INTEGER}, "required": ["x"]},
                {"type": "array", "items": _INTEGER},
            ]
        )
    )
    schema: dict[str, Any] = {"type": "array", "items": item}
    if draft == "draft7" and draw(st.booleans()):
        schema["items"] = [item, _STRING]  # the array form: a tuple
    values = _arrays(st.one_of(_INTS, _WORDS, st.none(), st.fixed_dictionaries({"x": _INTS})))
    return Fragment(schema, _mix(values))


def _prefix_items(draw: st.DrawFn, draft: str) -> Fragment:
    schema: dict[str, Any] = {"type": "array", "prefixItems": [_INTEGER, _STRING]}
    if draw(st.booleans()):
        schema["items"] = draw(st.sampled_from([False, {"type": "boolean"}]))
    return Fragment(schema, _mix(_arrays(st.one_of(_INTS, _WORDS, st.booleans()))))


def _additional_items(draw: st.DrawFn, draft: str) -> Fragment:
    extra = draw(st.sampled_from([False, {"type": "boolean"}, _STRING]))
    schema = {"type": "array", "items": [_INTEGER, _STRING], "additionalItems": extra}
    return Fragment(schema, _mix(_arrays(st.one_of(_INTS, _WORDS, st.booleans()))))


def _contains(keyword: str) -> Builder:
    def build(draw: st.DrawFn, draft: str) -> Fragment:
        schema: dict[str, Any] = {"type": "array", "contains": {"type": "integer", "minimum": 5}}
        if keyword in ("minContains", "maxContains"):
            schema[keyword] = draw(st.integers(0, 3))
        return Fragment(schema, _mix(_arrays(st.one_of(_INTS, _WORDS))))

    return build


_OBJECT_VALUES = _objects(st.one_of(_INTS, _WORDS, st.booleans()), ["a", "b", "x-1", "x-2", "n"])


def _object(keyword: str) -> Builder:
    def build(draw: st.DrawFn, draft: str) -> Fragment:
        schema: dict[str, Any] = {
            "type": "object",
            "properties": {"a": _INTEGER, "b": _STRING},
            "required": ["a"],
        }
        if keyword == "properties":
            schema["additionalProperties"] = draw(st.sampled_from([False, True, _INTEGER]))
        elif keyword == "patternProperties":
            schema[keyword] = {"^x-": {"type": "boolean"}}
            schema["additionalProperties"] = draw(st.sampled_from([False, True]))
        elif keyword == "additionalProperties":
            schema[keyword] = draw(st.sampled_from([False, True, _INTEGER, {"type": "boolean"}]))
        elif keyword == "propertyNames":
            schema[keyword] = draw(st.sampled_from([{"maxLength": 1}, {"pattern": "^[a-z]$"}]))
        elif keyword == "required":
            schema[keyword] = draw(st.sampled_from([["a", "b"], ["a", "n"], ["b"]]))
        elif keyword in ("minProperties", "maxProperties"):
            schema[keyword] = draw(st.integers(1, 3))
        elif keyword == "dependentRequired":
            schema[keyword] = {"b": ["n"]}
        elif keyword == "dependentSchemas":
            schema[keyword] = {"b": {"properties": {"a": {"minimum": 0}}, "required": ["n"]}}
        elif keyword == "dependencies":
            schema[keyword] = draw(st.sampled_from([{"b": ["n"]}, {"b": {"required": ["n"]}}]))
        elif keyword == "unevaluatedProperties":
            schema["allOf"] = [{"properties": {"n": _INTEGER}}]
            schema[keyword] = draw(st.sampled_from([False, {"type": "boolean"}]))
        return Fragment(schema, _mix(_OBJECT_VALUES))

    return build


def _unevaluated_items(draw: st.DrawFn, draft: str) -> Fragment:
    schema = {
        "type": "array",
        "prefixItems": [_INTEGER],
        "unevaluatedItems": draw(st.sampled_from([False, _STRING])),
    }
    return Fragment(schema, _mix(_arrays(st.one_of(_INTS, _WORDS), 3)))


def _combinator(keyword: str) -> Builder:
    def build(draw: st.DrawFn, draft: str) -> Fragment:
        a = {"type": "integer", "minimum": 0}
        b = draw(st.sampled_from([_STRING, {"type": "integer", "maximum": 5}, {"type": "null"}]))
        schema: dict[str, Any]
        if keyword in ("allOf", "anyOf", "oneOf"):
            schema = {keyword: [a, b]}
            if draw(st.booleans()):
                schema["type"] = draw(st.sampled_from(["integer", "string"]))
        elif keyword == "not":
            schema = {"type": "integer", "not": {"enum": [3, 4]}}
        else:
            schema = {
                "if": {"type": "integer"},
                "then": {"minimum": 2},
                "else": {"type": "string", "minLength": 2},
            }
            if keyword == "then":
                del schema["else"]
            elif keyword == "else":
                del schema["then"]
        return Fragment(schema, _mix(_INTS, _WORDS, st.none()))

    return build


def _ref(keyword: str) -> Builder:
    def build(draw: st.DrawFn, draft: str) -> Fragment:
        target = draw(
            st.sampled_from(
                [
                    {"type": "integer", "maximum": 9},
                    {"type": "object", "properties": {"x": _STRING}, "required": ["x"]},
                    {"enum": ["a", "b"]},
                ]
            )
        )
        modern = draft not in ("draft4", "draft7")
        section = "$defs" if modern and keyword != "definitions" else "definitions"
        root: dict[str, Any] = {section: {"T": target}}
        ref = f"#/{section}/T"
        if keyword == "$anchor":
            root = {section: {"T": {**target, "$anchor": "tee"}}}
            ref = "#tee"
        elif keyword in ("$id", "id"):
            key = "$id" if keyword == "$id" else "id"
            base = "https://example.com/root.json"
            root = {key: base, section: {"T": {**target, key: "t.json"}}}
            ref = "t.json"
        schema: dict[str, Any] = {"$ref": ref}
        if draw(st.booleans()):
            schema["description"] = "a reference"
        values = _mix(_INTS, _WORDS, st.fixed_dictionaries({"x": _WORDS}))
        return Fragment(schema, values, root)

    return build


def _recursive(draw: st.DrawFn, draft: str) -> Fragment:
    """A recursive definition through ``$ref`` (a tree)."""
    section = "definitions" if draft == "draft7" else "$defs"
    node = {
        "type": "object",
        "properties": {
            "v": _INTEGER,
            "kids": {"type": "array", "items": {"$ref": f"#/{section}/node"}},
        },
        "required": ["v"],
        "additionalProperties": False,
    }
    trees = st.recursive(
        st.fixed_dictionaries({"v": _INTS}),
        lambda inner: st.fixed_dictionaries({"v": _INTS, "kids": st.lists(inner, max_size=2)}),
        max_leaves=4,
    )
    return Fragment({"$ref": f"#/{section}/node"}, _mix(trees), {section: {"node": node}})


def _dynamic(keyword: str) -> Builder:
    def build(draw: st.DrawFn, draft: str) -> Fragment:
        if keyword.startswith("$recursive"):
            root = {"$recursiveAnchor": True}
            kids = {"$recursiveRef": "#"}
        else:
            root = {"$dynamicAnchor": "node"}
            kids = {"$dynamicRef": "#node"}
        schema = {
            **root,
            "type": "object",
            "properties": {"v": _INTEGER, "kids": {"type": "array", "items": kids}},
            "required": ["v"],
        }
        trees = st.recursive(
            st.fixed_dictionaries({"v": _INTS}),
            lambda inner: st.fixed_dictionaries({"v": _INTS, "kids": st.lists(inner, max_size=2)}),
            max_leaves=4,
        )
        return Fragment(schema, _mix(trees, _OBJECT_VALUES), root_only=True)

    return build


def _annotation(keyword: str) -> Builder:
    values: Mapping[str, Any] = {
        "$comment": "a note",
        "title": "Title",
        "description": "What it is",
        "default": "dflt",
        "examples": ["ex"],
        "deprecated": True,
        "readOnly": True,
        "writeOnly": False,
        "contentEncoding": "base64",
        "contentMediaType": "application/json",
        "contentSchema": {"type": "object"},
        "$vocabulary": {"https://json-schema.org/draft/2020-12/vocab/core": True},
    }

    def build(draw: st.DrawFn, draft: str) -> Fragment:
        base = draw(st.sampled_from([_STRING, _INTEGER, {"type": "array", "items": _STRING}]))
        return Fragment({**base, keyword: values[keyword]}, _mix(_WORDS, _INTS))

    return build


def _schema_keyword(draw: st.DrawFn, draft: str) -> Fragment:
    # the root's $schema is set by the test; a subschema's is what is drawn here
    return Fragment(
        {"type": "object", "properties": {"a": _INTEGER}, "required": ["a"]},
        _mix(_OBJECT_VALUES),
    )


_BUILDERS: Final[Mapping[str, Builder]] = {
    "$schema": _schema_keyword,
    "$id": _ref("$id"),
    "id": _ref("id"),
    "$ref": _ref("$ref"),
    "$defs": _recursive,
    "definitions": _ref("definitions"),
    "$anchor": _ref("$anchor"),
    "$dynamicRef": _dynamic("$dynamicRef"),
    "$dynamicAnchor": _dynamic("$dynamicAnchor"),
    "$recursiveRef": _dynamic("$recursiveRef"),
    "$recursiveAnchor": _dynamic("$recursiveAnchor"),
    "properties": _object("properties"),
    "patternProperties": _object("patternProperties"),
    "additionalProperties": _object("additionalProperties"),
    "propertyNames": _object("propertyNames"),
    "dependentSchemas": _object("dependentSchemas"),
    "dependencies": _object("dependencies"),
    "items": _items,
    "prefixItems": _prefix_items,
    "additionalItems": _additional_items,
    "contains": _contains("contains"),
    "unevaluatedProperties": _object("unevaluatedProperties"),
    "unevaluatedItems": _unevaluated_items,
    "type": _type,
    "enum": _enum,
    "const": _const,
    "maxLength": _length("maxLength"),
    "minLength": _length("minLength"),
    "pattern": _pattern,
    "maxItems": _array("maxItems"),
    "minItems": _array("minItems"),
    "uniqueItems": _array("uniqueItems"),
    "maxContains": _contains("maxContains"),
    "minContains": _contains("minContains"),
    "maxProperties": _object("maxProperties"),
    "minProperties": _object("minProperties"),
    "required": _object("required"),
    "dependentRequired": _object("dependentRequired"),
    "format": lambda draw, draft: _format_fragment(draw),
    **{k: _combinator(k) for k in ("allOf", "anyOf", "oneOf", "not", "if", "then", "else")},
    **{
        k: _numeric(k)
        for k in ("multipleOf", "maximum", "minimum", "exclusiveMaximum", "exclusiveMinimum")
    },
    **{k.name: _annotation(k.name) for k in KEYWORDS if k.handling == "annotation"},
}


@st.composite
def fragments(draw: st.DrawFn, keyword: str, draft: str) -> Fragment:
    """A :class:`Fragment` using ``keyword`` in ``draft``."""
    return _BUILDERS[keyword](draw, draft)
