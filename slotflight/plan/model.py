"""The slot plan: what a schema compiles to.

A :class:`SlotPlan` is an immutable list of :class:`Slot` s plus the object and array
nodes between the root and each slot. Everything downstream (prompt, grammar, frame
parser, state, validation, regeneration) reads only this structure, never the schema.

Pointer templates follow RFC 6901 with one extension: the segment ``{i}`` stands for
the array index of a repeatable object-array slot (``/items/{i}/owner``), and ``-``
(RFC 6901's "past the end") for the append position of a scalar-array slot
(``/tags/-``). ``segments`` holds the same path unambiguously, with :data:`INDEX` where
the index goes, so a key literally named ``{i}`` or ``-`` is never confused with it.

Two slots have no key of their own:

- the **root slot** (``segments == ()``, pointer ``""``) of a schema whose root is not an
  object with properties (an array, a scalar, a union): the whole output is its value;
- a **rest slot** (``segments`` ending in :data:`REST`, pointer: its object's) carries
  the keys of an object outside its ``properties`` (``additionalProperties``,
  ``patternProperties``) as one JSON object whose keys are merged into that object.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, Final, Literal

import jsonpointer

from .limits import DEFAULT_LIMITS, CompileLimits
from .validators import SchemaContext

if TYPE_CHECKING:
    from pydantic import BaseModel

__all__ = [
    "INDEX",
    "MISSING",
    "REST",
    "ArrayNode",
    "ObjectNode",
    "Slot",
    "SlotKind",
    "SlotPlan",
]

SlotKind = Literal[
    "string", "integer", "number", "boolean", "enum", "date", "datetime", "time", "uuid", "json"
]

#: Kinds whose value is shown in state only once its frame closed and validated.
#: Only ``string`` slots stream as growing prefixes.
SETTLED_KINDS: Final = frozenset(
    {"integer", "number", "boolean", "enum", "json", "date", "datetime", "time", "uuid"}
)


class _Missing:
    """Sentinel for "no default"."""

    _instance: _Missing | None = None

    def __new__(cls) -> _Missing:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "MISSING"

    def __bool__(self) -> bool:
        return False


MISSING: Final = _Missing()
"""The ``default`` of a slot or node that has no default (falsy, and not ``None``,
which is a JSON value a schema may give as its default)."""


class _Index:
    """Marks the array-index position inside :attr:`Slot.segments`."""

    def __repr__(self) -> str:
        return "INDEX"


INDEX: Final = _Index()


class _Rest:
    """Marks a rest slot: the last of its :attr:`Slot.segments`."""

    def __repr__(self) -> str:
        return "REST"


REST: Final = _Rest()

Segment = str | _Index | _Rest


def _pointer(segments: tuple[Segment, ...], index_text: str) -> str:
    return "".join(
        "/" + (index_text if isinstance(s, _Index) else jsonpointer.escape(s))
        for s in segments
        if not isinstance(s, _Rest)
    )


def _display(segments: tuple[Segment, ...], index_text: str) -> str:
    out = ""
    for s in segments:
        if isinstance(s, _Index):
            out += f"[{index_text}]"
        elif isinstance(s, _Rest):
            out += ".*" if out else "*"
        else:
            out += ("." if out else "") + s
    return out


@dataclass(frozen=True)
class ObjectNode:
    """An object between the root and a slot (``/address``, ``/items/{i}``).

    ``required``: the object must be present in its parent. ``nullable``: it may be
    ``null`` (``Optional[Model]``). When an object receives no slot at all it takes
    ``default``; otherwise an optional one is left out and a required one is ``{}``, or
    ``null`` when nullable (no frame is how ``null`` is written).
    """

    segments: tuple[Segment, ...]
    required: bool
    nullable: bool = False
    default: Any = MISSING

    @property
    def pointer(self) -> str:
        return _pointer(self.segments, "{i}")

    def concrete_pointer(self, index: int | None = None) -> str:
        return _pointer(self.segments, str(index) if index is not None else "{i}")


@dataclass(frozen=True)
class ArrayNode:
    """An array expanded into repeatable slots (``/tags`` or ``/items``)."""

    segments: tuple[Segment, ...]
    required: bool
    min_items: int = 0
    max_items: int | None = None
    items_are_objects: bool = False
    nullable: bool = False
    default: Any = MISSING
    description: str | None = None
    #: The array schema's ``x-slotflight-*`` keywords (per-field slot check settings).
    extensions: Mapping[str, Any] = field(default_factory=dict, compare=False)

    @property
    def pointer(self) -> str:
        return _pointer(self.segments, "{i}")

    @property
    def path(self) -> str:
        return _display(self.segments, "")


def _bare(text: str) -> bool:
    """Whether ``text`` reads back as itself written bare on a frame line."""
    return (
        bool(text)
        and text == text.strip()
        and not any(ord(c) < 0x20 or ord(c) == 0x7F for c in text)
    )


def enum_key(value: Any) -> tuple[str, Any]:
    """``value`` as a key of JSON equality for enum members: ``true`` is not ``1``,
    ``2`` is ``2.0``, the text ``"1"`` is not the number ``1``."""
    if isinstance(value, str):
        return ("text", value)
    if isinstance(value, bool):
        return ("boolean", value)
    if isinstance(value, (int, float)):
        return ("number", value)
    return ("other", json.dumps(value, sort_keys=True, default=repr))  # objects, arrays


def json_string_of(text: str) -> str | None:
    """The text a JSON string literal spells (``"\\"a\\""`` → ``a``), or ``None`` when
    ``text`` is not exactly one JSON string."""
    if len(text) < 2 or text[0] != '"' or text[-1] != '"':
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, str) else None


@dataclass(frozen=True)
class Slot:
    """One leaf of the output object, filled by one frame (or one frame per item).

    - ``id``: compact positive integer in document order, written in frames.
    - ``pointer``: JSON Pointer template (``/summary``, ``/tags/-``, ``/items/{i}/owner``).
    - ``path``: display template (``summary``, ``tags[]``, ``items[].owner``).
    - ``kind``: how the frame body is parsed; ``json`` bodies are JSON text.
    - ``required``: must be present in its parent object. Scalar-array slots use
      ``array.required`` / ``array.min_items`` instead.
    - ``repeatable``: written once per array item as ``<id:index>``.
    - ``parents``: object nodes from the root down to the slot's parent (the item
      object ``/items/{i}`` included for object-array fields).
    - ``constraints``: the JSON Schema keywords that bound the value (``minLength``,
      ``maxLength``, ``pattern``, ``format``, ``minimum``, ``maximum``,
      ``exclusiveMinimum``, ``exclusiveMaximum``, ``multipleOf``).
    - ``schema``: the leaf's own JSON Schema, self-contained (``$defs`` carried along
      where it refers to them); used to validate ``json`` slots.
    """

    id: int
    segments: tuple[Segment, ...]
    kind: SlotKind
    required: bool
    repeatable: bool
    instruction: str
    nullable: bool = False
    array: ArrayNode | None = None
    parents: tuple[ObjectNode, ...] = ()
    enum: tuple[Any, ...] | None = None
    constraints: Mapping[str, Any] = field(default_factory=dict)
    schema: Mapping[str, Any] = field(default_factory=dict)
    default: Any = MISSING
    title: str | None = None
    description: str | None = None

    @property
    def pointer(self) -> str:
        if self.array is not None and not self.array.items_are_objects:
            return _pointer(self.segments, "-")
        return _pointer(self.segments, "{i}")

    @property
    def path(self) -> str:
        return _display(self.segments, "")

    @property
    def name(self) -> str:
        """The last key of the path (the array's key for scalar-array slots)."""
        for s in reversed(self.segments):
            if isinstance(s, str):
                return s
        return ""

    @property
    def has_default(self) -> bool:
        return self.default is not MISSING

    @property
    def is_root(self) -> bool:
        """The slot holds the whole output (the schema's root is not an object)."""
        return not self.segments

    @property
    def example(self) -> Any:
        """The schema's own example of a value: its first ``examples``, else its
        ``default``; :data:`MISSING` when it has neither."""
        examples = self.schema.get("examples")
        if isinstance(examples, list) and examples:
            return examples[0]
        return self.default

    @property
    def is_rest(self) -> bool:
        """The slot holds its object's keys outside ``properties`` (a JSON object)."""
        return bool(self.segments) and self.segments[-1] is REST

    @cached_property
    def _enum_keys(self) -> frozenset[tuple[str, Any]]:
        """The enum's members by :func:`enum_key` (membership in O(1))."""
        return frozenset(enum_key(member) for member in self.enum or ())

    @cached_property
    def _enum_quoted(self) -> frozenset[str]:
        """The text members written as JSON strings, since written bare they would
        read as another member: the JSON text of a number or boolean member (``"1"``
        beside ``1``), a JSON string of another text member (``"\\"a\\""`` beside
        ``"a"``), ``null`` in a nullable slot; and those that would not read back bare at
        all: empty, with white space around them (a reader trims it), or holding a
        control character (a line break ends a line; a grammar matches no NUL)."""
        members = self.enum or ()
        texts = {member for member in members if isinstance(member, str)}
        others = {json.dumps(member) for member in members if not isinstance(member, str)}
        if self.nullable:
            others.add("null")
        return frozenset(
            text
            for text in texts
            if text in others or json_string_of(text) in texts or not _bare(text)
        )

    def concrete_pointer(self, index: int | None = None) -> str:
        """The pointer with the array index filled in (``/items/1/owner``)."""
        if self.repeatable and index is None:
            raise ValueError(f"slot {self.id} ({self.path}) is repeatable: index needed")
        return _pointer(self.segments, str(index))

    def display(self, index: int | str | None = None) -> str:
        """The display path with the index filled in (``items[1].owner``, or
        ``items[i].owner`` for ``index="i"``)."""
        return _display(self.segments, "" if index is None else str(index))

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "id": self.id,
            "pointer": self.pointer,
            "path": self.path,
            "kind": self.kind,
            "required": self.required,
            "repeatable": self.repeatable,
            "nullable": self.nullable,
            "instruction": self.instruction,
        }
        if self.enum is not None:
            data["enum"] = list(self.enum)
        if self.constraints:
            data["constraints"] = dict(self.constraints)
        if self.has_default:
            data["default"] = self.default
        if self.array is not None:
            data["array"] = {
                "pointer": self.array.pointer,
                "minItems": self.array.min_items,
                "maxItems": self.array.max_items,
                "required": self.array.required,
            }
        return data


