"""Answer accuracy against a gold object, and degenerate-value detectors: pure functions.

**Fields.** :func:`schema_fields` reads a JSON Schema (local ``$ref`` followed, ``anyOf``
with ``null`` read as "nullable") into the fields that are scored, each with a kind:

- ``enum`` (``enum``/``const``), ``boolean``, ``integer``: exact.
- ``number``: exact to the schema's precision: with ``multipleOf`` 10^-d (``0.01``) both
  values are equal when they differ by less than half of 10^-d (judged on the decimals
  they are written as: ``12.345`` is as far from ``12.35`` as ``12.355``); otherwise
  they must be equal (``12`` equals ``12.0``, with no tolerance; so must integers).
- ``date``: strings with ``format`` ``date``, ``date-time`` or ``time``: exact.
- ``short_text``: a string with ``maxLength`` of at most :data:`SHORT_TEXT_MAX_LENGTH`
  characters, a ``pattern`` or another ``format`` (names, ids, tags): exact after
  :func:`normalize_text` (Unicode NFKC, case folded, runs of whitespace as one space).
- ``free_text``: every other string (summaries, titles, descriptions): :func:`token_f1`
  against the reference text.
- ``list``: an array of scalars, scored as a set (:func:`set_f1`): duplicates dropped
  (texts equal after :func:`normalize_text`, numbers equal as numbers), items matched
  one to one, each pair scoring as its item kind (exact kinds 0 or 1, free text
  token-F1).
- an array of objects contributes one field per leaf of its items
  (``action_items[].owner``), of that leaf's kind: items are aligned one to one by
  :func:`align` on the mean score of the whole item pair, then each field scores the
  F1 of its matched pairs (sum of the pair scores over the predicted and over the gold
  item counts).
- a nested object contributes its own fields (``dimensions.width_cm``).
- ``json``: anything else (tuples, maps, arrays of arrays): equal as JSON.

No array is positional: order never matters, tuples (``prefixItems``) excepted, which
fall under ``json``. An absent key reads as its schema ``default``, else ``null``; an
absent or ``null`` array reads as empty, an absent or ``null`` object as having no
values. Two absent values agree (score 1); a value where the gold has none, or none
where the gold has one, scores 0; two empty lists agree.

:func:`score_object` scores one predicted object against the gold; a missing or invalid
object (``None``) scores 0 on every field.

**Degenerate values** (:func:`detect_degenerate`), per field of one produced object, in
nine detectors. Each reads the final object, the schema, the input and (``slot_id``,
``example_copy``) what the model was shown, never the mode that wrote the object. A
value that matches a gold value of its field is never flagged. One field may be
flagged by several detectors (a list of strings repeating an item counts under
``repeated`` and ``list_repeat``).

- ``slot_id``: a string that is one identifier or a run of them (``"5"``, ``"2 3 4 5"``,
  ``"<7:1>"``, a slot's name); the identifiers are given by the caller, so the
  detector does not depend on how a frame syntax writes ids.
- ``example_copy``: a value equal to one of the given example values (the prompt's
  example and the schema's ``examples``/``default``), or a string of at least three
  characters that begins one of them at a word boundary (``"Example"``); and a string
  that copies the schema's own words (:func:`schema_prose`: its titles and
  descriptions, which the prompt shows as the form's name and the fields' meanings):
  equal to one of them, beginning with one of eight or more characters at a word
  boundary (``"MeetingNotes. Minutes of one meeting…"``), or being the first three or
  more words of one. Enum and
  boolean fields are skipped (their few values are right by coincidence too often).
- ``repeated``: a non-empty string that another text or date value of the object
  repeats, in a different field (``title`` and ``heading`` both ``"2"``) or as another
  item of the same list of strings (``decisions`` holding one sentence six times);
  repeats means equal (after :func:`normalize_text`) or a near copy, two texts of at
  least :data:`NEAR_COPY_MIN_WORDS` words whose :func:`token_f1` is at least
  :data:`NEAR_COPY_F1` (``"A guide to making kimchi at home."`` in ``heading`` after
  ``"A guide to making kimchi (김치) at home."`` in ``title``). Fields of the items of
  an array of objects are compared only with other fields (two action items may share
  an owner), and enum fields not at all.
- ``empty``: an empty (or blank) string where the gold has a non-empty one.

The last five share their rules with the slot checks of the same codes
(:mod:`slotflight.assemble.value_rules`, :mod:`slotflight.assemble.text_rules`) and
judge the fields the checks judge: open strings (not enums, booleans or numbers);
``placeholder``, ``quoted`` and ``digit_run`` not fields with a ``pattern`` or
``format`` (dates), which define their own shape. A number where text belongs (an
object a JSON mode wrote that did not validate) is read as the text a slot would hold.

- ``placeholder``: a bare small number or a bracketed placeholder (``"1"``, ``"[5]"``,
  ``"[Triage]"``, ``1`` in ``tags``), unless the input states that number as a whole
  (not the ``1`` of ``1.5 kg`` or ``€1,188.00``).
- ``quoted``: a value wrapped in quotes it did not need (``'"Ada"'``).
- ``digit_run``: a run of numbers and separators (``"1,3,2,1,1,2,…"``, ``"4 5 6 7"``).
- ``schema_copy``: a copy of the schema's own words: the model's class name, a title
  or description (equal, equal without spaces and punctuation, or a near copy with a
  token-F1 of at least 0.9), an ``examples`` value, a name a description gives as
  an example (``e.g. 'Léa Martin'``) or a field's name with an index (``owner[1]``),
  unless the input holds that text.
- ``list_repeat``: an item repeating an earlier item of its list: in a list of strings
  equal or a near copy (the ``repeated`` rule); in an array of objects, an item whose
  text fields all repeat an earlier item's (numbers, enums and booleans not compared:
  a section written again with another word count repeats), flagging its text fields.
  Two items sharing some fields (one owner) are no repeat.

Every function here bounds its work: at most :data:`MAX_ITEMS` items per array and
:data:`MAX_DEPTH` levels are read; alignment is greedy, O(n·m·log(n·m)) per array.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Final, Literal, TypeAlias, get_args

from ..assemble.text_rules import (
    NEAR_COPY_F1,
    NEAR_COPY_MIN_WORDS,
    at_boundary,
    bag_f1,
    f1,
    is_digit_run,
    is_near_copy,
    needless_quotes,
    normalize_text,
    token_f1,
    word_tokens,
)
from ..assemble.value_rules import (
    InputText,
    SchemaWords,
    TextIndex,
    is_unstated_placeholder,
    schema_nodes,
)

__all__ = [
    "DETECTORS",
    "FIELD_KINDS",
    "MAX_DEPTH",
    "MAX_ITEMS",
    "MAX_NEAR_COPY_TEXTS",
    "NEAR_COPY_F1",
    "NEAR_COPY_MIN_WORDS",
    "SHORT_TEXT_MAX_LENGTH",
    "Degenerate",
    "FieldKind",
    "FieldScore",
    "FieldSpec",
    "align",
    "detect_degenerate",
    "normalize_text",
    "schema_examples",
    "schema_fields",
    "schema_prose",
    "score_object",
    "score_value",
    "set_f1",
    "token_f1",
]

FieldKind: TypeAlias = Literal[
    "enum", "boolean", "integer", "number", "date", "short_text", "free_text", "list", "json"
]
#: Every field kind, in report order.
FIELD_KINDS: Final[tuple[FieldKind, ...]] = (
    "enum",
    "boolean",
    "integer",
    "number",
    "date",
    "short_text",
    "free_text",
    "list",
    "json",
)
Detector: TypeAlias = Literal[
    "slot_id",
    "example_copy",
    "repeated",
    "empty",
    "placeholder",
    "quoted",
    "digit_run",
    "schema_copy",
    "list_repeat",
]
#: The degenerate-value detectors, in report order.
DETECTORS: Final[tuple[Detector, ...]] = get_args(Detector)

#: A string field whose ``maxLength`` is at most this is short text (exact match).
SHORT_TEXT_MAX_LENGTH: Final = 60
#: Items read per array; the rest is ignored.
MAX_ITEMS: Final = 256
#: Nesting levels read in a schema.
MAX_DEPTH: Final = 16
#: Distinct texts of one object compared pairwise for near copies; the rest only for
#: equality (bounds the O(n²) comparison).
MAX_NEAR_COPY_TEXTS: Final = 256

_DATE_FORMATS: Final = frozenset({"date", "date-time", "time"})
_ID_SEPARATORS: Final = re.compile(r"[\s,;]+")
_ID_INDEX: Final = re.compile(r":\d+$")
_ABSENT: Final = object()
#: A value beginning with schema prose of at least this many characters copies it (a
#: field title such as ``Due`` begins real values too).
_PROSE_START: Final = 8


# --------------------------------------------------------------------------- text


# The text rules (normalisation, token-F1, near copies) are the slot checks' own:
# :mod:`slotflight.assemble.text_rules`, one implementation for both.
_tokens = word_tokens
_bag_f1 = bag_f1
_f1 = f1


# --------------------------------------------------------------------------- schema


@dataclass(frozen=True)
class FieldSpec:
    """One scored field: its display ``path`` (``action_items[].owner``), its kind and,
    for lists, the kind of its items; ``decimals`` is the precision of a number."""

    path: str
    kind: FieldKind
    item_kind: FieldKind | None = None
    decimals: int | None = None


@dataclass(frozen=True)
class _Scalar:
    spec: FieldSpec
    shaped: bool = False  # a string with a ``pattern`` or ``format``


@dataclass(frozen=True)
class _List:
    spec: FieldSpec
    shaped: bool = False  # of strings with a ``pattern`` or ``format``


@dataclass(frozen=True)
class _Object:
    properties: tuple[tuple[str, _Node], ...]
    defaults: Mapping[str, Any]


@dataclass(frozen=True)
class _ObjectArray:
    item: _Object


_Node: TypeAlias = _Scalar | _List | _Object | _ObjectArray


def _resolve(node: Any, root: Mapping[str, Any], depth: int = 0) -> Mapping[str, Any]:
    """``node`` with local ``$ref`` followed and a nullable ``anyOf`` reduced to its
    non-null branch; anything unreadable becomes ``{}``."""
    for _ in range(MAX_DEPTH):
        if not isinstance(node, Mapping):
            return {}
        ref = node.get("$ref")
        if isinstance(ref, str):
            if not ref.startswith("#/"):
                return {}
            target: Any = root
            for part in ref[2:].split("/"):
                part = part.replace("~1", "/").replace("~0", "~")
                target = target.get(part) if isinstance(target, Mapping) else None
            node = target
            continue
        branches = node.get("anyOf", node.get("oneOf"))
        if isinstance(branches, list):
            real = [b for b in branches if not (isinstance(b, Mapping) and b.get("type") == "null")]
            if len(real) == 1:
                merged = {k: v for k, v in node.items() if k not in ("anyOf", "oneOf")}
                node = {**_resolve(real[0], root, depth + 1), **merged}
                continue
        return node
    return {}


def _decimals(step: Any) -> int | None:
    if isinstance(step, bool) or not isinstance(step, int | float) or step <= 0 or step >= 1:
        return None
    decimals = -math.log10(step)
    rounded = round(decimals)
    return rounded if math.isclose(decimals, rounded, abs_tol=1e-9) else None


def _scalar_kind(schema: Mapping[str, Any]) -> tuple[FieldKind, int | None]:
    if "enum" in schema or "const" in schema:
        return "enum", None
    kind = schema.get("type")
    if kind == "boolean":
        return "boolean", None
    if kind == "integer":
        return "integer", None
    if kind == "number":
        return "number", _decimals(schema.get("multipleOf"))
    if kind == "string":
        fmt = schema.get("format")
        if fmt in _DATE_FORMATS:
            return "date", None
        limit = schema.get("maxLength")
        short = isinstance(limit, int) and limit <= SHORT_TEXT_MAX_LENGTH
        if short or "pattern" in schema or isinstance(fmt, str):
            return "short_text", None
        return "free_text", None
    return "json", None


def _is_object(schema: Mapping[str, Any]) -> bool:
    return schema.get("type") == "object" and isinstance(schema.get("properties"), Mapping)


def _build(schema: Any, root: Mapping[str, Any], path: str, depth: int) -> _Node:
    node = _resolve(schema, root)
    if depth > MAX_DEPTH:
        return _Scalar(FieldSpec(path, "json"))
    if _is_object(node) and not node.get("additionalProperties"):
        return _object(node, root, path, depth)
    if node.get("type") == "array" and "prefixItems" not in node:
        items = _resolve(node.get("items"), root)
        if _is_object(items) and not items.get("additionalProperties"):
            return _ObjectArray(_object(items, root, f"{path}[]", depth + 1))
        if items.get("type") not in ("array", "object") and items:
            kind, decimals = _scalar_kind(items)
            if kind != "json":
                return _List(FieldSpec(f"{path}[]", "list", kind, decimals), _is_shaped(items))
        return _Scalar(FieldSpec(path, "json"))
    kind, decimals = _scalar_kind(node)
    return _Scalar(FieldSpec(path, kind, decimals=decimals), _is_shaped(node))


def _is_shaped(schema: Mapping[str, Any]) -> bool:
    """A field that defines its own shape (the slot checks' rule): only the copy and
    repeat detectors judge its values."""
    return "pattern" in schema or "format" in schema


def _object(node: Mapping[str, Any], root: Mapping[str, Any], path: str, depth: int) -> _Object:
    props: list[tuple[str, _Node]] = []
    defaults: dict[str, Any] = {}
    for key, sub in node["properties"].items():
        child = f"{path}.{key}" if path else key
        props.append((key, _build(sub, root, child, depth + 1)))
        resolved = _resolve(sub, root)
        if isinstance(sub, Mapping) and "default" in sub:
            defaults[key] = sub["default"]
        elif "default" in resolved:
            defaults[key] = resolved["default"]
    return _Object(tuple(props), defaults)


def _tree(schema: Mapping[str, Any]) -> _Object:
    root = _resolve(schema, schema)
    if not _is_object(root):
        raise ValueError("the schema's root must be an object with properties")
    return _object(root, schema, "", 0)


def _specs(node: _Node) -> Iterator[FieldSpec]:
    if isinstance(node, _Scalar | _List):
        yield node.spec
    elif isinstance(node, _Object):
        for _, child in node.properties:
            yield from _specs(child)
    else:
        yield from _specs(node.item)


def schema_fields(schema: Mapping[str, Any]) -> list[FieldSpec]:
    """The scored fields of ``schema``, in schema order (see the module docs).

    Raises :class:`ValueError` when the root is not an object with ``properties``.
    """
    return list(_specs(_tree(schema)))


def schema_examples(schema: Mapping[str, Any]) -> list[Any]:
    """Every scalar the schema itself offers as a value: the items of each ``examples``
    list and each non-null scalar ``default``, anywhere in the schema (``$defs``
    included). Bounded by :data:`MAX_DEPTH` levels and :data:`MAX_ITEMS` per list."""

    def scalar(value: Any) -> bool:
        return value is not None and not isinstance(value, Mapping | list)

    found: list[Any] = []
    for node in schema_nodes(schema):
        examples = node.get("examples")
        if isinstance(examples, list):
            found.extend(e for e in examples[:MAX_ITEMS] if scalar(e))
        if scalar(node.get("default")):
            found.append(node["default"])
    return found


def schema_prose(schema: Mapping[str, Any]) -> list[str]:
    """Every ``title`` and ``description`` string of the schema (``$defs`` included),
    normalized (:func:`normalize_text`): the words a form made from it shows.
    Bounded by :data:`MAX_DEPTH` levels and :data:`MAX_ITEMS` per list."""
    return [
        normalize_text(text)
        for node in schema_nodes(schema)
        for text in (node.get("title"), node.get("description"))
        if isinstance(text, str) and text.strip()
    ]


# --------------------------------------------------------------------------- scoring


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _canonical(value: Any) -> str:
    try:
        return json.dumps(value, sort_keys=True, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError):
        return repr(value)


def score_value(kind: FieldKind, predicted: Any, gold: Any, decimals: int | None = None) -> float:
    """The score in [0, 1] of one scalar answer of ``kind`` (see the module docs).

    ``None`` stands for an absent value: two absent values score 1, one absent 0; a
    value of the wrong type scores 0.
    """
    if predicted is None or gold is None:
        return float(predicted is None and gold is None)
    if kind == "boolean":
        return float(isinstance(predicted, bool) and isinstance(gold, bool) and predicted == gold)
    if kind in ("integer", "number"):
        if not (_is_number(predicted) and _is_number(gold)):
            return 0.0
        if kind == "number" and decimals is not None:
            return float(_within_half_step(predicted, gold, decimals))
        return float(predicted == gold)  # ``12`` equals ``12.0``; no tolerance
    if kind in ("date", "short_text", "free_text"):
        if not (isinstance(predicted, str) and isinstance(gold, str)):
            return 0.0
        if kind == "date":
            return float(predicted.strip() == gold.strip())
        if kind == "short_text":
            return float(normalize_text(predicted) == normalize_text(gold))
        return token_f1(predicted, gold)
    if kind == "enum":
        return float(_canonical(predicted) == _canonical(gold) and type(predicted) is type(gold))
    return float(_canonical(predicted) == _canonical(gold))


def _within_half_step(predicted: float, gold: float, decimals: int) -> bool:
    """Whether two numbers differ by less than half of 10^-``decimals``, judged on the
    decimal values they are written as (their shortest ``repr``), so that a difference of
    exactly half a step is wrong on both sides whatever the binary rounding."""
    if not (math.isfinite(predicted) and math.isfinite(gold)):
        return False
    difference = abs(Decimal(repr(predicted)) - Decimal(repr(gold)))
    return difference < Decimal(5).scaleb(-decimals - 1)


def align(
    predicted: Sequence[Any], gold: Sequence[Any], similarity: Callable[[Any, Any], float]
) -> list[tuple[int, int, float]]:
    """A one-to-one matching of predicted to gold items, greedy by similarity.

    Every pair is scored, then pairs are taken from the most similar down, skipping
    items already matched and pairs of similarity 0; ties keep the earlier items
    first. Returns ``(predicted index, gold index, similarity)`` triples. At most
    :data:`MAX_ITEMS` items of each side are read: O(n·m·log(n·m)).
    """
    pred, ref = predicted[:MAX_ITEMS], gold[:MAX_ITEMS]
    pairs = [(similarity(p, g), i, j) for i, p in enumerate(pred) for j, g in enumerate(ref)]
    pairs.sort(key=lambda t: (-t[0], t[1], t[2]))
    used_pred: set[int] = set()
    used_gold: set[int] = set()
    out: list[tuple[int, int, float]] = []
    for score, i, j in pairs:
        if score <= 0:
            break
        if i in used_pred or j in used_gold:
            continue
        used_pred.add(i)
        used_gold.add(j)
        out.append((i, j, score))
    return out


def _item_key(kind: FieldKind, value: Any) -> str:
    """What makes two items of a list of ``kind`` one item: text equal after
    :func:`normalize_text`, numbers equal as numbers (``1`` and ``1.0``), anything else
    equal as JSON."""
    if isinstance(value, str) and kind in ("short_text", "free_text", "enum"):
        return "s:" + (normalize_text(value) if kind != "enum" else value)
    if kind in ("integer", "number") and _is_number(value):
        return f"n:{value!r}" if isinstance(value, int) else f"n:{_integral(value)!r}"
    return "j:" + _canonical(value)


def _integral(value: float) -> float | int:
    """``value`` as an ``int`` when it is a finite whole number (so ``1.0`` keys as ``1``)."""
    return int(value) if math.isfinite(value) and value.is_integer() else value


def _dedupe(kind: FieldKind, items: Sequence[Any]) -> list[Any]:
    seen: set[str] = set()
    out: list[Any] = []
    for item in items[:MAX_ITEMS]:
        key = _item_key(kind, item)
        if key not in seen:
            seen.add(key)
            out.append(item)
    return out


def set_f1(
    predicted: Sequence[Any], gold: Sequence[Any], kind: FieldKind, decimals: int | None = None
) -> float:
    """Set-F1 of two lists of scalars of ``kind``: duplicates (after normalisation)
    dropped, items matched one to one by :func:`align` on :func:`score_value`, then
    F1 of the matched score sum over both sizes. Two empty lists score 1."""
    pred, ref = _dedupe(kind, predicted), _dedupe(kind, gold)
    pairs = align(pred, ref, lambda p, g: score_value(kind, p, g, decimals))
    return _f1(sum(score for _, _, score in pairs), len(pred), len(ref))


def _as_list(value: Any) -> list[Any]:
    return list(value[:MAX_ITEMS]) if isinstance(value, list) else []


def _get(obj: Any, key: str, defaults: Mapping[str, Any]) -> Any:
    if isinstance(obj, Mapping) and key in obj:
        return obj[key]
    return defaults.get(key)


def _score_node(node: _Node, predicted: Any, gold: Any) -> list[float]:
    """Scores of every field under ``node``, in :func:`schema_fields` order."""
    if isinstance(node, _Scalar):
        return [score_value(node.spec.kind, predicted, gold, node.spec.decimals)]
    if isinstance(node, _List):
        kind = node.spec.item_kind or "json"
        return [set_f1(_as_list(predicted), _as_list(gold), kind, node.spec.decimals)]
    if isinstance(node, _Object):
        scores: list[float] = []
        for key, child in node.properties:
            scores.extend(
                _score_node(
                    child, _get(predicted, key, node.defaults), _get(gold, key, node.defaults)
                )
            )
        return scores
    return _score_items(node, _as_list(predicted), _as_list(gold))


def _score_items(node: _ObjectArray, predicted: list[Any], gold: list[Any]) -> list[float]:
    width = sum(1 for _ in _specs(node.item))
    if not predicted or not gold:
        return [float(not predicted and not gold)] * width
    item_scores: dict[tuple[int, int], list[float]] = {}

    def similarity(i: int, j: int) -> float:
        scores = _score_node(node.item, predicted[i], gold[j])
        item_scores[i, j] = scores
        return sum(scores) / len(scores) if scores else 0.0

    pairs = align(range(len(predicted)), range(len(gold)), similarity)
    sums = [0.0] * width
    for i, j, _ in pairs:
        for column, score in enumerate(item_scores[i, j]):
            sums[column] += score
    return [_f1(total, len(predicted), len(gold)) for total in sums]


@dataclass(frozen=True)
class FieldScore:
    """The score of one field of one object."""

    path: str
    kind: FieldKind
    score: float


def score_object(schema: Mapping[str, Any], predicted: Any, gold: Any) -> list[FieldScore]:
    """Every field of ``schema`` scored for ``predicted`` against ``gold``.

    ``predicted=None`` (no object, or one that did not validate) scores 0 on every
    field. Raises :class:`ValueError` when the schema's root is not an object.
    """
    tree = _tree(schema)
    specs = list(_specs(tree))
    if predicted is None:
        return [FieldScore(spec.path, spec.kind, 0.0) for spec in specs]
    scores = _score_node(tree, predicted, gold)
    return [
        FieldScore(spec.path, spec.kind, score) for spec, score in zip(specs, scores, strict=True)
    ]


# --------------------------------------------------------------------------- degenerate


@dataclass(frozen=True)
class _Leaf:
    spec: FieldSpec
    value: Any
    shaped: bool = False
    #: An item of a list (or a field of an item of an array of objects) that repeats
    #: an earlier item of the same list (the ``list_repeat`` detector).
    list_repeat: bool = False


def _leaves(node: _Node, value: Any, repeat: bool = False) -> Iterator[_Leaf]:
    """Every present scalar of ``value`` with the field it fills; ``repeat`` marks the
    leaves of an item that repeats an earlier one of its list."""
    if isinstance(node, _Scalar):
        if value is not None and not isinstance(value, Mapping | list):
            yield _Leaf(node.spec, value, node.shaped, repeat)
    elif isinstance(node, _List):
        items = [i for i in _as_list(value) if i is not None and not isinstance(i, Mapping | list)]
        repeats = _repeated_items(node.spec, items)
        for index, item in enumerate(items):
            yield _Leaf(node.spec, item, node.shaped, repeat or index in repeats)
    elif isinstance(node, _Object):
        if isinstance(value, Mapping):
            for key, child in node.properties:
                if key in value:
                    yield from _leaves(child, value[key], repeat)
    else:
        items = _as_list(value)
        per_item = [list(_leaves(node.item, item)) for item in items]
        repeats = _repeated_objects(per_item)
        for index, item in enumerate(items):
            yield from _leaves(node.item, item, repeat or index in repeats)


def _repeated_items(spec: FieldSpec, items: Sequence[Any]) -> set[int]:
    """Indexes of the items of a list of strings equal to (after
    :func:`normalize_text`) or a near copy of (:func:`is_near_copy`) an earlier item:
    the rule of the slot check ``list_repeat``. Near copies are looked for among the
    first :data:`MAX_NEAR_COPY_TEXTS` items of enough words, through a
    :class:`TextIndex` (O(text) per item)."""
    if not _is_text(spec):
        return set()
    index = TextIndex()
    found: set[int] = set()
    for at, item in enumerate(items):
        if not isinstance(item, str) or not item.strip():
            continue
        if next(index.matches(item), None) is not None:
            found.add(at)
        index.add(item, at)
    return found


def _repeated_objects(items: Sequence[Sequence[_Leaf]]) -> set[int]:
    """Indexes of the items of an array of objects (given as their leaves) that repeat
    an earlier item: the same text fields (:func:`_is_text`; numbers, enums and
    booleans are not compared: a section repeated with another word count is still a
    repeat), each value equal (:func:`_key`) or a near copy (:func:`is_near_copy`),
    and at least one non-blank text among them. Compares every pair of the first
    :data:`MAX_ITEMS` items: O(n² · fields)."""
    signatures = [
        [_Signature.of(leaf) for leaf in leaves if _is_text(leaf.spec)] for leaves in items
    ]
    found: set[int] = set()
    for later, mine in enumerate(signatures):
        if not any(isinstance(leaf.value, str) and leaf.value.strip() for leaf in items[later]):
            continue
        for theirs in signatures[:later]:
            if len(theirs) == len(mine) and all(map(_Signature.alike, mine, theirs)):
                found.add(later)
                break
    return found


@dataclass(frozen=True)
class _Signature:
    """What two items' values are compared by: the field, the value's key and, for a
    text, its words."""

    path: str
    key: str
    words: Counter[str] | None

    @classmethod
    def of(cls, leaf: _Leaf) -> _Signature:
        value = leaf.value
        return cls(
            leaf.spec.path, _key(value), Counter(_tokens(value)) if isinstance(value, str) else None
        )

    def alike(self, other: _Signature) -> bool:
        if self.path != other.path:
            return False
        if self.key == other.key:
            return True
        return (
            self.words is not None
            and other.words is not None
            and is_near_copy(self.words, other.words)
        )


def _key(value: Any) -> str:
    """What makes two values "the same" for the detectors."""
    if isinstance(value, str):
        return "s:" + normalize_text(value)
    if _is_number(value):
        return f"n:{float(value)!r}"
    return "j:" + _canonical(value)


def _is_slot_ids(text: str, identifiers: frozenset[str]) -> bool:
    parts = [p for p in _ID_SEPARATORS.split(text.strip()) if p]
    if not parts:
        return False
    for part in parts:
        token = _ID_INDEX.sub("", part.strip("<>/[]()")).casefold()
        if token not in identifiers:
            return False
    return True


def _repeated(leaves: Sequence[_Leaf]) -> set[int]:
    """Indexes of the text leaves that another one repeats (the ``repeated`` detector).

    Equal texts are grouped by key in O(n); near copies are looked for among the first
    :data:`MAX_NEAR_COPY_TEXTS` (M) distinct texts of enough words, pairwise: at most
    M² comparisons of word counts, and O(M · n) to gather the fields of each group.
    """
    groups: dict[str, list[int]] = {}  # key -> the text leaves holding it
    for index, leaf in enumerate(leaves):
        if isinstance(leaf.value, str) and leaf.value.strip() and _is_text(leaf.spec):
            groups.setdefault(_key(leaf.value), []).append(index)
    words: dict[str, Counter[str]] = {}
    for key, members in groups.items():
        if len(words) == MAX_NEAR_COPY_TEXTS:
            break
        counted = Counter(_tokens(leaves[members[0]].value))
        if counted.total() >= NEAR_COPY_MIN_WORDS:
            words[key] = counted
    near: dict[str, list[str]] = {key: [key] for key in groups}
    keys = list(words)
    for i, first in enumerate(keys):
        for second in keys[i + 1 :]:
            if _bag_f1(words[first], words[second]) >= NEAR_COPY_F1:
                near[first].append(second)
                near[second].append(first)

    found: set[int] = set()
    for key, members in groups.items():
        paths = Counter(
            leaves[other].spec.path for similar in near[key] for other in groups[similar]
        )
        for index in members:
            spec = leaves[index].spec
            # Another field holds it, or another item of the same list of strings does;
            # fields of the items of an array of objects (no item kind) may share a value.
            if len(paths) > 1 or (spec.item_kind is not None and paths[spec.path] > 1):
                found.add(index)
    return found


def _is_text(spec: FieldSpec) -> bool:
    """Whether a field holds open strings (not one of a few fixed values)."""
    return (spec.item_kind or spec.kind) in ("short_text", "free_text", "date", "json")


def _copies_example(
    leaf: _Leaf, keys: frozenset[str], texts: Sequence[str], prose: Sequence[str]
) -> bool:
    if leaf.spec.kind in ("enum", "boolean") or leaf.spec.item_kind in ("enum", "boolean"):
        return False
    if _key(leaf.value) in keys:
        return True
    if not isinstance(leaf.value, str):
        return False
    value = normalize_text(leaf.value)
    if len(value) < 3:
        return False
    if any(at_boundary(t, value) for t in texts):
        return True
    words = len(_tokens(value))
    return any(
        value == p
        or (len(p) >= _PROSE_START and at_boundary(value, p))
        or (words >= 3 and at_boundary(p, value))
        for p in prose
    )


@dataclass(frozen=True)
class Degenerate:
    """The fields of one object flagged by each detector, and how many fields it has."""

    fields: int
    flags: Mapping[str, frozenset[str]]

    @property
    def any(self) -> frozenset[str]:
        """Fields flagged by at least one detector."""
        return frozenset().union(*self.flags.values())

    def to_json(self) -> dict[str, Any]:
        return {
            "fields": self.fields,
            "flags": {name: sorted(paths) for name, paths in self.flags.items()},
            "any": sorted(self.any),
        }


def detect_degenerate(
    schema: Mapping[str, Any],
    obj: Any,
    gold: Any = None,
    *,
    identifiers: Collection[str] = (),
    examples: Collection[Any] = (),
    input_text: str = "",
    model_name: str | None = None,
) -> Degenerate:
    """Run every detector of the module docs on ``obj`` (a produced object, valid or
    not). ``identifiers``: the slot identifiers a value must not be (compared case
    folded); ``examples``: the example values the model was shown (the schema's own
    titles and descriptions are read from ``schema``); ``input_text``: the input the
    model was given (a number or a schema word it states is no junk); ``model_name``:
    the class name of the model the schema came from. Without ``gold`` no value counts
    as right and ``empty`` finds nothing.

    Raises :class:`ValueError` when the schema's root is not an object.
    """
    tree = _tree(schema)
    count = sum(1 for _ in _specs(tree))
    flags: dict[str, set[str]] = {name: set() for name in DETECTORS}
    leaves = list(_leaves(tree, obj)) if isinstance(obj, Mapping) else []
    right: dict[str, set[str]] = {}
    for leaf in _leaves(tree, gold) if isinstance(gold, Mapping) else ():
        right.setdefault(leaf.spec.path, set()).add(_key(leaf.value))
    ids = frozenset(i.casefold() for i in identifiers)
    example_keys = frozenset(_key(e) for e in examples if e is not None)
    example_texts = [normalize_text(e) for e in examples if isinstance(e, str)]
    prose = schema_prose(schema)
    source = InputText(input_text)
    words = SchemaWords(schema, model_name)
    repeated = _repeated(leaves)
    for index, leaf in enumerate(leaves):
        path, key = leaf.spec.path, _key(leaf.value)
        if key in right.get(path, ()):
            continue
        if leaf.list_repeat and _is_text(leaf.spec):
            flags["list_repeat"].add(path)
        for name in _junk(leaf, source, words):
            flags[name].add(path)
        if isinstance(leaf.value, str):
            if not leaf.value.strip():
                if any(k.startswith("s:") and k != "s:" for k in right.get(path, ())):
                    flags["empty"].add(path)
                continue
            if ids and _is_slot_ids(leaf.value, ids):
                flags["slot_id"].add(path)
            if index in repeated:
                flags["repeated"].add(path)
        if _copies_example(leaf, example_keys, example_texts, prose):
            flags["example_copy"].add(path)
    return Degenerate(count, {name: frozenset(paths) for name, paths in flags.items()})


def _junk(leaf: _Leaf, source: InputText, words: SchemaWords) -> Iterator[Detector]:
    """The shape and copy detectors that flag ``leaf``: the slot checks' value rules
    (:mod:`slotflight.assemble.value_rules`) on the fields the checks judge."""
    kind = leaf.spec.item_kind or leaf.spec.kind
    if kind not in ("short_text", "free_text", "date"):
        return
    value = leaf.value
    copied = isinstance(value, str) and value.strip() and words.copied_by(value, source)
    if copied:
        yield "schema_copy"
    if leaf.shaped or kind == "date":
        return  # a field with a pattern or format defines its own shape
    # A number where text belongs (a JSON mode's object that did not validate) is read
    # as the text a slot would have held: ``1`` is the placeholder ``"1"``.
    text = value if isinstance(value, str) else _canonical(value) if _is_number(value) else None
    if text is None or not text.strip():
        return
    if is_unstated_placeholder(text, source, item=leaf.spec.item_kind is not None):
        yield "placeholder"
    if is_digit_run(text):
        yield "digit_run"
    if needless_quotes(text):
        yield "quoted"
