"""Reading a JSON Schema document: ``$ref`` resolution, wrapper unwrapping, bundling.

The compiler never follows a reference by hand; it asks :class:`SchemaDocument`, which
knows the root document, reports unresolvable references as :class:`SchemaError` with
the pointer of the offending ``$ref``, and detects reference cycles.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import unquote

import jsonpointer

from .._errors import SchemaError

__all__ = ["SchemaDocument", "Unwrapped", "child_pointer"]

#: Keywords whose values are data, not subschemas: never searched for ``$ref``.
_DATA_KEYWORDS: Final = frozenset({"enum", "const", "default", "examples"})
#: Keywords whose value maps names to subschemas (a ``$ref`` key there is a name).
_NAMED_SCHEMAS: Final = frozenset(
    {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"}
)


def child_pointer(location: str, *keys: str | int) -> str:
    """``location`` extended by ``keys`` (each escaped per RFC 6901)."""
    return location + "".join("/" + jsonpointer.escape(str(k)) for k in keys)


def _is_null_schema(node: Any) -> bool:
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
    """A subschema with references, single ``allOf`` wrappers and null unions removed.

    ``node`` is the effective schema (annotations of the wrappers merged over the
    target's), ``location`` the pointer where it was found (a ``$defs`` entry after a
    reference), ``chain`` the reference targets followed from the root down to here.
    ``recursive`` is set when a reference points back into ``chain``: the node cannot be
    expanded and becomes a JSON slot. ``union`` is set when several non-null
    alternatives remain (``anyOf``/``oneOf`` of different schemas, ``type`` lists).
    """

    node: Mapping[str, Any]
    location: str
    chain: tuple[str, ...]
    nullable: bool = False
    recursive: bool = False
    union: bool = False


class SchemaDocument:
    """One JSON Schema document: resolves ``#...`` references inside it."""

    def __init__(self, root: Mapping[str, Any]) -> None:
        self.root = root

    def lookup(self, ref: Any, location: str) -> tuple[Mapping[str, Any], str]:
        """The schema ``ref`` points to and its pointer; ``location`` is the ``$ref``'s."""
        if not isinstance(ref, str) or not ref.startswith("#"):
            raise SchemaError(
                f"unresolvable $ref {ref!r}: only references inside the document (#...) "
                "are supported",
                location=location,
            )
        pointer = unquote(ref[1:])
        if pointer and not pointer.startswith("/"):
            raise SchemaError(
                f"unresolvable $ref {ref!r}: anchors are not supported", location=location
            )
        try:
            target = jsonpointer.resolve_pointer(self.root, pointer)
        except (jsonpointer.JsonPointerException, TypeError, KeyError, IndexError) as exc:
            raise SchemaError(f"unresolvable $ref {ref!r}", location=location) from exc
        if isinstance(target, bool):
            target = {} if target else {"not": {}}
        if not isinstance(target, Mapping):
            raise SchemaError(f"$ref {ref!r} does not point to a schema", location=location)
        return target, pointer

    def unwrap(self, node: Any, location: str, chain: tuple[str, ...] = ()) -> Unwrapped:
        """Follow ``$ref``, single-item ``allOf`` and ``anyOf``/``oneOf`` with null."""
        nullable = False
        if isinstance(node, bool):
            node = {} if node else {"not": {}}
        if not isinstance(node, Mapping):
            raise SchemaError("a schema must be an object or a boolean", location=location)
        for _ in range(256):
            extra = {k: v for k, v in node.items() if k not in ("$ref", "allOf", "anyOf", "oneOf")}
            if "$ref" in node:
                target, pointer = self.lookup(node["$ref"], child_pointer(location, "$ref"))
                if pointer in chain:
                    return Unwrapped(node, location, chain, nullable, recursive=True)
                node = {**target, **extra}
                location, chain = pointer, (*chain, pointer)
                continue
            all_of = node.get("allOf")
            if (
                isinstance(all_of, list)
                and len(all_of) == 1
                and "anyOf" not in node
                and "oneOf" not in node
            ):
                inner = self.unwrap(all_of[0], child_pointer(location, "allOf", 0), chain)
                merged = {**inner.node, **extra}
                return Unwrapped(
                    merged,
                    inner.location,
                    inner.chain,
                    nullable or inner.nullable,
                    inner.recursive,
                    inner.union,
                )
            for keyword in ("anyOf", "oneOf"):
                branches = node.get(keyword)
                if not isinstance(branches, list) or "allOf" in node:
                    continue
                others = [(i, b) for i, b in enumerate(branches) if not _is_null_schema(b)]
                if len(others) < len(branches):
                    nullable = True
                if len(others) != 1:
                    return Unwrapped(node, location, chain, nullable, union=True)
                index, branch = others[0]
                inner = self.unwrap(branch, child_pointer(location, keyword, index), chain)
                return Unwrapped(
                    {**inner.node, **{k: v for k, v in extra.items() if k != keyword}},
                    inner.location,
                    inner.chain,
                    nullable or inner.nullable,
                    inner.recursive,
                    inner.union,
                )
            break
        else:  # pragma: no cover - only reachable with a pathological document
            raise SchemaError("too many nested references", location=location)
        return self._unwrap_types(node, location, chain, nullable)

    @staticmethod
    def _unwrap_types(
        node: Mapping[str, Any], location: str, chain: tuple[str, ...], nullable: bool
    ) -> Unwrapped:
        types = node.get("type")
        if isinstance(types, list):
            rest = [t for t in types if t != "null"]
            nullable = nullable or len(rest) < len(types)
            if len(rest) == 1:
                node = {**node, "type": rest[0]}
            elif rest:
                return Unwrapped(node, location, chain, nullable, union=True)
        enum = node.get("enum")
        if isinstance(enum, list) and None in enum and any(v is not None for v in enum):
            node = {**node, "enum": [v for v in enum if v is not None]}
            nullable = True
        return Unwrapped(node, location, chain, nullable)

    def bundle(self, node: Any) -> dict[str, Any] | bool:
        """A self-contained copy of ``node``: every definition it refers to carried along.

        References to ``#/$defs/Name`` and ``#/definitions/Name`` keep their names; any
        other reference into the document is copied under ``$defs`` with a fresh name and
        rewritten. Cycles are fine: each target is carried once.
        """
        if isinstance(node, bool):
            return node
        renamed: dict[str, str] = {}
        carried: dict[str, dict[str, Any]] = {}
        pending: list[str] = []

        def target_ref(ref: str) -> str:
            pointer = unquote(ref[1:])
            if pointer not in renamed:
                parts = pointer.split("/")
                if len(parts) == 3 and parts[1] in ("$defs", "definitions"):
                    renamed[pointer] = ref
                else:
                    renamed[pointer] = f"#/$defs/_ref{len(renamed)}"
                pending.append(pointer)
            return renamed[pointer]

        def copy(value: Any, keyword: str | None) -> Any:
            if isinstance(value, Mapping):
                out: dict[str, Any] = {}
                for k, v in value.items():
                    if keyword in _NAMED_SCHEMAS:
                        out[k] = copy(v, None)
                    elif k in _DATA_KEYWORDS:
                        out[k] = v
                    elif k == "$ref" and isinstance(v, str) and v.startswith("#"):
                        out[k] = target_ref(v)
                    elif k in ("$defs", "definitions") and keyword is None:
                        continue  # carried separately, only what is referred to
                    else:
                        out[k] = copy(v, k)
                return out
            if isinstance(value, list):
                return [copy(v, None) for v in value]
            return value

        result: dict[str, Any] = copy(node, None)
        while pending:
            pointer = pending.pop()
            target, _ = self.lookup("#" + pointer, "")
            carried[pointer] = copy(target, None)
        for pointer, body in carried.items():
            _, section, name = renamed[pointer][1:].split("/", 2)
            result.setdefault(section, {})[jsonpointer.unescape(unquote(name))] = body
        return result
