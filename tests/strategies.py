"""Hypothesis strategies: random nested Pydantic models and random valid instances.

A model is drawn as a :class:`ModelSpec` tree first (strings, ints, floats, bools,
enums and literals, ``Optional``, nested models, lists of scalars, lists of models,
depth ≤ 3), then built with :func:`pydantic.create_model`. Instances are drawn from the
same spec as JSON-mode dicts, so the spec is an oracle independent of the compiler:
:func:`expected_pointers` says which concrete pointers the frames of an instance fill.

Typical use::

    @given(model_and_instance())
    def test_x(case: Case) -> None:
        plan = compile(case.model)
        ...
"""

from __future__ import annotations

import enum
import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Optional

import jsonpointer
from hypothesis import strategies as st
from pydantic import BaseModel, Field, create_model

__all__ = [
    "Case",
    "EnumSpec",
    "FieldSpec",
    "ListSpec",
    "ModelSpec",
    "ScalarSpec",
    "build_model",
    "expected_pointers",
    "frame_safe_text",
    "instances",
    "model_and_instance",
    "model_specs",
    "model_with_examples",
    "writes_every_item",
]

_NAMES = (
    "title",
    "summary",
    "owner",
    "count",
    "score",
    "flag",
    "tags",
    "items",
    "status",
    "note",
    "address",
    "city",
    "due_date",
    "level",
    "parts",
    "label",
)
_WORDS = ("low", "medium", "high", "open", "closed", "red", "green", "blue", "Größe", "a b")
_counter = itertools.count()


def _is_frame_safe(text: str) -> bool:
    return (
        text == text.strip()
        and text != "null"
        and all(not line.lstrip().startswith("<") for line in text.split("\n"))
    )


def frame_safe_text(max_size: int = 24) -> st.SearchStrategy[str]:
    """Text a frame body carries unchanged: stripped, no ``\\r``, no line starting with
    ``<``, no other line separators, and never the literal ``null``. Unassigned code
    points are left out: byte-level tokenizers may drop their bytes."""
    chars = st.characters(
        codec="utf-8",
        exclude_categories=("Cs", "Cc", "Cn", "Zl", "Zp"),
    )
    alphabet = st.one_of(chars, st.just("\n"), st.sampled_from("<>/: "))
    return st.text(alphabet, max_size=max_size).map(str.strip).filter(_is_frame_safe)


# -- specs ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScalarSpec:
    kind: Literal["str", "int", "float", "bool"]
    low: int | None = None
    high: int | None = None


@dataclass(frozen=True)
class EnumSpec:
    values: tuple[str, ...]
    as_enum_class: bool


@dataclass(frozen=True)
class ListSpec:
    item: ScalarSpec | EnumSpec | ModelSpec
    min_len: int = 0
    max_len: int | None = None


@dataclass(frozen=True)
class FieldSpec:
    name: str
    type: ScalarSpec | EnumSpec | ListSpec | ModelSpec
    optional: bool  # ``Optional[T] = None``


@dataclass(frozen=True)
class ModelSpec:
    fields: tuple[FieldSpec, ...]


TypeSpec = ScalarSpec | EnumSpec | ListSpec | ModelSpec


def _scalar_specs() -> st.SearchStrategy[ScalarSpec]:
    bounded_int = st.tuples(st.integers(-50, 50), st.integers(0, 100)).map(
        lambda t: ScalarSpec("int", t[0], t[0] + t[1])
    )
    return st.one_of(
        st.sampled_from(
            [ScalarSpec("str"), ScalarSpec("int"), ScalarSpec("float"), ScalarSpec("bool")]
        ),
        bounded_int,
    )


def _enum_specs() -> st.SearchStrategy[EnumSpec]:
    return st.builds(
        EnumSpec,
        st.lists(st.sampled_from(_WORDS), min_size=1, max_size=4, unique=True).map(tuple),
        st.booleans(),
    )


