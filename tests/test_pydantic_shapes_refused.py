"""Models with a field their schema could never ask for are refused when they compile.

A field whose ``validation_alias`` is a path into nested data (and whose name the model
does not read), or a required field the JSON Schema leaves out (``SkipJsonSchema``),
can never be in the output: every attempt would fail on it. The compiler refuses such a
model with a :class:`SchemaError` naming the model and the field, and
:func:`slotflight.complete` sends no request.
"""

from __future__ import annotations

from typing import Annotated

import pytest
from pydantic import AliasChoices, AliasPath, BaseModel, ConfigDict, Field
from pydantic import dataclasses as pydantic_dataclasses
from pydantic.json_schema import SkipJsonSchema
from typing_extensions import TypedDict

import slotflight
from slotflight import SchemaError
from slotflight.plan.compiler import compile as compile_schema
from slotflight.testing import ScriptedServer
from tests.client_support import MESSAGES, sync_client


class NestedPath(BaseModel):
    x: int = Field(validation_alias=AliasPath("a", "b"))


class OneKeyPath(BaseModel):
    """Pydantic's schema names the field ``x``, but validation reads only ``only``."""

    x: int = Field(validation_alias=AliasPath("only"))


class PathChoices(BaseModel):
    x: int = Field(validation_alias=AliasChoices(AliasPath("a", 0), AliasPath("b", 1)))


class Hidden(BaseModel):
    b: SkipJsonSchema[int]


class HiddenInItems(BaseModel):
    items: list[Hidden]


@pydantic_dataclasses.dataclass
class HiddenDataclass:
    x: SkipJsonSchema[int]


class WithDataclass(BaseModel):
    inner: HiddenDataclass


class PathDict(TypedDict):
    a: Annotated[int, Field(validation_alias=AliasPath("p", 1))]


class WithTypedDict(BaseModel):
    td: PathDict


REFUSED = [
    pytest.param(NestedPath, "NestedPath.x", id="alias-path"),
    pytest.param(OneKeyPath, "OneKeyPath.x", id="one-key-alias-path"),
    pytest.param(PathChoices, "PathChoices.x", id="alias-choices-of-paths"),
    pytest.param(HiddenInItems, "Hidden.b", id="skip-json-schema-in-items"),
    pytest.param(WithDataclass, "HiddenDataclass.x", id="skip-json-schema-dataclass"),
    pytest.param(WithTypedDict, "PathDict.a", id="typed-dict-alias-path"),
]


@pytest.mark.parametrize(("model", "field"), REFUSED)
def test_a_field_the_output_cannot_hold_is_refused_when_compiling(
    model: type[BaseModel], field: str
) -> None:
    with pytest.raises(SchemaError) as caught:
        compile_schema(model)
    assert caught.value.code == "invalid_schema"
    assert field in str(caught.value)


@pytest.mark.parametrize(("model", "field"), REFUSED[:1] + REFUSED[3:4])
def test_a_refused_model_sends_no_request(model: type[BaseModel], field: str) -> None:
    with ScriptedServer() as server:
        with pytest.raises(SchemaError, match=field.replace(".", r"\.")):
            slotflight.complete(sync_client(server), model="m", messages=MESSAGES, output=model)
        assert len(server.requests) == 0


class PathReadByName(BaseModel):
    model_config = ConfigDict(validate_by_name=True)
    x: int = Field(validation_alias=AliasPath("a", "b"))


class OneKeyChoice(BaseModel):
    x: int = Field(validation_alias=AliasChoices(AliasPath("a", 0), AliasPath("xx")))


class HiddenOptional(BaseModel):
    a: int
    b: SkipJsonSchema[int] = 3
    c: int | SkipJsonSchema[None] = None


@pytest.mark.parametrize(
    ("model", "paths"),
    [
        pytest.param(PathReadByName, ["x"], id="alias-path-read-by-name"),
        pytest.param(OneKeyChoice, ["xx"], id="alias-choices-with-one-key"),
        pytest.param(HiddenOptional, ["a", "c"], id="skip-json-schema-optional"),
    ],
)
def test_a_field_the_output_can_hold_compiles(model: type[BaseModel], paths: list[str]) -> None:
    assert [slot.path for slot in compile_schema(model).slots] == paths
