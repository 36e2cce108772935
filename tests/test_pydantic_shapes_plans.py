"""What a model's plan asks for, and what the frame writer writes for its instances.

The plan asks for the keys the model's validation reads (validation aliases, not
serialization ones; no computed field; excluded fields included), whatever the model's
``json_schema_mode_override``; the writer writes an instance under those same keys. An
array whose items are objects that may be ``null`` is one ``json`` slot: no frame can
write a ``null`` item of an expanded array.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import AliasChoices, AliasPath, BaseModel, ConfigDict, Field, computed_field
from pydantic.alias_generators import to_camel

from slotflight.plan.compiler import compile as compile_schema
from slotflight.plan.instance import walk_instance
from slotflight.plan.pydantic_schema import validation_key


class Keys(BaseModel):
    plain: int
    sender: str = Field(alias="from")
    to: str = Field(validation_alias="dest")
    size: int = Field(serialization_alias="sz")
    both: int = Field(validation_alias="b_in", serialization_alias="b_out")
    choice: int = Field(validation_alias=AliasChoices(AliasPath("a", 0), "c1", "c2"))
    secret: str = Field(exclude=True)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def total(self) -> int:
        return self.plain + self.size


class Camel(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)
    first_name: str
    last_name: str = Field(serialization_alias="LAST")


class NamesOnly(BaseModel):
    model_config = ConfigDict(validate_by_name=True, validate_by_alias=False)
    first: int = Field(alias="First")


class Serialized(BaseModel):
    model_config = ConfigDict(json_schema_mode_override="serialization")
    x: int = Field(validation_alias="x_in", serialization_alias="x_out")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def doubled(self) -> int:
        return 2 * self.x


KEYS = Keys.model_validate(
    {"plain": 1, "from": "a", "dest": "b", "size": 2, "b_in": 3, "c1": 4, "secret": "s"}
)


@pytest.mark.parametrize(
    ("model", "keys"),
    [
        (Keys, ["plain", "from", "dest", "size", "b_in", "c1", "secret"]),
        (Camel, ["firstName", "lastName"]),
        (NamesOnly, ["first"]),
        (Serialized, ["x_in"]),
    ],
)
def test_the_plan_asks_for_the_keys_validation_reads(
    model: type[BaseModel], keys: list[str]
) -> None:
    assert [slot.path for slot in compile_schema(model).slots] == keys
    config = model.model_config
    assert [validation_key(config, n, f) for n, f in model.model_fields.items()] == keys


@pytest.mark.parametrize(
    ("instance", "data"),
    [
        (KEYS, {"plain": 1, "from": "a", "dest": "b", "size": 2, "b_in": 3, "c1": 4}),
        (Camel(first_name="Ada", last_name="L"), {"firstName": "Ada", "lastName": "L"}),
        (NamesOnly(first=5), {"first": 5}),
        (Serialized.model_validate({"x_in": 6}), {"x_in": 6}),
    ],
)
def test_the_writer_writes_an_instance_under_those_keys(
    instance: BaseModel, data: dict[str, Any]
) -> None:
    written = {
        f.slot.path: f.value for f in walk_instance(compile_schema(type(instance)), instance)
    }
    if isinstance(instance, Keys):
        data = {**data, "secret": "s"}  # excluded from dumps, read by validation
    assert written == data
    assert type(instance).model_validate_json(json.dumps(written), strict=True) == instance


class Address(BaseModel):
    city: str


class MaybeItems(BaseModel):
    stops: list[Address | None]
    plain: list[Address] = []


def test_an_array_of_objects_that_may_be_null_is_one_json_slot() -> None:
    plan = compile_schema(MaybeItems)
    assert [(s.path, s.kind) for s in plan.slots] == [("stops", "json"), ("plain[].city", "string")]
    instance = MaybeItems(stops=[None, Address(city="Lyon")])
    frames = list(walk_instance(plan, instance))
    assert [(f.slot.path, f.value) for f in frames] == [("stops", [None, {"city": "Lyon"}])]


def test_a_json_schema_array_of_nullable_objects_is_one_json_slot() -> None:
    item = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}
    for nullable in ({"anyOf": [item, {"type": "null"}]}, {**item, "type": ["object", "null"]}):
        schema = {
            "type": "object",
            "properties": {"xs": {"type": "array", "items": nullable}},
            "required": ["xs"],
            "additionalProperties": False,
        }
        plan = compile_schema(schema)
        assert [(s.path, s.kind) for s in plan.slots] == [("xs", "json")]
        assert plan.arrays == () and plan.objects == ()