def _list_specs(depth: int) -> st.SearchStrategy[ListSpec]:
    items: st.SearchStrategy[ScalarSpec | EnumSpec | ModelSpec] = st.one_of(
        _scalar_specs(), _enum_specs()
    )
    if depth > 0:
        items = st.one_of(items, model_specs(depth - 1))
    bounds = st.tuples(st.integers(0, 2), st.one_of(st.none(), st.integers(0, 3)))
    return st.builds(
        lambda item, b: ListSpec(item, b[0], None if b[1] is None else b[0] + b[1]), items, bounds
    )


def _type_specs(depth: int) -> st.SearchStrategy[TypeSpec]:
    leaves: st.SearchStrategy[TypeSpec] = st.one_of(_scalar_specs(), _enum_specs())
    if depth == 0:
        return leaves
    return st.one_of(leaves, leaves, model_specs(depth - 1), _list_specs(depth - 1))


def model_specs(depth: int = 3) -> st.SearchStrategy[ModelSpec]:
    """A model spec with nested models/lists down to ``depth`` levels."""

    @st.composite
    def build(draw: st.DrawFn) -> ModelSpec:
        names = draw(st.lists(st.sampled_from(_NAMES), min_size=1, max_size=4, unique=True))
        fields = tuple(FieldSpec(n, draw(_type_specs(depth)), draw(st.booleans())) for n in names)
        return ModelSpec(fields)

    return build()


# -- models -----------------------------------------------------------------------------


#: Draws an example value for a scalar or enum leaf (see :func:`model_with_examples`).
Example = Callable[[ScalarSpec | EnumSpec], Any]


def _annotation(spec: TypeSpec, example: Example | None) -> Any:
    if isinstance(spec, ScalarSpec | EnumSpec):
        leaf = _leaf_annotation(spec)
        return leaf if example is None else Annotated[leaf, Field(examples=[example(spec)])]
    if isinstance(spec, ListSpec):
        item = _annotation(spec.item, example)
        return Annotated[list[item], Field(min_length=spec.min_len, max_length=spec.max_len)]  # type: ignore[valid-type]
    return build_model(spec, example)


def _leaf_annotation(spec: ScalarSpec | EnumSpec) -> Any:
    if isinstance(spec, ScalarSpec):
        base: Any = {"str": str, "int": int, "float": float, "bool": bool}[spec.kind]
        if spec.kind == "int" and spec.low is not None:
            return Annotated[int, Field(ge=spec.low, le=spec.high)]
        return base
    if spec.as_enum_class:
        members = [(f"V{i}", v) for i, v in enumerate(spec.values)]
        return enum.Enum(f"E{next(_counter)}", members)
    return Literal[spec.values]


def build_model(spec: ModelSpec, example: Example | None = None) -> type[BaseModel]:
    """The Pydantic model class for ``spec`` (a fresh, uniquely named class); with
    ``example``, every scalar and enum leaf carries ``examples=[example(leaf)]``."""
    definitions: dict[str, Any] = {}
    for f in spec.fields:
        annotation = _annotation(f.type, example)
        definitions[f.name] = (Optional[annotation], None) if f.optional else (annotation, ...)  # noqa: UP045
    return create_model(f"M{next(_counter)}", **definitions)


# -- instances --------------------------------------------------------------------------


def _values(spec: TypeSpec) -> st.SearchStrategy[Any]:
    if isinstance(spec, ScalarSpec):
        if spec.kind == "str":
            return frame_safe_text()
        if spec.kind == "int":
            low = -(10**9) if spec.low is None else spec.low
            high = 10**9 if spec.high is None else spec.high
            return st.integers(low, high)
        if spec.kind == "float":
            return st.floats(allow_nan=False, allow_infinity=False, width=64)
        return st.booleans()
    if isinstance(spec, EnumSpec):
        return st.sampled_from(spec.values)
    if isinstance(spec, ListSpec):
        max_len = (
            min(spec.min_len + 3, spec.max_len) if spec.max_len is not None else spec.min_len + 3
        )
        return st.lists(_values(spec.item), min_size=spec.min_len, max_size=max_len)
    return instances(spec)


