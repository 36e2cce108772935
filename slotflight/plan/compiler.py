"""The schema compiler: a Pydantic model or JSON Schema in, a :class:`SlotPlan` out.

Objects expand recursively; scalar leaves become slots; arrays of scalars become one
repeatable slot; arrays of objects make every leaf of the item a repeatable slot (one
array level). Whatever cannot be expanded (unions of objects, arrays of arrays, arrays
inside array items, arrays of objects that may be ``null``, tuples, recursive
references, untyped values, objects without ``properties``) becomes one ``json`` slot
validated against its self-contained sub-schema. Keys an object admits outside its
``properties`` go to its rest slot; a root that is not an object with properties is the
plan's single slot. Every valid schema within the bounds of :class:`CompileLimits`
compiles; any other raises :class:`SchemaError` with a pointer into it. A model is
compiled from its validation-mode schema, and refused when a field it reads could never
be asked for (:mod:`.pydantic_schema`). See ``docs/schema-support.md``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Final

import jsonpointer
from pydantic import BaseModel
from referencing._core import Resolver

from .._errors import SchemaError
from .limits import DEFAULT_LIMITS, Budget, CompileLimits, limit_error
from .model import (
    INDEX,
    MISSING,
    REST,
    ArrayNode,
    ObjectNode,
    Segment,
    Slot,
    SlotKind,
    SlotPlan,
)
from .pydantic_schema import model_schema
from .schema_walk import SchemaDocument, Unwrapped, child_pointer
from .validators import metered, pattern_search

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
#: Keywords copied into :attr:`Slot.constraints`, by the kinds they bound.
TEXT_CONSTRAINTS: Final = ("minLength", "maxLength", "pattern", "format")
NUMBER_CONSTRAINTS: Final = (
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
)
CONSTRAINT_KEYWORDS: Final = TEXT_CONSTRAINTS + NUMBER_CONSTRAINTS
_CONSTRAINTS_OF: Final[Mapping[str, tuple[str, ...]]] = {
    "string": TEXT_CONSTRAINTS,
    "integer": NUMBER_CONSTRAINTS,
    "number": NUMBER_CONSTRAINTS,
}
#: Keywords that may keep ``null`` out of a JSON slot (without any, it admits ``null``).
_RESTRICTING: Final = ("type", "enum", "const", "not", "$ref", "allOf", "anyOf", "oneOf")
#: Characters a prompt costs beyond its slots, and each slot beyond its own texts.
_PROMPT_FIXED_CHARS: Final = 2000
_PROMPT_CHARS_PER_SLOT: Final = 64
_KNOWN_TYPES: Final = frozenset({*_SCALAR_TYPES, "object", "array", "null"})
#: Applicators whose subschemas may evaluate keys outside the node's ``properties``.
_EVALUATING: Final = (
    "allOf",
    "anyOf",
    "oneOf",
    "if",
    "then",
    "else",
    "dependentSchemas",
    "dependencies",
    "$ref",
)


def compile(
    schema: type[BaseModel] | Mapping[str, Any], *, limits: CompileLimits | None = None
) -> SlotPlan:
    """Compile a Pydantic v2 model class or a JSON Schema dict into a :class:`SlotPlan`.

    Raises :class:`SchemaError` (``location``: JSON Pointer into the schema) when the
    schema is invalid, is not a schema at all, refers outside itself, is a model with a
    field its schema could never ask for, or crosses one of ``limits`` (default
    :data:`DEFAULT_LIMITS`; code ``schema_too_large``, the message names the bound). The
    work is bounded before it is done: O(schema nodes) checks, then an expansion that
    stops at ``max_slots`` / ``max_expansion``.
    """
    limits = limits or DEFAULT_LIMITS
    budget = Budget(limits)
    model: type[BaseModel] | None = None
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        model = schema
        document: Any = model_schema(model)
    elif isinstance(schema, Mapping):
        document = schema
    else:
        raise SchemaError(
            f"expected a Pydantic model class or a JSON Schema dict, got {type(schema).__name__}"
        )
    try:
        with metered(budget.pattern):  # every regex met while compiling is charged first
            doc = SchemaDocument(document, budget, naive_times=model is not None)
            return _Compiler(doc, model, budget).run()
    except RecursionError:  # only with limits above what the interpreter's stack holds
        raise limit_error("max_expansion_depth", "the schema nests too deeply to expand") from None


def _humanize(name: str) -> str:
    words = name.replace("_", " ").replace("-", " ").strip()
    return (words[:1].upper() + words[1:]) if words else "Value"


def _integral(value: Any) -> Any:
    """``5.0`` → ``5`` (a count written as a float); anything else unchanged."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _constraints(kind: SlotKind, node: Mapping[str, Any]) -> dict[str, Any]:
    """The constraints of ``node`` that bound a ``kind`` value, normalised.

    Only keywords that apply to the kind are kept (``minLength`` on a number is
    ignored, as JSON Schema does). Counts written as floats become integers; draft-04's
    boolean ``exclusiveMinimum``/``exclusiveMaximum`` become the numeric form.
    """
    out: dict[str, Any] = {}
    for key in _CONSTRAINTS_OF.get(kind, ()):
        value = node.get(key)
        if key == "format" or key == "pattern":
            if isinstance(value, str):
                out[key] = value
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            out[key] = _integral(value) if key in ("minLength", "maxLength") else value
    for flag, bound in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        if node.get(flag) is True and bound in out:
            out[flag] = out.pop(bound)
    return out


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
    def __init__(self, doc: SchemaDocument, model: type[BaseModel] | None, budget: Budget) -> None:
        self.doc = doc
        self.document = doc.root
        self.model = model
        self.budget = budget
        self.limits = budget.limits
        #: JSON Schema objects admit keys outside ``properties`` unless they say otherwise;
        #: a Pydantic model ignores them unless its config allows extra keys.
        self.open_by_default = model is None
        #: the formats the declared draft checks
        self._formats = frozenset(doc.context.cls.FORMAT_CHECKER.checkers)
        self.slots: list[Slot] = []
        self.arrays: list[ArrayNode] = []
        self.objects: list[ObjectNode] = []

    def run(self) -> SlotPlan:
        root = self.doc.unwrap(self.document, "", (), self.doc.context.resolver())
        node = root.node
        if self.doc.dynamic:
            self._dynamic_root(root)
        elif self._expands_as_object(root):
            self._object(node, root, (), (), None)
            if not self.slots:  # only {} is valid: the output is one JSON value after all
                self.objects.clear()
                self._root_slot(replace(root, union=True))
        else:
            self._root_slot(root)
        self._check_prompt_size()
        self.budget.check_time()
        title = _text(node, "title") or (self.model.__name__ if self.model else "Output")
        plan = SlotPlan(
            slots=tuple(self.slots),
            schema=self.document,
            model=self.model,
            title=title,
            description=_text(node, "description"),
            arrays=tuple(self.arrays),
            objects=tuple(self.objects),
            limits=self.limits,
        )
        plan._context.append(self.doc.context)
        return plan

    # -- classification -------------------------------------------------------------

    @staticmethod
    def _type_of(node: Mapping[str, Any], location: str) -> str | None:
        """The node's one type; ``None`` when it names none (it may then be anything)."""
        kind = node.get("type")
        if kind is None:
            return None
        if not isinstance(kind, str) or kind not in _KNOWN_TYPES:
            raise SchemaError(f"unknown type {kind!r}", location=child_pointer(location, "type"))
        return kind

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

    def _expands_as_object(self, u: Unwrapped) -> bool:
        """The root expands into fields (and a rest slot) rather than being one slot."""
        if u.union or u.recursive or u.nullable:
            return False
        return self._type_of(u.node, u.location) == "object"

    def _admits_other_keys(self, node: Mapping[str, Any]) -> bool:
        """Whether the object may hold keys outside ``properties`` (its rest slot)."""
        extra = node.get("additionalProperties", MISSING)
        if node.get("patternProperties"):
            return True
        if extra is MISSING:
            if not self.open_by_default:
                return False
            # unevaluatedProperties: false still admits the keys a subschema evaluates
            # (allOf, if/then, dependentSchemas …); the whole-object check decides
            closed = node.get("unevaluatedProperties", True) is False
            return not closed or any(k in node for k in _EVALUATING)
        return extra is not False

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
            # a kind of its own only where the draft checks the format (draft 7 has no
            # "uuid", draft 4 no "date"): elsewhere it is any text
            if isinstance(fmt, str) and fmt in _FORMAT_KINDS and fmt in self._formats:
                return _FORMAT_KINDS[fmt], None
        return _SCALAR_TYPES[kind], None

    # -- expansion ------------------------------------------------------------------

    def _object(
        self,
        node: Mapping[str, Any],
        u: Unwrapped,
        segments: tuple[Segment, ...],
        parents: tuple[ObjectNode, ...],
        array: ArrayNode | None,
    ) -> None:
        location = u.location
        self._has_properties(node, location)
        props: Mapping[str, Any] = node.get("properties") or {}
        raw_required = node.get("required")
        # the names once each, in order: looked up per property in O(1), not O(names)
        required = dict.fromkeys(
            [r for r in raw_required if isinstance(r, str)]
            if isinstance(raw_required, list)
            else []
        )
        for key, sub in props.items():
            self._field(
                sub,
                child_pointer(location, "properties", key),
                u,
                (*segments, key),
                parents,
                key in required,
                array,
            )
        undeclared = [name for name in required if name not in props]
        for name in undeclared:
            self._required_only(node, u, name, segments, parents, array)
        if self._admits_other_keys(node):
            self._rest_slot(node, u, [*props, *undeclared], segments, parents, array)

    def _schema_for_key(self, node: Mapping[str, Any], name: str) -> Any:
        """The schema an object applies to its key ``name`` outside ``properties``
        (``None`` when the object does not admit it)."""
        patterns = node.get("patternProperties") or {}
        matching = [sub for pattern, sub in patterns.items() if pattern_search(pattern, name)]
        if matching:
            return matching[0] if len(matching) == 1 else {"allOf": matching}
        extra = node.get("additionalProperties", True)
        if extra is False:
            return None
        return extra

    def _required_only(
        self,
        node: Mapping[str, Any],
        u: Unwrapped,
        name: str,
        segments: tuple[Segment, ...],
        parents: tuple[ObjectNode, ...],
        array: ArrayNode | None,
    ) -> None:
        """A ``required`` name without a property: a required JSON slot of its own."""
        schema = self._schema_for_key(node, name)
        if schema is None:
            raise SchemaError(
                f"required property {name!r} is not allowed (additionalProperties is false)",
                location=child_pointer(u.location, "required"),
            )
        raw = {} if schema is True else schema
        inner = Unwrapped(raw if isinstance(raw, Mapping) else {}, u.location, u.chain, u.resolver)
        self._json_slot(raw, u.resolver, inner, (*segments, name), parents, True, array)

    def _rest_slot(
        self,
        node: Mapping[str, Any],
        u: Unwrapped,
        declared: list[str],
        segments: tuple[Segment, ...],
        parents: tuple[ObjectNode, ...],
        array: ArrayNode | None,
    ) -> None:
        """The slot for the object's other keys: a JSON object merged into it."""
        rest: dict[str, Any] = {"type": "object"}
        for key in ("patternProperties", "additionalProperties"):
            if key in node:
                rest[key] = node[key]
        if declared:
            rest["propertyNames"] = {"not": {"enum": declared}}
        if "propertyNames" in node:
            rest["allOf"] = [{"propertyNames": node["propertyNames"]}]
        name = next((s for s in reversed(segments) if isinstance(s, str)), "")
        owner = _text(node, "title") or (_humanize(name) if name else "the output")
        described = {**rest, "description": f"Other fields of {owner}, as one JSON object"}
        self._add_slot(
            described,
            described,
            "json",
            (*segments, REST),
            parents,
            array,
            required=False,
            nullable=False,
            schema=self._bundle(rest, u.resolver),
            default=MISSING,
        )

    def _root_slot(self, u: Unwrapped) -> None:
        """A root that is not an object with fields: the output is one slot's value."""
        scalar = None if u.union or u.recursive else self._scalar_kind(u)
        if scalar is not None:
            kind, enum = scalar
            self._scalar_slot(self.document, self._root_scope, u, kind, enum, (), (), True, None)
        else:
            self._json_slot(self.document, self._root_scope, u, (), (), True, None)

    def _dynamic_root(self, u: Unwrapped) -> None:
        """A document with ``$dynamicRef``/``$recursiveRef``: one ``json`` slot checked
        against the whole document (a part of it, copied out, would lose the dynamic
        scope its references resolve in)."""
        self._add_slot(
            self.document,
            u.node,
            "json",
            (),
            (),
            None,
            required=True,
            nullable=not any(k in self.document for k in _RESTRICTING),
            schema=self.document,
            default=self._checked_default(self.document, self._root_scope, u, self.document),
        )

    def _field(
        self,
        raw: Any,
        location: str,
        parent: Unwrapped,
        segments: tuple[Segment, ...],
        parents: tuple[ObjectNode, ...],
        required: bool,
        array: ArrayNode | None,
    ) -> None:
        self.budget.spend(1, location)
        if len(segments) > self.limits.max_expansion_depth:
            raise limit_error(
                "max_expansion_depth",
                f"objects and arrays nest deeper than {self.limits.max_expansion_depth} levels",
                location,
            )
        scope = parent.resolver
        u = self.doc.unwrap(raw, location, parent.chain, scope)
        if u.recursive or u.union:
            self._json_slot(raw, scope, u, segments, parents, required, array)
            return
        node = u.node
        scalar = self._scalar_kind(u)
        if scalar is not None:
            kind, enum = scalar
            self._scalar_slot(raw, scope, u, kind, enum, segments, parents, required, array)
            return
        kind_name = self._type_of(node, u.location)
        if kind_name == "object" and self._has_properties(node, u.location):
            obj = ObjectNode(
                segments=segments,
                required=required,
                nullable=u.nullable,
                default=self._checked_default(raw, scope, u),
            )
            self.objects.append(obj)
            self._object(node, u, segments, (*parents, obj), array)
            return
        if (
            kind_name == "array"
            and array is None
            and self._array(raw, scope, u, segments, parents, required)
        ):
            return
        self._json_slot(raw, scope, u, segments, parents, required, array)

    def _array(
        self,
        raw: Any,
        scope: Resolver[Any],
        u: Unwrapped,
        segments: tuple[Segment, ...],
        parents: tuple[ObjectNode, ...],
        required: bool,
    ) -> bool:
        """Expand an array field; ``False`` when it must be a JSON slot instead."""
        node, location = u.node, u.location
        min_items = _integral(node.get("minItems", 0))
        max_items = _integral(node.get("maxItems"))
        if not isinstance(min_items, int) or (
            max_items is not None and not isinstance(max_items, int)
        ):
            return False
        if max_items is not None and max_items < min_items:
            raise SchemaError(
                f"minItems ({min_items}) is greater than maxItems ({max_items})",
                location=child_pointer(location, "minItems"),
            )
        items = node.get("items")
        if "prefixItems" in node or not isinstance(items, Mapping) or not items:
            return False
        item = self.doc.unwrap(items, child_pointer(location, "items"), u.chain, u.resolver)
        if item.recursive or item.union:
            return False
        scalar = self._scalar_kind(item)
        item_segments = (*segments, INDEX)
        is_object = scalar is None and (
            self._type_of(item.node, item.location) == "object"
            and self._has_properties(item.node, item.location)
        )
        # an item that may be null is no object to expand: no frame writes a null item
        if (scalar is None and not is_object) or (is_object and item.nullable):
            return False
        array = ArrayNode(
            segments=segments,
            required=required,
            min_items=min_items,
            max_items=max_items,
            items_are_objects=is_object,
            nullable=u.nullable,
            default=self._checked_default(raw, scope, u),
            description=_text(node, "description"),
            extensions={k: v for k, v in node.items() if str(k).startswith("x-slotflight-")},
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
            annotated = Unwrapped(
                item_node, item.location, item.chain, item.resolver, item.nullable
            )
            self._scalar_slot(
                items,
                u.resolver,
                annotated,
                kind,
                enum,
                item_segments,
                parents,
                required,
                array,
                list_of=True,
                title=_text(node, "title"),
            )
            return True
        obj = ObjectNode(segments=item_segments, required=True)
        self.objects.append(obj)
        self._object(item.node, item, item_segments, (*parents, obj), array)
        return True

    def _scalar_slot(
        self,
        raw: Any,
        scope: Resolver[Any],
        u: Unwrapped,
        kind: SlotKind,
        enum: tuple[Any, ...] | None,
        segments: tuple[Segment, ...],
        parents: tuple[ObjectNode, ...],
        required: bool,
        array: ArrayNode | None,
        *,
        list_of: bool = False,
        title: str | None = None,
    ) -> None:
        node = u.node
        schema = self._bundle(raw, scope)
        shown = {**raw, "title": title} if title is not None and isinstance(raw, Mapping) else raw
        self._add_slot(
            shown,
            node,
            kind,
            segments,
            parents,
            array,
            required=required,
            nullable=u.nullable,
            schema=schema,
            default=MISSING if list_of else self._checked_default(raw, scope, u, schema),
            enum=enum,
            constraints=_constraints(kind, node),
            list_of=list_of,
        )

    def _json_slot(
        self,
        raw: Any,
        scope: Resolver[Any],
        u: Unwrapped,
        segments: tuple[Segment, ...],
        parents: tuple[ObjectNode, ...],
        required: bool,
        array: ArrayNode | None,
    ) -> None:
        node = u.node
        if isinstance(raw, Mapping):
            node = {**node, **{k: raw[k] for k in ("title", "description", "default") if k in raw}}
        schema = self._bundle(raw, scope)
        self._add_slot(
            raw,
            node,
            "json",
            segments,
            parents,
            array,
            required=required,
            nullable=u.nullable or not any(k in schema for k in _RESTRICTING),
            schema=schema,
            default=self._checked_default(raw, scope, u, schema),
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
        if len(self.slots) >= self.limits.max_slots:
            raise limit_error(
                "max_slots", f"the schema expands to more than {self.limits.max_slots} slots"
            )
        constraints = {} if constraints is None else constraints
        name = next((s for s in reversed(segments) if isinstance(s, str)), "")
        title = _field_title(raw, node)
        if not segments and title is None:
            title = _text(node, "title") or (self.model.__name__ if self.model else "Output")
        description = _text(node, "description")
        self.slots.append(
            Slot(
                id=len(self.slots) + 1,
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

    # -- schemas of slots ---------------------------------------------------------------

    def _bundle(self, raw: Any, scope: Resolver[Any]) -> Mapping[str, Any]:
        """The self-contained schema of ``raw``, which sits in ``scope``."""
        bundled = self.doc.bundle(raw, scope)
        if isinstance(bundled, bool):
            return {} if bundled else {"not": {}}
        return bundled

    @property
    def _root_scope(self) -> Resolver[Any]:
        return self.doc.context.resolver()

    def _accepts(self, schema: Mapping[str, Any], value: Any) -> bool:
        try:
            return bool(self.doc.context.standalone(schema).is_valid(value))
        except SchemaError:  # a bound crossed while checking (a costly regex)
            raise
        except Exception:  # an unusual schema: treat the value as not accepted
            return False

    def _checked_default(
        self,
        raw: Any,
        scope: Resolver[Any],
        u: Unwrapped,
        schema: Mapping[str, Any] | None = None,
    ) -> Any:
        """The node's ``default`` when it is valid against the node's own schema, else
        ``MISSING``: a default that breaks its schema is never filled in."""
        default = u.node.get("default", MISSING)
        if isinstance(raw, Mapping) and "default" in raw:
            default = raw["default"]
        if default is MISSING:
            return MISSING
        checked = schema if schema is not None else self._bundle(raw, scope)
        return default if self._accepts(checked, default) else MISSING

    # -- bounds -------------------------------------------------------------------------

    def _check_prompt_size(self) -> None:
        """Refuse a plan whose prompt would exceed ``max_prompt_chars``, estimated from the
        plan before any prompt text is written: the fixed text, then per slot its line
        (instruction, path, enum values, a JSON slot's schema in full) and its
        example values (text as long as ``minLength``, or the schema's own example or
        default, ``minItems`` items). On the corpus
        the estimate is within a few percent of the prompts it predicts above 50,000
        characters; :func:`slotflight.prompt` checks the text itself too."""
        bound = self.limits.max_prompt_chars
        total = _PROMPT_FIXED_CHARS
        for slot in self.slots:
            count = 1
            if slot.array is not None:
                count = max(min(2, slot.array.max_items or 2), slot.array.min_items)
            total += _PROMPT_CHARS_PER_SLOT + len(slot.instruction) + len(slot.path)
            total += sum(len(str(value)) + 3 for value in slot.enum or ())
            total += count * _example_weight(slot.kind, slot.schema, slot.schema, 0, bound)
            total += count * _own_example_chars(slot.example)
            if slot.kind == "json":
                total += len(json.dumps(slot.schema, ensure_ascii=False, default=str))
            if total > bound:
                raise limit_error(
                    "max_prompt_chars",
                    f"the prompt for this schema would exceed {bound} characters",
                )


def _own_example_chars(value: Any) -> int:
    """The length of a slot's own example (:attr:`Slot.example`), which the prompt's
    example answer writes as the value, once per item."""
    if value is MISSING:
        return 0
    if isinstance(value, str):
        return len(value)
    return len(json.dumps(value, ensure_ascii=False, default=str))


def _example_weight(kind: str, schema: Any, root: Mapping[str, Any], depth: int, cap: int) -> int:
    """About how many characters an example value for ``schema`` takes (at most ``cap``).

    Mirrors how examples are made: text as long as ``minLength``, arrays as long as
    ``minItems`` (at least one), objects with their required properties, six levels deep.
    """
    if kind not in ("json", "string"):
        return 40
    if not isinstance(schema, Mapping) or depth > 6:
        return 2
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/"):
        try:
            target = jsonpointer.resolve_pointer(root, ref[1:])
        except (jsonpointer.JsonPointerException, TypeError):
            return 2
        return _example_weight(kind, target, root, depth + 1, cap)
    low = schema.get("minLength")
    weight = 24 + (int(low) if isinstance(low, (int, float)) and not isinstance(low, bool) else 0)
    if kind == "string":
        return min(weight, cap)
    props = schema.get("properties")
    if isinstance(props, Mapping):
        for name in schema.get("required") or ():
            if isinstance(name, str) and name in props:
                weight += len(name) + _example_weight(kind, props[name], root, depth + 1, cap)
                if weight >= cap:
                    return cap
    items = schema.get("items")
    if isinstance(items, Mapping):
        count = schema.get("minItems", 1)
        count = max(int(count), 1) if isinstance(count, (int, float)) else 1
        weight += count * _example_weight(kind, items, root, depth + 1, cap)
    for keyword in ("anyOf", "oneOf", "allOf", "prefixItems"):
        branches = schema.get(keyword)
        if isinstance(branches, list):
            for branch in branches[:1] if keyword != "prefixItems" else branches:
                weight += _example_weight(kind, branch, root, depth + 1, cap)
    return min(weight, cap)
