"""A Pydantic model as its validation reads it: its JSON Schema, and an instance as data.

The plan of a model asks for exactly the keys the model's validation reads, and the
frame writer writes an instance under those same keys:

- :func:`model_schema`: the model's JSON Schema in validation mode (a
  ``json_schema_mode_override`` of the model does not change it), refused with a
  :class:`SchemaError` naming the model and the field when a field the model reads could
  never be asked for: a required field the schema leaves out (``SkipJsonSchema``), or a
  ``validation_alias`` that is a path into nested data (``AliasPath("a", "b")``) or only
  such paths, where validation does not read the field's name.
- :func:`validation_key`: the key the schema gives a field (its validation alias, else
  its name; the first one-key choice of an ``AliasChoices``), as Pydantic's schema
  generator picks it.
- :func:`validation_data`: an instance as JSON data under those keys, computed fields
  left out and excluded fields (``Field(exclude=True)``) put back, values as the model's
  serializers write them in JSON mode (a ``SecretStr`` as its secret, not its mask).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import is_dataclass
from typing import Any, Final

from pydantic import (
    AliasChoices,
    AliasPath,
    BaseModel,
    RootModel,
    Secret,
    SecretBytes,
    SecretStr,
)
from pydantic.errors import PydanticUserError
from pydantic.fields import FieldInfo
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaMode, JsonSchemaValue
from pydantic_core import to_jsonable_python
from pydantic_core.core_schema import (
    DataclassSchema,
    ModelSchema,
    TypedDictSchema,
)

from .._errors import SchemaError

__all__ = ["model_schema", "validation_data", "validation_key"]

_UNNAMED: Final = "a nested type"


def _single_key(path: Any) -> str | None:
    """The key of an alias path of one text segment (``["a"]``), else ``None``."""
    if isinstance(path, list) and len(path) == 1 and isinstance(path[0], str):
        return path[0]
    return None


def _read_keys(alias: Any) -> tuple[str, ...]:
    """The top-level keys a core-schema ``validation_alias`` reads a field from."""
    if isinstance(alias, str):
        return (alias,)
    if not isinstance(alias, list):
        return ()
    if alias and all(isinstance(path, list) for path in alias):  # AliasChoices
        return tuple(key for path in alias if (key := _single_key(path)) is not None)
    return (key,) if (key := _single_key(alias)) is not None else ()  # one AliasPath


class _ValidationSchema(GenerateJsonSchema):
    """Pydantic's generator, always in validation mode, refusing fields its schema
    cannot ask for (see the module)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._owners: list[str] = []

    @property
    def mode(self) -> JsonSchemaMode:
        return "validation"

    def _owned(self, cls: Any, build: Any, schema: Any) -> JsonSchemaValue:
        self._owners.append(getattr(cls, "__name__", _UNNAMED))
        try:
            result: JsonSchemaValue = build(schema)
            return result
        finally:
            self._owners.pop()

    def model_schema(self, schema: ModelSchema) -> JsonSchemaValue:
        return self._owned(schema.get("cls"), super().model_schema, schema)

    def dataclass_schema(self, schema: DataclassSchema) -> JsonSchemaValue:
        return self._owned(schema.get("cls"), super().dataclass_schema, schema)

    def typed_dict_schema(self, schema: TypedDictSchema) -> JsonSchemaValue:
        return self._owned(schema.get("cls"), super().typed_dict_schema, schema)

    def _named_required_fields_schema(
        self, named_required_fields: Sequence[tuple[str, bool, Any]]
    ) -> JsonSchemaValue:
        result = super()._named_required_fields_schema(named_required_fields)
        properties = result.get("properties", {})
        for name, required, field in named_required_fields:
            key = self._get_alias_name(field, name) if self.by_alias else name
            self._check_field(name, key, required, field, properties)
        return result

    def _check_field(
        self, name: str, key: str, required: bool, field: Any, properties: Mapping[str, Any]
    ) -> None:
        owner = self._owners[-1] if self._owners else _UNNAMED
        if required and key not in properties:
            raise SchemaError(
                f"{owner}.{name} is required but left out of the JSON Schema "
                "(SkipJsonSchema): the output could never hold it"
            )
        config = self._config
        alias = field.get("validation_alias") if field.get("type") != "computed-field" else None
        if alias is None or not config.validate_by_alias or config.validate_by_name:
            return  # validation reads the field's name, or its one key alias
        if key not in _read_keys(alias):
            raise SchemaError(
                f"{owner}.{name}: its validation_alias {alias!r} reads nested data, which "
                f"the output cannot hold under {key!r}; give it a one-key alias "
                '(validation_alias="…") or let the model read field names '
                "(validate_by_name=True)"
            )


