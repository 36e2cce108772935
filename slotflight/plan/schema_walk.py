"""Reading a JSON Schema document: checks, ``$ref`` resolution, wrapper unwrapping, bundling.

The compiler never follows a reference by hand; it asks :class:`SchemaDocument`, which

- checks the whole document once, bounded (:meth:`SchemaDocument.scan`): size and depth,
  finite numbers, the sizes the schema asks to generate, every regex (it must run on the
  linear-time engine), and every reference (it must resolve inside the document, through
  ``referencing`` with ``$id`` scopes; nothing is ever fetched);
- resolves references for the expansion (:meth:`SchemaDocument.unwrap`), reporting cycles;
- copies a subschema with everything it refers to (:meth:`SchemaDocument.bundle`).

Every error is a :class:`SchemaError` whose ``location`` points into the document.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Final
from urllib.parse import urljoin

import jsonpointer
import jsonschema
import referencing
import referencing.exceptions
from referencing._core import Resolved, Resolver

from .._errors import SchemaError
from .._jsonable import LONE_SURROGATE
from .limits import Budget, limit_error
from .validators import SchemaContext, is_meta_schema_uri, pattern_error

__all__ = ["ANNOTATIONS", "SchemaDocument", "Unwrapped", "child_pointer", "is_null_schema"]

#: Keywords whose values are data, not subschemas: never searched for ``$ref``.
_DATA_KEYWORDS: Final = frozenset({"enum", "const", "default", "examples"})
#: Keywords whose value maps names to subschemas (a ``$ref`` key there is a name).
_NAMED_SCHEMAS: Final = frozenset(
    {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"}
)
_REFERENCES: Final = ("$ref", "$dynamicRef", "$recursiveRef")
#: Keywords that only describe: a wrapper made of these and one combinator is unwrapped.
ANNOTATIONS: Final = frozenset(
    {
        "title",
        "description",
        "default",
        "examples",
        "$comment",
        "deprecated",
        "readOnly",
        "writeOnly",
        "$id",
        "id",
        "$schema",
        "$anchor",
        "$defs",
        "definitions",
    }
)
#: Keywords that fix a node's shape on their own (combinators beside them only constrain).
_SHAPE: Final = frozenset(
    {"type", "properties", "items", "prefixItems", "enum", "const", "additionalProperties"}
)
_COMBINATORS: Final = frozenset({"allOf", "anyOf", "oneOf", "not", "if", "then", "else"})
#: Numeric keywords whose value makes the example (and the output) that large.
_SIZE_KEYWORDS: Final[Mapping[str, str]] = {
    "minLength": "max_string_length",
    "minItems": "max_min_items",
    "minProperties": "max_min_items",
    "minContains": "max_min_items",
}
#: Integers in the schema beyond this many bits are refused (they could not be written).
_MAX_INT_BITS: Final = 1024


#: Keywords whose value is one subschema.
_SCHEMA_VALUED: Final = frozenset(
    {
        "additionalItems",
        "additionalProperties",
        "contains",
        "contentSchema",
        "else",
        "if",
        "not",
        "propertyNames",
        "then",
        "unevaluatedItems",
        "unevaluatedProperties",
    }
)
#: Keywords whose value is a non-empty list of subschemas.
_SCHEMA_LISTS: Final = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})
_COUNTS: Final = frozenset(
    {
        "minLength",
        "maxLength",
        "minItems",
        "maxItems",
        "minProperties",
        "maxProperties",
        "minContains",
        "maxContains",
    }
)
_NUMBERS: Final = frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})
_STRINGS: Final = frozenset(
    {"pattern", "format", "$schema", "$anchor", "$dynamicAnchor", "$comment", "title"}
)
#: Drafts whose base URI keyword is ``id`` (later ones: ``$id``).
_ID_DRAFTS: Final = frozenset({jsonschema.Draft3Validator, jsonschema.Draft4Validator})
_TYPES: Final = frozenset({"string", "integer", "number", "boolean", "object", "array", "null"})


def _surrogate(location: str) -> SchemaError:
    return SchemaError("text with a lone surrogate (not valid Unicode)", location=location)


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1") if "~" in key or "/" in key else key


def _odd_number(value: Any) -> bool:
    """A number JSON cannot carry: not finite, or an integer beyond 1024 bits."""
    if isinstance(value, float):
        return not math.isfinite(value)
    return isinstance(value, int) and value.bit_length() > _MAX_INT_BITS


def _is_schema(value: Any) -> bool:
    return isinstance(value, (Mapping, bool))


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _shape_problem(key: str, value: Any, modern_items: bool) -> str | None:
    """Why ``value`` is not a valid ``key`` (the meta-schema's rules), or ``None``."""
    if key in _SCHEMA_VALUED:
        return None if _is_schema(value) else "must be a schema"
    if key in _NAMED_SCHEMAS:
        if not isinstance(value, Mapping) or not all(_is_schema(v) for v in value.values()):
            return "must be an object of schemas"
        return None
    if key in _SCHEMA_LISTS:
        if not isinstance(value, list) or not value or not all(_is_schema(v) for v in value):
            return "must be a non-empty array of schemas"
        return None
    if key == "items":
        if _is_schema(value) or (
            not modern_items and isinstance(value, list) and all(_is_schema(v) for v in value)
        ):
            return None
        return "must be a schema"
    if key == "type":
        names = value if isinstance(value, list) else [value]
        if not names or not all(isinstance(n, str) and n in _TYPES for n in names):
            return f"must name JSON types, not {value!r:.80}"
        return None
    if key in _COUNTS:
        if not _is_number(value) or value < 0 or value != int(value):
            return "must be a non-negative integer"
        return None
    if key in _NUMBERS:
        if _is_number(value) or (isinstance(value, bool) and key.startswith("exclusive")):
            return None
        return "must be a number"
    if key == "multipleOf":
        return None if _is_number(value) and value > 0 else "must be a number above 0"
    if key in _STRINGS:
        return None if isinstance(value, str) else "must be a string"
    if key == "enum":
        return None if isinstance(value, list) else "must be an array"
    if key == "required":
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            return "must be an array of strings"
        return None
    if key == "uniqueItems":
        return None if isinstance(value, bool) else "must be a boolean"
    if key in ("dependentRequired", "dependencies"):
        if not isinstance(value, Mapping):
            return "must be an object"
        for item in value.values():
            strings = isinstance(item, list) and all(isinstance(v, str) for v in item)
            if not strings and not (key == "dependencies" and _is_schema(item)):
                return "must map names to arrays of names" + (
                    " or schemas" if key == "dependencies" else ""
                )
        return None
    return None


def child_pointer(location: str, *keys: str | int) -> str:
    """``location`` extended by ``keys`` (each escaped per RFC 6901)."""
    return location + "".join("/" + jsonpointer.escape(str(k)) for k in keys)


def is_null_schema(node: Any) -> bool:
    if not isinstance(node, Mapping):
        return False
    if node.get("type") == "null":
        return True
    if "const" in node and node["const"] is None:
        return True
    enum = node.get("enum")
    return isinstance(enum, list) and len(enum) > 0 and all(v is None for v in enum)


@dataclass(frozen=True)
class Unwrapped:
    """A subschema with references, wrappers and null unions removed.

    ``node`` is the effective schema (annotations of the wrappers merged over the
    target's), ``location`` the pointer where it was found (a ``$defs`` entry after a
    reference), ``chain`` the reference targets followed from the root down to here,
    ``resolver`` the ``referencing`` resolver in scope there (``$id`` aware).
    ``recursive`` is set when a reference points back into ``chain``: the node cannot be
    expanded and becomes a JSON slot. ``union`` is set when several non-null
    alternatives remain (``anyOf``/``oneOf`` of different schemas, ``type`` lists).
    """

    node: Mapping[str, Any]
    location: str
    chain: tuple[str, ...]
    resolver: Resolver[Any]
    nullable: bool = False
    recursive: bool = False
    union: bool = False


class SchemaDocument:
    """One JSON Schema document: checked once, then read by the compiler."""

    def __init__(
        self, root: Mapping[str, Any], budget: Budget, *, naive_times: bool = False
    ) -> None:
        self.root = root
        self.budget = budget
        self.limits = budget.limits
        #: pointer of every object node of the document, by identity
        self._pointers: dict[int, str] = {}
        #: whether every subschema has the root's base URI (no embedded ``$id``); then
        #: a reference means the same everywhere and lookups are cached
        self._one_base = True
        self._lookups: dict[str, tuple[Mapping[str, Any], str, Resolver[Any]]] = {}
        #: whether the document uses ``$dynamicRef`` or ``$recursiveRef``: what those
        #: resolve to depends on the path from the root, so no part of the document can
        #: be checked on its own (the compiler makes the whole output one slot)
        self.dynamic = False
        self.scan()
        try:
            self.context = SchemaContext(root, naive_times=naive_times)
        except Exception as exc:  # an $id or a subschema referencing cannot read
            raise SchemaError(f"not a valid JSON Schema: {exc!r:.200}") from exc
        self.check()

    # -- the one-time checks ----------------------------------------------------------

    def scan(self) -> None:
        """Bounded walk of the whole document as JSON data (iterative: no recursion).

        O(nodes). Refuses a document over ``max_schema_nodes`` or ``max_schema_depth``,
        non-finite numbers, integers beyond 1024 bits and keys that are not strings;
        records the pointer of every object.
        """
        limits = self.limits
        stack: list[tuple[Any, str, int]] = [(self.root, "", 0)]
        seen = 0
        while stack:
            value, location, depth = stack.pop()
            seen += 1
            if seen > limits.max_schema_nodes:
                raise limit_error(
                    "max_schema_nodes",
                    f"the schema has more than {limits.max_schema_nodes} nodes",
                    location,
                )
            if depth > limits.max_schema_depth:
                raise limit_error(
                    "max_schema_depth",
                    f"the schema nests deeper than {limits.max_schema_depth} levels",
                    location,
                )
            if isinstance(value, Mapping):
                self._pointers.setdefault(id(value), location)
                if location and (
                    isinstance(value.get("$id"), str) or isinstance(value.get("id"), str)
                ):
                    self._one_base = False
                for key, child in value.items():
                    if not isinstance(key, str):
                        raise SchemaError("object keys must be strings", location=location)
                    if LONE_SURROGATE.search(key) is not None:
                        raise _surrogate(location)
                    if isinstance(child, str):
                        if LONE_SURROGATE.search(child) is not None:
                            raise _surrogate(f"{location}/{_escape(key)}")
                    elif isinstance(child, (Mapping, list)) or _odd_number(child):
                        stack.append((child, f"{location}/{_escape(key)}", depth + 1))
            elif isinstance(value, list):
                for i, item in enumerate(value):
                    if isinstance(item, str):
                        if LONE_SURROGATE.search(item) is not None:
                            raise _surrogate(f"{location}/{i}")
                    elif isinstance(item, (Mapping, list)) or _odd_number(item):
                        stack.append((item, f"{location}/{i}", depth + 1))
            elif isinstance(value, float):
                raise SchemaError(f"{value} is not a JSON number", location=location)
            elif isinstance(value, int):
                raise SchemaError("integer too large", location=location)
        self.budget.spend(seen // 16)

    def check(self) -> None:
        """Every subschema of the document, checked once (iterative, O(nodes)).

        - keyword shapes (the part of the meta-schema the compiler and the validators
          rely on: types, counts, bounds, subschema positions), for the declared draft;
        - sizes the schema asks to generate (``minLength``, ``minItems`` …) and
          ``multipleOf`` within the limits;
        - every regex runs on the linear-time engine;
        - every ``$ref`` / ``$dynamicRef`` / ``$recursiveRef`` resolves inside the
          document, with ``$id`` scopes (nothing is fetched).
        """
        specification = self.context.specification
        legacy = self.context.legacy_refs
        modern_items = not legacy and self.context.draft is not jsonschema.Draft201909Validator
        id_keyword = "id" if self.context.draft in _ID_DRAFTS else "$id"
        stack: list[tuple[Any, str, Resolver[Any]]] = [(self.root, "", self.context.resolver())]
        while stack:
            node, location, resolver = stack.pop()
            if isinstance(node, bool):
                continue
            if not isinstance(node, Mapping):
                raise SchemaError("a schema must be an object or a boolean", location=location)
            self.budget.spend(1, location)
            referring = legacy and "$ref" in node
            if not referring and not isinstance(node.get(id_keyword, ""), str):
                raise SchemaError(  # the draft reads it as a URI (beside $ref: ignored)
                    f"not a valid JSON Schema: {id_keyword} must be a string",
                    location=child_pointer(location, id_keyword),
                )
            if location and specification.id_of(node):
                resolver = resolver.in_subresource(specification.create_resource(node))
            for key, value in node.items():
                here = f"{location}/{_escape(key)}"
                if key in _REFERENCES:
                    if not isinstance(value, str):
                        raise SchemaError(f"{key} must be a string", location=here)
                    self._resolve(value, resolver, here)
                    self.dynamic = self.dynamic or key != "$ref"
                    continue
                if referring and key not in ("definitions", "$defs"):
                    continue  # drafts 3 to 7 ignore what stands beside $ref
                problem = _shape_problem(key, value, modern_items)
                if problem is not None:
                    raise SchemaError(f"not a valid JSON Schema: {key} {problem}", location=here)
                self._check_value(key, value, here)
                if key in _SCHEMA_VALUED or (key == "items" and not isinstance(value, list)):
                    stack.append((value, here, resolver))
                elif key in _NAMED_SCHEMAS:
                    stack.extend(
                        (sub, f"{here}/{_escape(name)}", resolver) for name, sub in value.items()
                    )
                elif key in _SCHEMA_LISTS or key == "items":
                    stack.extend((sub, f"{here}/{i}", resolver) for i, sub in enumerate(value))
                elif key == "dependencies":
                    stack.extend(
                        (sub, f"{here}/{_escape(name)}", resolver)
                        for name, sub in value.items()
                        if not isinstance(sub, list)
                    )

    def _check_value(self, key: str, value: Any, location: str) -> None:
        """The limits on one keyword's value (its shape is already checked)."""
        limits = self.limits
        if key in _SIZE_KEYWORDS:
            bound = getattr(limits, _SIZE_KEYWORDS[key])
            if value > bound:
                raise limit_error(_SIZE_KEYWORDS[key], f"{key} {value} is over {bound}", location)
        elif key == "multipleOf":
            if not math.isfinite(1.0 / value):
                raise SchemaError(
                    f"multipleOf {value} cannot be checked (too small)", location=location
                )
        elif key == "pattern":
            self._check_pattern(value, location)
        elif key == "patternProperties":
            for pattern in value:
                self._check_pattern(pattern, f"{location}/{_escape(pattern)}")

    def _check_pattern(self, pattern: str, location: str) -> None:
        if len(pattern) > self.limits.max_pattern_chars:
            raise limit_error(
                "max_pattern_chars",
                f"pattern longer than {self.limits.max_pattern_chars} characters",
                location,
            )
        self.budget.pattern(pattern, location)  # before compiling it
        reason = pattern_error(pattern)
        if reason is not None:
            raise SchemaError(
                f"pattern {pattern!r} cannot run on the linear-time regex engine: {reason}",
                location=location,
            )

    # -- references ---------------------------------------------------------------------

    def _resolve(self, ref: str, resolver: Resolver[Any], location: str) -> Resolved[Any]:
        try:
            return resolver.lookup(ref)
        except RecursionError:
            raise  # not the reference's fault: the caller nests too deeply
        except referencing.exceptions.Unresolvable as exc:
            raise SchemaError(
                f"unresolvable $ref {ref!r}: only references inside the document resolve "
                "(nothing is fetched)",
                location=location,
            ) from exc
        except Exception as exc:  # a malformed pointer or URI
            raise SchemaError(f"unresolvable $ref {ref!r}", location=location) from exc

    def lookup(
        self, ref: Any, resolver: Resolver[Any], location: str
    ) -> tuple[Mapping[str, Any], str, Resolver[Any]]:
        """The schema ``ref`` points to, its pointer and the resolver in scope there."""
        if not isinstance(ref, str):
            raise SchemaError(f"$ref must be a string, got {ref!r}", location=location)
        if self._one_base:
            found = self._lookups.get(ref)
            if found is None:
                found = self._lookups[ref] = self._lookup(ref, resolver, location)
            return found
        return self._lookup(ref, resolver, location)

    def _lookup(
        self, ref: str, resolver: Resolver[Any], location: str
    ) -> tuple[Mapping[str, Any], str, Resolver[Any]]:
        resolved = self._resolve(ref, resolver, location)
        target = resolved.contents
        if isinstance(target, bool):
            pointer = f"{location}->{ref}"
            return ({} if target else {"not": {}}), pointer, resolved.resolver
        if not isinstance(target, Mapping):
            raise SchemaError(f"$ref {ref!r} does not point to a schema", location=location)
        pointer = self._pointers.get(id(target), f"{location}->{ref}")
        return target, pointer, resolved.resolver

    def scoped(self, node: Mapping[str, Any], resolver: Resolver[Any]) -> Resolver[Any]:
        """The resolver inside ``node`` (its ``$id``, if any, changes the base URI)."""
        specification = self.context.specification
        if node is not self.root and specification.id_of(node):
            return resolver.in_subresource(specification.create_resource(node))
        return resolver

    # -- unwrapping ---------------------------------------------------------------------

    def unwrap(
        self,
        node: Any,
        location: str,
        chain: tuple[str, ...],
        resolver: Resolver[Any],
        depth: int = 0,
    ) -> Unwrapped:
        """Follow ``$ref``, wrapper ``allOf``/``anyOf``/``oneOf`` and null unions.

        A combinator is unwrapped only when the node around it has no shape of its own
        (only annotations and constraints); beside ``type``, ``properties`` or ``enum`` it
        is a constraint, left to validation. Drafts 3 to 7 ignore ``$ref``'s siblings
        (annotations are still carried for the prompt). ``depth``: wrappers already
        unwrapped around ``node`` (at most ``max_expansion_depth``).
        """
        if depth > self.limits.max_expansion_depth:
            raise limit_error(
                "max_expansion_depth",
                f"the schema nests wrappers deeper than {self.limits.max_expansion_depth} levels",
                location,
            )
        nullable = False
        if isinstance(node, bool):
            node = {} if node else {"not": {}}
        if not isinstance(node, Mapping):
            raise SchemaError("a schema must be an object or a boolean", location=location)
        resolver = self.scoped(node, resolver)
        for _ in range(256):
            self.budget.spend(1, location)
            extra = {k: v for k, v in node.items() if k not in ("$ref", "allOf", "anyOf", "oneOf")}
            if "$ref" in node:
                target, pointer, resolver = self.lookup(
                    node["$ref"], resolver, child_pointer(location, "$ref")
                )
                if pointer in chain:
                    return Unwrapped(node, location, chain, resolver, nullable, recursive=True)
                if self.context.legacy_refs:
                    extra = {k: v for k, v in extra.items() if k in ANNOTATIONS}
                node = {**target, **extra}
                location, chain = pointer, (*chain, pointer)
                continue
            if any(k in _SHAPE for k in node):
                break
            all_of = node.get("allOf")
            if isinstance(all_of, list) and len(all_of) == 1 and not _combined(node, "allOf"):
                inner = self.unwrap(
                    all_of[0], child_pointer(location, "allOf", 0), chain, resolver, depth + 1
                )
                return replace(
                    inner, node={**inner.node, **extra}, nullable=nullable or inner.nullable
                )
            if "allOf" in node:
                break
            for keyword in ("anyOf", "oneOf"):
                branches = node.get(keyword)
                if not isinstance(branches, list):
                    continue
                others = [(i, b) for i, b in enumerate(branches) if not is_null_schema(b)]
                if len(others) < len(branches):
                    nullable = True
                if len(others) != 1 or _combined(node, keyword):
                    return Unwrapped(node, location, chain, resolver, nullable, union=True)
                index, branch = others[0]
                inner = self.unwrap(
                    branch, child_pointer(location, keyword, index), chain, resolver, depth + 1
                )
                return replace(
                    inner, node={**inner.node, **extra}, nullable=nullable or inner.nullable
                )
            break
        else:  # pragma: no cover - only reachable with a pathological document
            raise SchemaError("too many nested references", location=location)
        return self._unwrap_types(node, location, chain, resolver, nullable)

    @staticmethod
    def _unwrap_types(
        node: Mapping[str, Any],
        location: str,
        chain: tuple[str, ...],
        resolver: Resolver[Any],
        nullable: bool,
    ) -> Unwrapped:
        # null only where every one of type, enum and const allows it: a "null" type
        # beside an enum without null (or a null enum value beside a type without
        # "null") is no null the grammar may offer, as validation refuses it
        admits_null = _admits_null(node)
        types = node.get("type")
        if isinstance(types, list):
            rest = [t for t in types if t != "null"]
            nullable = nullable or (len(rest) < len(types) and admits_null)
            if len(rest) == 1:
                node = {**node, "type": rest[0]}
            else:  # several types, or only "null": one JSON value
                return Unwrapped(node, location, chain, resolver, nullable, union=True)
        elif types == "null":
            return Unwrapped(node, location, chain, resolver, True, union=True)
        enum = node.get("enum")
        if isinstance(enum, list) and None in enum and any(v is not None for v in enum):
            node = {**node, "enum": [v for v in enum if v is not None]}
            nullable = nullable or admits_null
        return Unwrapped(node, location, chain, resolver, nullable)

    # -- bundling -----------------------------------------------------------------------

    def bundle(self, node: Any, resolver: Resolver[Any]) -> dict[str, Any] | bool:
        """A self-contained copy of ``node``: every definition it refers to carried along.

        References to ``#/$defs/Name`` and ``#/definitions/Name`` of the document keep
        their names; any other reference (another pointer, an anchor, a ``$id``-relative
        URI) is copied under ``$defs`` with a fresh name and rewritten; a reference to a
        JSON Schema meta-schema becomes its absolute URI (the validators' registry holds
        the meta-schemas). ``$id`` is left out of the copies, so every rewritten reference
        resolves inside the bundle.
        Cycles are fine: each target is carried once. Every copied node is charged to
        the budget.
        """
        if isinstance(node, bool):
            return node
        names: dict[str, str] = {}
        carried: dict[str, Any] = {}
        pending: list[tuple[str, Any, Resolver[Any]]] = []

        def target_ref(ref: str, scope: Resolver[Any], location: str) -> str:
            target, pointer, inner = self.lookup(ref, scope, location)
            if id(target) not in self._pointers:
                absolute = urljoin(scope._base_uri, ref)
                if is_meta_schema_uri(absolute):
                    return absolute  # a meta-schema: every validator's registry holds it
            if pointer not in names:
                parts = pointer.split("/")
                keep = (
                    len(parts) == 3
                    and parts[1] in ("$defs", "definitions")
                    and ref == "#" + pointer
                )
                names[pointer] = ref if keep else f"#/$defs/_ref{len(names)}"
                pending.append((pointer, target, inner))
            return names[pointer]

        def copy(
            value: Any, keyword: str | None, scope: Resolver[Any], *, top: bool = False
        ) -> Any:
            self.budget.spend(1)
            if isinstance(value, Mapping):
                if keyword is None and not top:
                    scope = self.scoped(value, scope)
                out: dict[str, Any] = {}
                for k, v in value.items():
                    if keyword in _NAMED_SCHEMAS or keyword == "dependencies":
                        out[k] = copy(v, None, scope)
                    elif k in _DATA_KEYWORDS:
                        out[k] = v
                    elif k == "$ref" and isinstance(v, str):
                        out[k] = target_ref(v, scope, "")
                    elif k in ("$defs", "definitions") and keyword is None:
                        continue  # carried separately, only what is referred to
                    elif k in ("$id", "id", "$schema") and keyword is None and isinstance(v, str):
                        continue
                    elif k in _SCHEMA_VALUED or (k == "items" and isinstance(v, Mapping)):
                        out[k] = copy(v, None, scope)  # one subschema: its own $id scope
                    else:
                        out[k] = copy(v, k, scope)
                return out
            if isinstance(value, list):
                return [copy(v, None, scope) for v in value]
            return value

        result: dict[str, Any] = copy(node, None, resolver)
        while pending:
            pointer, target, inner = pending.pop()
            carried[pointer] = copy(target, None, inner, top=True)
        for pointer, body in carried.items():
            _, section, name = names[pointer][1:].split("/", 2)
            result.setdefault(section, {})[jsonpointer.unescape(name)] = body
        return result


def _admits_null(node: Mapping[str, Any]) -> bool:
    """Whether ``null`` passes ``node``'s own ``type``, ``enum`` and ``const``."""
    types = node.get("type")
    types = [types] if isinstance(types, str) else types
    if isinstance(types, list) and "null" not in types:
        return False
    enum = node.get("enum")
    if isinstance(enum, list) and None not in enum:
        return False
    return "const" not in node or node["const"] is None


def _combined(node: Mapping[str, Any], keyword: str) -> bool:
    """Whether ``node`` has a combinator besides ``keyword`` (then it is no wrapper)."""
    return any(k in _COMBINATORS and k != keyword for k in node)
