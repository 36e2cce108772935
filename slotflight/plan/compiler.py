"""The schema compiler: a Pydantic model or JSON Schema in, a :class:`SlotPlan` out.

Objects expand recursively; scalar leaves become slots; arrays of scalars become one
repeatable slot; arrays of objects make every leaf of the item a repeatable slot (one
array level). Whatever cannot be expanded (dynamic keys, unions of objects, arrays of
arrays, arrays inside array items, tuples, recursive references, untyped values)
becomes one ``json`` slot validated against its self-contained sub-schema. Every valid
schema compiles; an invalid one raises :class:`SchemaError` with a pointer into it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import jsonpointer
import jsonschema
from pydantic import BaseModel
from pydantic.errors import PydanticUserError

from .._errors import SchemaError
from .model import INDEX, MISSING, ArrayNode, ObjectNode, Segment, Slot, SlotKind, SlotPlan
from .schema_walk import SchemaDocument, Unwrapped, child_pointer

__all__ = ["compile"]

#: String formats with a kind of their own.
_FORMAT_KINDS: Final[Mapping[str, SlotKind]] = {
    "date": "date",
    "date-time": "datetime",
    "time": "time",
    "uuid": "uuid",
}
_SCALAR_TYPES: Final[Mapping[str, SlotKind]] = {
    "string": "string",
    "integer": "integer",
    "number": "number",
    "boolean": "boolean",
}
#: Keywords copied into :attr:`Slot.constraints`.
CONSTRAINT_KEYWORDS: Final = (
    "minLength",
    "maxLength",
    "pattern",
    "format",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
)
_KNOWN_TYPES: Final = frozenset({*_SCALAR_TYPES, "object", "array", "null"})


def compile(schema: type[BaseModel] | Mapping[str, Any]) -> SlotPlan:
    """Compile a Pydantic v2 model class or a JSON Schema dict into a :class:`SlotPlan`.

    Raises :class:`SchemaError` (``location``: JSON Pointer into the schema) when the
    schema is invalid or is not a schema at all.
    """
    model: type[BaseModel] | None = None
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        model = schema
        try:
            document: Any = model.model_json_schema()
        except PydanticUserError as exc:
            raise SchemaError(f"{model.__name__} has no JSON Schema: {exc}") from exc
    elif isinstance(schema, Mapping):
        document = schema
    else:
        raise SchemaError(
            f"expected a Pydantic model class or a JSON Schema dict, got {type(schema).__name__}"
        )
    _check_structure(document)
    return _Compiler(document, model).run()


def _check_structure(document: Mapping[str, Any]) -> None:
    try:
        jsonschema.Draft202012Validator.check_schema(document)
    except jsonschema.SchemaError as exc:
        location = "".join("/" + jsonpointer.escape(str(p)) for p in exc.absolute_path)
        raise SchemaError(f"not a valid JSON Schema: {exc.message}", location=location) from exc


def _humanize(name: str) -> str:
    words = name.replace("_", " ").replace("-", " ").strip()
    return (words[:1].upper() + words[1:]) if words else "Value"


def _number_text(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def bounds_phrase(kind: str, constraints: Mapping[str, Any]) -> str:
    """``1-5``, ``>= 0``, ``at most 80 characters``: the bounds in a few words."""
    parts: list[str] = []
    if kind in ("integer", "number"):
        low, high = constraints.get("minimum"), constraints.get("maximum")
        lows = [f">= {_number_text(low)}"] if low is not None else []
        highs = [f"<= {_number_text(high)}"] if high is not None else []
        if "exclusiveMinimum" in constraints:
            lows.append(f"> {_number_text(constraints['exclusiveMinimum'])}")
        if "exclusiveMaximum" in constraints:
            highs.append(f"< {_number_text(constraints['exclusiveMaximum'])}")
        if low is not None and high is not None and len(lows) == len(highs) == 1:
            parts.append(f"{_number_text(low)}-{_number_text(high)}")
        elif lows or highs:
            parts.append(" and ".join(lows + highs))
        if "multipleOf" in constraints:
            parts.append(f"multiple of {_number_text(constraints['multipleOf'])}")
    else:
        low, high = constraints.get("minLength"), constraints.get("maxLength")
        if low is not None and high is not None:
            parts.append(f"{low}-{high} characters")
        elif low is not None:
            parts.append(f"at least {low} characters")
        elif high is not None:
            parts.append(f"at most {high} characters")
        if "format" in constraints:
            parts.append(f"format {constraints['format']}")
        if "pattern" in constraints:
            parts.append(f"matching {constraints['pattern']}")
    return ", ".join(parts)


_KIND_WORDS: Final[Mapping[str, str]] = {
    "string": "text",
    "integer": "integer",
    "number": "number",
    "boolean": "true or false",
    "enum": "one of",
    "date": "date",
    "datetime": "date-time",
    "time": "time",
    "uuid": "UUID",
    "json": "JSON",
}


def _type_phrase(
    kind: SlotKind, enum: tuple[Any, ...] | None, constraints: Mapping[str, Any]
) -> str:
    if kind == "enum" and enum is not None:
        return "one of " + ", ".join(str(v) for v in enum)
    bounds = bounds_phrase(kind, constraints)
    return f"{_KIND_WORDS[kind]} {bounds}" if bounds else _KIND_WORDS[kind]


def _instruction(
    name: str,
    title: str | None,
    description: str | None,
    kind: SlotKind,
    enum: tuple[Any, ...] | None,
    constraints: Mapping[str, Any],
    *,
    list_of: bool = False,
) -> str:
    if description and description.strip():
        return description.strip()
    base = title.strip() if title and title.strip() else _humanize(name)
    phrase = _type_phrase(kind, enum, constraints)
    return f"{base} (list of {phrase})" if list_of else f"{base} ({phrase})"


def _text(node: Mapping[str, Any], key: str) -> str | None:
    value = node.get(key)
    return value if isinstance(value, str) else None


def _field_title(raw: Any, node: Mapping[str, Any]) -> str | None:
    """The field's own title: a referenced definition's title names a type, not a field."""
    if isinstance(raw, Mapping) and isinstance(raw.get("title"), str):
        return str(raw["title"])
    if isinstance(raw, Mapping) and ("$ref" in raw or "anyOf" in raw or "allOf" in raw):
        return None
    return _text(node, "title")


class _Compiler:
    def __init__(self, document: Mapping[str, Any], model: type[BaseModel] | None) -> None:
        self.document = document
        self.model = model
        self.doc = SchemaDocument(document)
        self.slots: list[Slot] = []
        self.arrays: list[ArrayNode] = []
        self.objects: list[ObjectNode] = []

    def run(self) -> SlotPlan:
        root = self.doc.unwrap(self.document, "")
        node = root.node
        if root.union or root.recursive or root.nullable or not self._is_object(node):
            raise SchemaError("the root schema must describe an object", location="")
        self._object(node, root.location, root.chain, (), (), None)
        title = _text(node, "title") or (self.model.__name__ if self.model else "Output")
        return SlotPlan(
            slots=tuple(self.slots),
            schema=self.document,
            model=self.model,
            title=title,
            description=_text(node, "description"),
            arrays=tuple(self.arrays),
            objects=tuple(self.objects),
        )

    # -- classification -------------------------------------------------------------

    @staticmethod
    def _type_of(node: Mapping[str, Any], location: str) -> str | None:
        kind = node.get("type")
        if kind is None:
            if "properties" in node:
                return "object"
            if "items" in node or "prefixItems" in node:
                return "array"
            return None
        if not isinstance(kind, str) or kind not in _KNOWN_TYPES:
            raise SchemaError(f"unknown type {kind!r}", location=child_pointer(location, "type"))
        return kind

    def _is_object(self, node: Mapping[str, Any]) -> bool:
        return self._type_of(node, "") == "object" or "properties" in node

    @staticmethod
    def _has_properties(node: Mapping[str, Any], location: str) -> bool:
        props = node.get("properties")
        if props is None:
            return False
        if not isinstance(props, Mapping):
            raise SchemaError(
                "properties must be an object", location=child_pointer(location, "properties")
            )
        return len(props) > 0

    def _scalar_kind(self, u: Unwrapped) -> tuple[SlotKind, tuple[Any, ...] | None] | None:
        """The kind of a scalar leaf, or ``None`` when ``u`` is not a scalar."""
        node, location = u.node, u.location
        if "enum" in node:
            values = node["enum"]
            if not isinstance(values, list) or not values:
                raise SchemaError(
                    "enum must be a non-empty array", location=child_pointer(location, "enum")
                )
            if all(isinstance(v, (str, int, float, bool)) for v in values):
                return "enum", tuple(values)
            return None
        if "const" in node:
            value = node["const"]
            return ("enum", (value,)) if isinstance(value, (str, int, float, bool)) else None
        kind = self._type_of(node, location)
        if kind is None or kind not in _SCALAR_TYPES:
            return None
        if kind == "string":
            fmt = node.get("format")
            if isinstance(fmt, str) and fmt in _FORMAT_KINDS:
                return _FORMAT_KINDS[fmt], None
        return _SCALAR_TYPES[kind], None

    # -- expansion ------------------------------------------------------------------

    def _object(
        self,
        node: Mapping[str, Any],
        location: str,
        chain: tuple[str, ...],
        segments: tuple[Segment, ...],
        parents: tuple[ObjectNode, ...],
        array: ArrayNode | None,
    ) -> None:
        self._has_properties(node, location)
        props: Mapping[str, Any] = node.get("properties") or {}
        required = node.get("required") or []
        for key, sub in props.items():
            self._field(
                sub,
                child_pointer(location, "properties", key),
                chain,
                (*segments, key),
                parents,
                key in required,
                array,
            )

    def _field(
        self,
        raw: Any,
        location: str,
        chain: tuple[str, ...],
        segments: tuple[Segment, ...],
        parents: tuple[ObjectNode, ...],
        required: bool,
        array: ArrayNode | None,
    ) -> None:
        u = self.doc.unwrap(raw, location, chain)
        if u.recursive or u.union:
            self._json_slot(raw, u, segments, parents, required, array)
            return
        node = u.node
        scalar = self._scalar_kind(u)
        if scalar is not None:
            kind, enum = scalar
            self._scalar_slot(raw, u, kind, enum, segments, parents, required, array)
            return
        kind_name = self._type_of(node, u.location)
        if kind_name == "object" and self._has_properties(node, u.location):
            obj = ObjectNode(
                segments=segments,
                required=required,
                nullable=u.nullable,
                default=node.get("default", MISSING),
            )
            self.objects.append(obj)
            self._object(node, u.location, u.chain, segments, (*parents, obj), array)
            return
        if (
            kind_name == "array"
            and array is None
            and self._array(raw, u, segments, parents, required)
        ):
            return
        self._json_slot(raw, u, segments, parents, required, array)

    def _array(
        self,
        raw: Any,
        u: Unwrapped,
        segments: tuple[Segment, ...],
        parents: tuple[ObjectNode, ...],
        required: bool,
    ) -> bool:
        """Expand an array field; ``False`` when it must be a JSON slot instead."""
        node, location = u.node, u.location
        min_items = node.get("minItems", 0)
        max_items = node.get("maxItems")
        if max_items is not None and max_items < min_items:
            raise SchemaError(
                f"minItems ({min_items}) is greater than maxItems ({max_items})",
                location=child_pointer(location, "minItems"),
            )
        items = node.get("items")
        if "prefixItems" in node or not isinstance(items, Mapping) or not items:
            return False
        item = self.doc.unwrap(items, child_pointer(location, "items"), u.chain)
        if item.recursive or item.union:
            return False
        scalar = self._scalar_kind(item)
        item_segments = (*segments, INDEX)
        is_object = scalar is None and (
            self._type_of(item.node, item.location) == "object"
            and self._has_properties(item.node, item.location)
        )
        if scalar is None and not is_object:
            return False
        array = ArrayNode(
            segments=segments,
            required=required,
            min_items=min_items,
            max_items=max_items,
            items_are_objects=is_object,
            nullable=u.nullable,
            default=node.get("default", MISSING),
            description=_text(node, "description"),
        )
        self.arrays.append(array)
        if scalar is not None:
            kind, enum = scalar
            item_node = {**item.node}
            for key in ("description", "title"):
                if key in node:
                    item_node[key] = node[key]
                else:
                    item_node.pop(key, None)
            annotated = Unwrapped(item_node, item.location, item.chain, item.nullable)
            self._scalar_slot(
                {**items, "title": node["title"]} if "title" in node else items,
                annotated,
                kind,
                enum,
                item_segments,
                parents,
                required,
                array,
                list_of=True,
            )
            return True
        obj = ObjectNode(segments=item_segments, required=True, nullable=item.nullable)
        self.objects.append(obj)
        self._object(item.node, item.location, item.chain, item_segments, (*parents, obj), array)
        return True

    def _new_id(self) -> int:
        return len(self.slots) + 1

    def _scalar_slot(
        self,
        raw: Any,
        u: Unwrapped,
        kind: SlotKind,
        enum: tuple[Any, ...] | None,
        segments: tuple[Segment, ...],
        parents: tuple[ObjectNode, ...],
        required: bool,
        array: ArrayNode | None,
        *,
        list_of: bool = False,
    ) -> None:
        node = u.node
        constraints = {k: node[k] for k in CONSTRAINT_KEYWORDS if k in node}
        if kind in ("date", "datetime", "time", "uuid", "enum"):
            constraints.pop("format", None)
        self._add_slot(
            raw,
            node,
            kind,
            segments,
            parents,
            array,
            required=required,
            nullable=u.nullable,
            schema=self._bundle(raw),
            default=MISSING if list_of else node.get("default", MISSING),
            enum=enum,
            constraints=constraints,
            list_of=list_of,
        )

    def _json_slot(
        self,
        raw: Any,
        u: Unwrapped,
        segments: tuple[Segment, ...],
        parents: tuple[ObjectNode, ...],
        required: bool,
        array: ArrayNode | None,
    ) -> None:
        node = u.node
        if isinstance(raw, Mapping):
            node = {**node, **{k: raw[k] for k in ("title", "description", "default") if k in raw}}
        schema = self._bundle(raw)
        self._add_slot(
            raw,
            node,
            "json",
            segments,
            parents,
            array,
            required=required,
            nullable=u.nullable or jsonschema.Draft202012Validator(schema).is_valid(None),
            schema=schema,
            default=node.get("default", MISSING),
        )

    def _add_slot(
        self,
        raw: Any,
        node: Mapping[str, Any],
        kind: SlotKind,
        segments: tuple[Segment, ...],
        parents: tuple[ObjectNode, ...],
        array: ArrayNode | None,
        *,
        required: bool,
        nullable: bool,
        schema: Mapping[str, Any],
        default: Any,
        enum: tuple[Any, ...] | None = None,
        constraints: Mapping[str, Any] | None = None,
        list_of: bool = False,
    ) -> None:
        """Append the slot for ``node`` (titled and described from ``raw`` and ``node``)."""
        constraints = {} if constraints is None else constraints
        name = next((s for s in reversed(segments) if isinstance(s, str)), "")
        title = _field_title(raw, node)
        description = _text(node, "description")
        self.slots.append(
            Slot(
                id=self._new_id(),
                segments=segments,
                kind=kind,
                required=required,
                repeatable=array is not None,
                instruction=_instruction(
                    name, title, description, kind, enum, constraints, list_of=list_of
                ),
                nullable=nullable,
                array=array,
                parents=parents,
                enum=enum,
                constraints=constraints,
                schema=schema,
                default=default,
                title=title,
                description=description,
            )
        )

    def _bundle(self, raw: Any) -> Mapping[str, Any]:
        bundled = self.doc.bundle(raw)
        if isinstance(bundled, bool):
            return {} if bundled else {"not": {}}
        return bundled
