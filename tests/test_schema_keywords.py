"""Every JSON Schema keyword (tests/schema_keywords.py): Hypothesis draws schemas using it
beside other keywords, at the root, as a field among others or as an array's items;
``jsonschema`` labels candidate instances valid or invalid, and in every registered syntax
slotflight must agree: a valid instance written as frames (``render_frames``) comes back
exactly through the Assembler, an invalid one is refused. The docs' keyword table is the
same table, and it names every keyword the meta-schemas define.

Each keyword runs ``KEYWORD_EXAMPLES`` examples (15; about 1-2 minutes in all on 2 cores).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Final

import jsonschema_specifications
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks.schemas import reference_validator
from slotflight import compile
from tests.schema_keywords import DRAFTS, HANDLINGS, KEYWORDS, Keyword, fragments
from tests.schema_support import SYNTAXES, agrees

KEYWORD_EXAMPLES: Final = int(os.environ.get("SLOTFLIGHT_KEYWORD_EXAMPLES", "15"))
DOCS: Final = Path(__file__).resolve().parent.parent / "docs" / "schema-support.md"

_STRING = {"type": "string", "maxLength": 12}
_WORDS = st.sampled_from(["a", "ab", "hello", "été", "x-1"])
#: Other fields a schema may hold beside the keyword's (always valid values).
OTHERS: Final[dict[str, tuple[dict[str, Any], st.SearchStrategy[Any]]]] = {
    "s": (_STRING, _WORDS),
    "i": ({"type": "integer"}, st.integers(-5, 5)),
    "t": ({"type": "array", "items": _STRING, "minItems": 1}, st.lists(_WORDS, min_size=1)),
    "o": (
        {
            "type": "object",
            "properties": {"x": {"type": "boolean"}},
            "required": ["x"],
            "additionalProperties": False,
        },
        st.fixed_dictionaries({"x": st.booleans()}),
    ),
}


@st.composite
def cases(draw: st.DrawFn, keyword: Keyword) -> tuple[dict[str, Any], list[Any]]:
    """A schema using ``keyword`` and a few candidate instances of it."""
    draft = draw(st.sampled_from(keyword.drafts))
    fragment = draw(fragments(keyword.name, draft))
    place = "root" if fragment.root_only else draw(st.sampled_from(["root", "field", "items"]))
    values = fragment.values
    schema: dict[str, Any]
    if place == "root":
        schema = dict(fragment.schema)
        instances = st.lists(values, min_size=1, max_size=3)
    elif place == "items":
        schema = {
            "type": "object",
            "properties": {"list": {"type": "array", "items": fragment.schema, "minItems": 1}},
            "required": ["list"],
            "additionalProperties": False,
        }
        instances = st.lists(
            st.fixed_dictionaries({"list": st.lists(values, min_size=1, max_size=3)}),
            min_size=1,
            max_size=2,
        )
    else:
        others = draw(st.lists(st.sampled_from(sorted(OTHERS)), unique=True, max_size=2))
        schema = {
            "type": "object",
            "properties": {"k": fragment.schema, **{n: OTHERS[n][0] for n in others}},
            "required": ["k", *others],
            "additionalProperties": False,
        }
        instances = st.lists(
            st.fixed_dictionaries({"k": values, **{n: OTHERS[n][1] for n in others}}),
            min_size=1,
            max_size=3,
        )
    schema = {"$schema": DRAFTS[draft], **fragment.root, **schema}
    return schema, draw(instances)


@pytest.mark.parametrize("keyword", KEYWORDS, ids=lambda k: k.name)
@settings(
    max_examples=KEYWORD_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(data=st.data())
def test_slotflight_agrees_with_jsonschema(keyword: Keyword, data: st.DataObject) -> None:
    schema, instances = data.draw(cases(keyword))
    plan = compile(schema)
    checker = reference_validator(schema)
    for syntax in SYNTAXES:
        for seed, instance in enumerate(instances):
            agrees(plan, checker, instance, syntax, seed=seed)


# -- the table ------------------------------------------------------------------------------


def _meta_schema_keywords() -> set[str]:
    """Every keyword the draft 7, 2019-09 and 2020-12 meta-schemas define."""
    found: set[str] = set()
    registry = jsonschema_specifications.REGISTRY
    for uri in registry:
        if "draft-07" in uri or "2019-09" in uri or "2020-12" in uri:
            contents = registry.contents(uri)
            found |= set(contents.get("properties", {}))
    return found


def test_the_table_names_every_keyword_of_the_meta_schemas() -> None:
    names = {k.name for k in KEYWORDS}
    assert _meta_schema_keywords() - names == set()
    assert {k.handling for k in KEYWORDS} <= set(HANDLINGS)


def test_the_docs_print_the_table() -> None:
    rows = re.findall(r"^\| `([^`]+)` \| ([^|]+) \| ([a-z]+) \|", DOCS.read_text("utf-8"), re.M)
    assert [(name, handling) for name, _, handling in rows] == [
        (k.name, k.handling) for k in KEYWORDS
    ]
