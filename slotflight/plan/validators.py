"""JSON Schema validation the package can afford: local references, linear-time regexes.

Every jsonschema validator the package builds comes from a :class:`SchemaContext`:

- **The declared draft.** The validator class is the one the document's ``$schema``
  names (draft 2020-12 when it names none), so compiling, checking slots and the final
  check agree.
- **No fetching, ever.** References resolve through a ``referencing`` registry that holds
  the document (its embedded ``$id`` resources included) and the JSON Schema
  meta-schemas shipped with ``jsonschema-specifications`` (drafts 3 to 2020-12, so a
  schema may ``$ref`` ``http://json-schema.org/draft-07/schema#``), and whose
  ``retrieve`` refuses every URI. A reference to anything else is
  :class:`Unresolvable`; the compiler turns it into a :class:`SchemaError` before any
  validator runs.
- **Linear-time patterns.** ``pattern``, ``patternProperties``, the pattern part of
  ``additionalProperties`` and the ``regex`` format run on pydantic-core's Rust regex
  engine (no backtracking), one compiled validator per pattern, cached. Patterns that
  engine cannot run (look-around, backreferences) are refused when the schema compiles.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from functools import lru_cache
from typing import Any, Final
from urllib.parse import quote

import jsonschema
import jsonschema_specifications
import referencing
import referencing.exceptions
import referencing.jsonschema
from jsonschema.exceptions import ValidationError
from jsonschema.protocols import Validator
from pydantic_core import SchemaError as CoreSchemaError
from pydantic_core import SchemaValidator, core_schema
from pydantic_core import ValidationError as CoreValidationError
from referencing._core import Resolver

__all__ = [
    "META_SCHEMAS",
    "ROOT_URI",
    "SchemaContext",
    "is_meta_schema_uri",
    "linear_validator_class",
    "pattern_error",
    "pattern_search",
    "standalone_validator",
]

#: The URI the document is registered under when it has no ``$id``.
ROOT_URI: Final = "urn:slotflight:schema"
#: Validator classes whose ``$ref`` ignores its sibling keywords (drafts 3 to 7).
LEGACY_REF_DRAFTS: Final = frozenset(
    {
        jsonschema.Draft3Validator,
        jsonschema.Draft4Validator,
        jsonschema.Draft6Validator,
        jsonschema.Draft7Validator,
    }
)


# -- patterns -----------------------------------------------------------------------------


@lru_cache(maxsize=4096)
def _compiled(pattern: str) -> SchemaValidator | str:
    """The pattern's validator, or why the Rust engine cannot run it."""
    try:
        return SchemaValidator(core_schema.str_schema(pattern=pattern, regex_engine="rust-regex"))
    except CoreSchemaError as exc:
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
        return lines[-1] if lines else "invalid regular expression"


def pattern_error(pattern: str) -> str | None:
    """``None`` when ``pattern`` runs on the linear-time engine, else the reason."""
    found = _compiled(pattern)
    return found if isinstance(found, str) else None


def pattern_search(pattern: str, text: str) -> bool:
    """Whether ``pattern`` matches somewhere in ``text`` (JSON Schema semantics).

    O(len(pattern) * len(text)) at worst. A pattern the engine cannot run never
    matches (the compiler refuses such patterns first).
    """
    found = _compiled(pattern)
    if isinstance(found, str):
        return False
    try:
        found.validate_python(text)
    except CoreValidationError:
        return False
    return True