def instances(spec: ModelSpec) -> st.SearchStrategy[dict[str, Any]]:
    """Valid JSON-mode instances of ``spec``: optional fields absent, null, or set."""
    required = {f.name: _values(f.type) for f in spec.fields if not f.optional}
    optional = {f.name: st.one_of(st.none(), _values(f.type)) for f in spec.fields if f.optional}
    return st.fixed_dictionaries(required, optional=optional)


@dataclass(frozen=True)
class Case:
    spec: ModelSpec
    model: type[BaseModel]
    instance: dict[str, Any]


def model_and_instance(depth: int = 3) -> st.SearchStrategy[Case]:
    """A random model and one valid instance of it (checked with the model)."""

    @st.composite
    def build(draw: st.DrawFn) -> Case:
        spec = draw(model_specs(depth))
        model = build_model(spec)
        instance = draw(instances(spec))
        model.model_validate(instance)
        return Case(spec, model, instance)

    return build()


def model_with_examples(depth: int = 2) -> st.SearchStrategy[type[BaseModel]]:
    """A random model whose every scalar and enum leaf carries a valid ``examples``
    value, so its prompt shows an example answer."""

    @st.composite
    def build(draw: st.DrawFn) -> type[BaseModel]:
        spec = draw(model_specs(depth))
        return build_model(spec, lambda leaf: draw(_values(leaf)))

    return build()


# -- the oracle -------------------------------------------------------------------------


def expected_pointers(spec: ModelSpec, instance: dict[str, Any]) -> set[str]:
    """The concrete pointers the frames of ``instance`` fill, from the spec alone.

    A scalar (``null`` included) is one leaf; a list of scalars has one leaf per item;
    a list of models has the leaves of each item; a list inside a list item is one
    leaf (a JSON slot); an absent key, a ``null`` model and a ``null`` top-level list
    have none.
    """
    out: set[str] = set()

    def walk(spec_type: TypeSpec, value: Any, pointer: str, in_item: bool) -> None:
        if isinstance(spec_type, ModelSpec):
            if value is None:
                return
            for f in spec_type.fields:
                if f.name in value:
                    walk(f.type, value[f.name], f"{pointer}/{jsonpointer.escape(f.name)}", in_item)
        elif isinstance(spec_type, ListSpec):
            if in_item:
                out.add(pointer)
            elif value is not None:
                for i, item in enumerate(value):
                    if isinstance(spec_type.item, ModelSpec):
                        walk(spec_type.item, item, f"{pointer}/{i}", True)
                    else:
                        out.add(f"{pointer}/{i}")
        else:
            out.add(pointer)

    walk(spec, instance, "", False)
    return out


def writes_every_item(spec: ModelSpec, instance: dict[str, Any]) -> bool:
    """Whether every object-array item of ``instance`` gets at least one frame.

    An item whose fields are all absent (``[{}]``) has no frame that could write it, so
    no frame stream (and no grammar) can express it.
    """
    pointers = expected_pointers(spec, instance)

    def walk(spec_type: TypeSpec, value: Any, pointer: str) -> bool:
        if isinstance(spec_type, ModelSpec) and isinstance(value, dict):
            return all(
                walk(f.type, value[f.name], f"{pointer}/{jsonpointer.escape(f.name)}")
                for f in spec_type.fields
                if f.name in value
            )
        if isinstance(spec_type, ListSpec) and isinstance(spec_type.item, ModelSpec) and value:
            return all(
                any(p.startswith(f"{pointer}/{i}/") for p in pointers) for i in range(len(value))
            )
        return True

    return walk(spec, instance, "")