@dataclass(frozen=True)
class SlotPlan:
    """The compiled form of a schema. Build one with :func:`slotflight.compile`."""

    slots: tuple[Slot, ...]
    schema: Mapping[str, Any]
    model: type[BaseModel] | None = None
    title: str = "Output"
    description: str | None = None
    arrays: tuple[ArrayNode, ...] = ()
    objects: tuple[ObjectNode, ...] = ()
    #: The bounds the plan was compiled under (the prompt and the grammar obey them too).
    limits: CompileLimits = DEFAULT_LIMITS
    _by_id: dict[int, Slot] = field(default_factory=dict, init=False, repr=False, compare=False)
    #: Per-slot validators, built on first use (see ``assemble.validation.validator_for``).
    _validators: dict[int, Any] = field(default_factory=dict, init=False, repr=False, compare=False)
    #: Data derived from the plan once and kept with it (its tree, its wire names).
    _derived: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)
    _context: list[SchemaContext] = field(
        default_factory=list, init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        self._by_id.update({s.id: s for s in self.slots})

    @property
    def context(self) -> SchemaContext:
        """The schema's validators (declared draft, local references only)."""
        if not self._context:
            self._context.append(SchemaContext(self.schema, naive_times=self.model is not None))
        return self._context[0]

    @property
    def root_slot(self) -> Slot | None:
        """The slot holding the whole output when the root is not an object, else ``None``."""
        if len(self.slots) == 1 and self.slots[0].is_root:
            return self.slots[0]
        return None

    def get(self, slot_id: int) -> Slot | None:
        """The slot with this id, or ``None``."""
        return self._by_id.get(slot_id)

    def __getitem__(self, slot_id: int) -> Slot:
        return self._by_id[slot_id]

    def __iter__(self) -> Any:
        return iter(self.slots)

    def __len__(self) -> int:
        return len(self.slots)

    def array_slots(self, pointer: str) -> tuple[Slot, ...]:
        """The slots whose innermost array is the one at ``pointer`` (the fields of a
        list of objects' items), in plan order; grouped once per plan."""
        groups: dict[str, tuple[Slot, ...]] | None = self._derived.get("array_slots")
        if groups is None:
            grouped: dict[str, list[Slot]] = {}
            for s in self.slots:
                if s.array is not None:
                    grouped.setdefault(s.array.pointer, []).append(s)
            groups = self._derived["array_slots"] = {k: tuple(v) for k, v in grouped.items()}
        return groups.get(pointer, ())

    def by_path(self, path: str) -> Slot:
        """The slot with this display template (``items[].owner``)."""
        for s in self.slots:
            if s.path == path:
                return s
        raise KeyError(path)

    def to_json(self) -> dict[str, Any]:
        """A JSON description of the slots (what the prompt lists, machine-readable)."""
        return {"title": self.title, "slots": [s.to_json() for s in self.slots]}