def _pattern(validator: Any, pattern: Any, instance: Any, schema: Any) -> Iterator[Any]:
    if validator.is_type(instance, "string") and not pattern_search(pattern, instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(validator: Any, patterns: Any, instance: Any, schema: Any) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if pattern_search(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(
    validator: Any, additional: Any, instance: Any, schema: Any
) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    declared = schema.get("properties", {})
    patterns = list(schema.get("patternProperties", {}))
    extras = [
        key
        for key in instance
        if key not in declared and not any(pattern_search(p, key) for p in patterns)
    ]
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif not additional and extras:
        listed = ", ".join(repr(extra) for extra in sorted(extras))
        verb = "was" if len(extras) == 1 else "were"
        yield ValidationError(f"Additional properties are not allowed ({listed} {verb} unexpected)")


def _regex_format(instance: object) -> bool:
    return not isinstance(instance, str) or pattern_error(instance) is None


@lru_cache(maxsize=16)
def linear_validator_class(base: type[Validator]) -> type[Validator]:
    """``base`` with every regex keyword on the linear-time engine."""
    extend: Any = jsonschema.validators.extend
    extended: type[Validator] = extend(
        base,
        {
            "pattern": _pattern,
            "patternProperties": _pattern_properties,
            "additionalProperties": _additional_properties,
        },
    )
    checker = copy.copy(base.FORMAT_CHECKER)
    checker.checkers = {**base.FORMAT_CHECKER.checkers, "regex": (_regex_format, ())}
    extended.FORMAT_CHECKER = checker
    return extended


def _refuse(uri: str) -> referencing.Resource[Any]:
    raise referencing.exceptions.NoSuchResource(ref=uri)  # type: ignore[call-arg]


#: The meta-schemas of every draft (local copies), and nothing is ever retrieved.
META_SCHEMAS: Final[referencing.Registry[Any]] = referencing.Registry(  # type: ignore[call-arg]
    retrieve=_refuse
).combine(jsonschema_specifications.REGISTRY)


def is_meta_schema_uri(uri: str) -> bool:
    """Whether ``uri`` (fragment aside) names one of the meta-schemas in :data:`META_SCHEMAS`."""
    return uri.split("#", 1)[0] in META_SCHEMAS


# -- a document in context ----------------------------------------------------------------


class SchemaContext:
    """One schema document as jsonschema sees it: its draft and its local registry.

    ``validator()`` checks against the whole document; ``validator(at=pointer)`` against
    the subschema at a JSON Pointer, with the references and ``$id`` scopes around it
    exactly as in the document; ``validator(schema=…)`` against a schema made up by the
    compiler whose references name ``uri(pointer)``. Building is cheap; validators are
    built once per slot and cached on the plan.
    """

    def __init__(self, document: Mapping[str, Any]) -> None:
        base: type[Validator] = jsonschema.validators.validator_for(
            document, default=jsonschema.Draft202012Validator
        )
        self.draft = base
        self.cls = linear_validator_class(base)
        dialect = str(base.META_SCHEMA.get("$schema", ""))
        self.specification = referencing.jsonschema.specification_with(
            dialect, default=referencing.jsonschema.DRAFT202012
        )
        self.document = document
        resource = self.specification.create_resource(document)
        self.base_uri = resource.id() or ROOT_URI
        registry = META_SCHEMAS
        # crawled lazily, when a reference needs an anchor or an embedded $id
        self.registry = registry.with_resource(self.base_uri, resource)

    @property
    def legacy_refs(self) -> bool:
        """Whether ``$ref`` ignores its siblings (drafts 3 to 7)."""
        return self.draft in LEGACY_REF_DRAFTS

    def resolver(self) -> Resolver[Any]:
        """A resolver at the document's root (base URI: its ``$id`` or :data:`ROOT_URI`)."""
        resolver: Resolver[Any] = self.registry.resolver(self.base_uri)
        return resolver

    def uri(self, pointer: str) -> str:
        """The absolute reference to the subschema at ``pointer``."""
        return f"{self.base_uri}#{quote(pointer, safe='/~')}"

    def validator(self, *, at: str | None = None) -> Validator:
        """A validator (formats checked) for the document or the subschema at ``at``."""
        schema = self.document if at is None else {"$ref": self.uri(at)}
        return self.cls(schema, registry=self.registry, format_checker=self.cls.FORMAT_CHECKER)

    def standalone(self, schema: Mapping[str, Any] | bool) -> Validator:
        """A validator for a self-contained ``schema`` (a slot's bundle) in this draft:
        its references resolve inside it alone."""
        return self.cls(schema, registry=_EMPTY, format_checker=self.cls.FORMAT_CHECKER)


def standalone_validator(schema: Mapping[str, Any] | bool) -> Validator:
    """A draft 2020-12 validator (linear regexes, formats) for a self-contained schema."""
    cls = linear_validator_class(jsonschema.Draft202012Validator)
    return cls(schema, registry=_EMPTY, format_checker=cls.FORMAT_CHECKER)


_EMPTY: Final[referencing.Registry[Any]] = META_SCHEMAS