def model_schema(model: type[BaseModel]) -> Any:
    """``model``'s JSON Schema in validation mode; :class:`SchemaError` when Pydantic
    cannot generate it or a field the model reads could never be asked for."""
    try:
        return model.model_json_schema(schema_generator=_ValidationSchema)
    except PydanticUserError as exc:
        raise SchemaError(f"{model.__name__} has no JSON Schema: {exc}") from exc


def validation_key(config: Mapping[str, Any], name: str, field: FieldInfo) -> str:
    """The key the validation-mode schema gives the field ``name`` of a model (or
    Pydantic dataclass) whose configuration is ``config``."""
    if config.get("validate_by_alias", True) is False:
        return name
    alias = field.validation_alias if field.validation_alias is not None else field.alias
    if isinstance(alias, str):
        return alias
    if isinstance(alias, AliasChoices):
        for choice in alias.choices:
            if isinstance(choice, str):
                return choice
            if isinstance(choice, AliasPath) and (key := _single_key(choice.path)):
                return key
    return name


def validation_data(instance: Any) -> Any:
    """``instance`` (a model, or data holding models) as JSON data its model's
    validation reads: O(size of the instance)."""
    if not isinstance(instance, BaseModel):
        return instance
    return _paired(instance, _dump(instance))


def _dump(value: Any) -> Any:
    """``value`` as its serializers write it in JSON mode, fields under their aliases."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", by_alias=True, round_trip=True, warnings=False)
    return to_jsonable_python(value, by_alias=True, round_trip=True)


def _fields(value: Any) -> tuple[Mapping[str, FieldInfo], Mapping[str, Any]] | None:
    """The fields and configuration of a model or Pydantic dataclass instance."""
    cls = type(value)
    if isinstance(value, BaseModel):
        return cls.model_fields, cls.model_config
    fields = getattr(cls, "__pydantic_fields__", None) if is_dataclass(value) else None
    if isinstance(fields, Mapping):
        return fields, getattr(cls, "__pydantic_config__", None) or {}
    return None


def _paired(value: Any, dumped: Any) -> Any:
    """``dumped`` (``value`` as :func:`_dump` wrote it) with the fields of every model in
    it under their validation keys, excluded fields put back and computed fields left
    out."""
    if isinstance(value, RootModel):
        return _paired(value.root, dumped)
    if isinstance(value, (SecretStr, SecretBytes, Secret)):
        # written masked; the output holds the value itself
        return to_jsonable_python(value.get_secret_value()) if dumped == str(value) else dumped
    found = _fields(value)
    if found is not None:
        decorators = getattr(type(value), "__pydantic_decorators__", None)
        if not isinstance(dumped, Mapping) or getattr(decorators, "model_serializers", None):
            return dumped  # a model serializer of its own: its output is what it reads
        fields, config = found
        out: dict[str, Any] = {}
        for name, field in fields.items():
            item = getattr(value, name)
            written = field.serialization_alias if field.serialization_alias is not None else name
            done = dumped[written] if written in dumped else _dump(item)
            out[validation_key(config, name, field)] = _paired(item, done)
        for key, item in (getattr(value, "__pydantic_extra__", None) or {}).items():
            out[key] = _paired(item, dumped[key] if key in dumped else _dump(item))
        return out
    if isinstance(value, Mapping) and isinstance(dumped, Mapping) and len(value) == len(dumped):
        return {
            key: _paired(item, written)
            for item, (key, written) in zip(value.values(), dumped.items(), strict=True)
        }
    if (
        isinstance(value, (list, tuple, set, frozenset))
        and isinstance(dumped, list)
        and len(value) == len(dumped)
    ):
        return [_paired(item, written) for item, written in zip(value, dumped, strict=True)]
    return dumped
