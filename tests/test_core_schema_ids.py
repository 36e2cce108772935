"""A base URI keyword that is not a string is refused with a typed error at its pointer,
in every draft that reads it (``$id``; ``id`` in drafts 3 and 4), wherever it stands;
beside ``$ref`` in drafts 4 to 7 it is ignored, as those drafts ignore every sibling."""

from __future__ import annotations

from typing import Any

import pytest

from slotflight import Assembler, SchemaError, compile, render_frames

_DRAFT4 = "http://json-schema.org/draft-04/schema#"
_DRAFT7 = "http://json-schema.org/draft-07/schema#"


def _field(**keywords: Any) -> dict[str, Any]:
    return {"type": "object", "properties": {"a": {"type": "string", **keywords}}}


@pytest.mark.parametrize(
    ("schema", "location"),
    [
        (_field(**{"$id": 1}), "/properties/a/$id"),
        (_field(**{"$id": {"x": 1}}), "/properties/a/$id"),
        ({**_field(**{"$id": 1}), "$schema": _DRAFT7}, "/properties/a/$id"),
        ({**_field(id=1), "$schema": _DRAFT4}, "/properties/a/id"),
        ({**_field(), "$defs": {"x": {"$id": []}}}, "/$defs/x/$id"),
        (
            {
                "type": "object",
                "properties": {"a": {"$ref": "#/$defs/x"}},
                "$defs": {
                    "x": {
                        "$id": "https://example.com/x",
                        "type": "object",
                        "properties": {"b": {"$id": 3}},
                    }
                },
            },
            "/$defs/x/properties/b/$id",
        ),
    ],
)
def test_a_base_uri_that_is_not_a_string_is_a_schema_error(
    schema: dict[str, Any], location: str
) -> None:
    with pytest.raises(SchemaError) as caught:
        compile(schema)
    assert caught.value.code == "invalid_schema"
    assert caught.value.location == location


def test_an_id_other_drafts_do_not_read_is_any_value() -> None:
    assert [s.kind for s in compile(_field(id=1)).slots] == ["string", "json"]


def test_an_id_beside_a_reference_is_ignored_where_the_draft_ignores_siblings() -> None:
    schema = {
        "$schema": _DRAFT7,
        "type": "object",
        "properties": {"a": {"$id": 1, "$ref": "#/definitions/n"}},
        "definitions": {"n": {"type": "integer"}},
        "additionalProperties": False,
    }
    plan = compile(schema)
    assembler = Assembler(plan, syntax="v4")
    assembler.feed(render_frames(plan, {"a": 3}, "v4"))
    assembler.close()
    assert assembler.outcome.ok and assembler.state == {"a": 3}
