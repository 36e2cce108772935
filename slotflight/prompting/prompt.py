"""The prompt a plan sends, and the follow-up that asks for failed slots again.

Both are rendered from Jinja2 templates (``prompts/<syntax>/prompt.j2`` and
``retry.j2``); this module only prepares what they show: one line of facts per slot,
and example frames rendered by the frame renderer from :func:`example_instance`, so the
example always matches the plan and the parser.

The example sits between the fixed lines :data:`EXAMPLE_BEGIN` and :data:`EXAMPLE_END`
(see :func:`extract_example`). No prompt line starts with whitespace except, possibly,
lines of example values, and the values this module makes up have none.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from ..plan.compiler import bounds_phrase
from ..plan.limits import limit_error
from ..plan.model import INDEX, ArrayNode, Slot, SlotPlan, _display
from ..plan.tree import Group, Leaf, ObjectArray, ScalarArray, layout
from ..syntax.lines import always_in_item, line_heads
from ..syntax.render import FrameValue, formatter, frame_tag, value_text, walk_instance
from .templates import template

__all__ = [
    "EXAMPLE_BEGIN",
    "EXAMPLE_END",
    "RetryItem",
    "example_instance",
    "example_value",
    "extract_example",
    "prompt",
    "retry_prompt",
]

EXAMPLE_BEGIN: Final = "--- example start ---"
EXAMPLE_END: Final = "--- example end ---"

#: Items shown per array in examples (raised to ``minItems``, cut to ``maxItems``).
EXAMPLE_ITEMS: Final = 2

_FIXED_EXAMPLES: Final[Mapping[str, str]] = {
    "date": "2025-01-31",
    "datetime": "2025-01-31T09:30:00Z",
    "time": "09:30:00",
    "uuid": "3f2b8c1e-7d4a-4e6b-9a0c-5d1e2f3a4b5c",
}
_FORMAT_EXAMPLES: Final[Mapping[str, str]] = {
    **_FIXED_EXAMPLES,
    "date-time": "2025-01-31T09:30:00Z",
    "email": "ada@example.com",
    "uri": "https://example.com/",
    "url": "https://example.com/",
    "hostname": "example.com",
    "ipv4": "192.0.2.1",
    "ipv6": "2001:db8::1",
    "duration": "P1D",
}


# -- example values -------------------------------------------------------------------


def _number_example(constraints: Mapping[str, Any], integer: bool) -> int | float:
    low: float | None = constraints.get("minimum")
    high: float | None = constraints.get("maximum")
    if "exclusiveMinimum" in constraints:
        bound = constraints["exclusiveMinimum"]
        low = (
            (math.floor(bound) + 1 if integer else bound + 0.5) if low is None else max(low, bound)
        )
    if "exclusiveMaximum" in constraints:
        bound = constraints["exclusiveMaximum"]
        high = (
            (math.ceil(bound) - 1 if integer else bound - 0.5) if high is None else min(high, bound)
        )
    if low is not None and high is not None:
        value: float = (low + high) / 2
    elif low is not None:
        value = low if integer else low + 1
    elif high is not None:
        value = min(high, 1) if integer else high - 1
    else:
        value = 1 if integer else 1.5
    step = constraints.get("multipleOf")
    if isinstance(step, (int, float)) and step > 0:
        value = math.ceil(value / step) * step
    if integer:
        return math.ceil(value) if low is not None and value < low else math.floor(value)
    return float(value)


def _text_example(slot_name: str, constraints: Mapping[str, Any], index: int | None) -> str:
    fmt = constraints.get("format")
    if isinstance(fmt, str) and fmt in _FORMAT_EXAMPLES:
        return _FORMAT_EXAMPLES[fmt]
    words = slot_name.replace("_", " ").replace("-", " ").strip() or "value"
    text = f"Example {words}" + ("" if index is None else f" {index + 1}")
    low, high = constraints.get("minLength"), constraints.get("maxLength")
    if isinstance(low, int) and len(text) < low:
        text += " and more" * -(-(low - len(text)) // len(" and more"))
    if isinstance(high, int) and len(text) > high:
        text = text[:high].rstrip() or "x" * min(high, 1)
    return text


def example_value(slot: Slot, index: int | None = None) -> Any:
    """A plausible valid value for ``slot`` (item ``index`` of an array), JSON-mode.

    The first of the schema's ``examples`` when it has some (the only way to satisfy a
    ``pattern``), else made up from the kind and the bounds.
    """
    examples = slot.schema.get("examples")
    if isinstance(examples, list) and examples and slot.kind != "json":
        return examples[0]
    if slot.kind == "enum":
        return (slot.enum or (None,))[0]
    if slot.kind in _FIXED_EXAMPLES:
        return _FIXED_EXAMPLES[slot.kind]
    if slot.kind == "integer":
        return _number_example(slot.constraints, integer=True)
    if slot.kind == "number":
        return _number_example(slot.constraints, integer=False)
    if slot.kind == "boolean":
        return True
    if slot.kind == "json":
        return _json_example(slot.schema, slot.schema, 0)
    return _text_example(slot.name, slot.constraints, index)


def _resolve(schema: Any, root: Mapping[str, Any]) -> Any:
    for _ in range(32):
        if not isinstance(schema, Mapping) or "$ref" not in schema:
            return schema
        ref = schema["$ref"]
        target: Any = root
        for part in ref.lstrip("#").split("/")[1:]:
            target = target.get(part.replace("~1", "/").replace("~0", "~"), {})
        schema = target
    return {}


def _json_example(schema: Any, root: Mapping[str, Any], depth: int) -> Any:
    """A small value valid for a self-contained JSON Schema (required parts only)."""
    schema = _resolve(schema, root)
    if not isinstance(schema, Mapping) or depth > 6:
        return {}
    for keyword in ("anyOf", "oneOf", "allOf"):
        branches = schema.get(keyword)
        if isinstance(branches, list) and branches:
            usable = [b for b in branches if _resolve(b, root) != {"type": "null"}]
            return _json_example((usable or branches)[0], root, depth + 1)
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or "properties" in schema or "additionalProperties" in schema:
        props: Mapping[str, Any] = schema.get("properties") or {}
        out = {
            k: _json_example(props[k], root, depth + 1)
            for k in schema.get("required", [])
            if k in props
        }
        extra = schema.get("additionalProperties")
        if not props and isinstance(extra, Mapping):
            out["key"] = _json_example(extra, root, depth + 1)
        return out
    if kind == "array" or "items" in schema or "prefixItems" in schema:
        prefix = schema.get("prefixItems")
        if isinstance(prefix, list):
            return [_json_example(p, root, depth + 1) for p in prefix]
        count = max(schema.get("minItems", 0), 1)
        if schema.get("maxItems") is not None:
            count = min(count, schema["maxItems"])
        return [_json_example(schema.get("items", {}), root, depth + 1) for _ in range(count)]
    if kind == "integer":
        return _number_example(schema, integer=True)
    if kind == "number":
        return _number_example(schema, integer=False)
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    return _text_example("value", schema, None)


def _example_count(array: ArrayNode) -> int:
    count = EXAMPLE_ITEMS if array.max_items is None else min(EXAMPLE_ITEMS, array.max_items)
    return max(count, array.min_items)


def _example_group(group: Group, index: int | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for unit in group.units:
        if isinstance(unit, Leaf):
            if not unit.slot.is_rest:
                out[unit.key] = example_value(unit.slot, index)
        elif isinstance(unit, ScalarArray):
            assert unit.slot.array is not None
            count = _example_count(unit.slot.array)
            out[unit.key] = [example_value(unit.slot, i) for i in range(count)]
        elif isinstance(unit, Group):
            assert unit.key is not None
            out[unit.key] = _example_group(unit, index)
        elif isinstance(unit, ObjectArray):
            count = _example_count(unit.array)
            out[unit.key] = [_example_group(unit.item, i) for i in range(count)]
    return out


def example_instance(plan: SlotPlan) -> Any:
    """An instance filling every slot with a made-up valid value (JSON-mode data)."""
    root = plan.root_slot
    if root is not None:
        return example_value(root)
    return _example_group(layout(plan), None)


def extract_example(text: str) -> str:
    """The example frames of a prompt: the text between the marker lines."""
    start = text.index(EXAMPLE_BEGIN + "\n") + len(EXAMPLE_BEGIN) + 1
    end = text.index(EXAMPLE_END, start)
    return text[start:end]


# -- slot descriptions ----------------------------------------------------------------

_KIND_TEXT: Final[Mapping[str, str]] = {
    "string": "text",
    "integer": "integer",
    "number": "number",
    "boolean": "true or false",
    "date": "date YYYY-MM-DD",
    "datetime": "date-time YYYY-MM-DDTHH:MM:SSZ",
    "time": "time HH:MM:SS",
    "uuid": "UUID",
}


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def _kind_text(slot: Slot) -> str:
    if slot.kind == "enum":
        return "one of: " + " | ".join(value_text(slot, v) for v in slot.enum or ())
    if slot.kind == "json":
        return "JSON on one line, matching the schema " + _compact(slot.schema)
    bounds = bounds_phrase(slot.kind, slot.constraints)
    text = _KIND_TEXT[slot.kind]
    return f"{text}, {bounds}" if bounds else text


def _count_text(array: ArrayNode) -> str:
    low, high = array.min_items, array.max_items
    if high is None:
        return f"at least {low} items" if low else "any number of items"
    if low == high:
        return f"exactly {low} items"
    return f"{low} to {high} items"


def _presence(slot: Slot) -> str:
    if slot.array is not None and not slot.array.items_are_objects:
        words = ["required list" if slot.array.required else "optional list"]
        words.append(_count_text(slot.array))
    else:
        words = ["required" if slot.required else "optional"]
        if slot.array is not None:
            words[0] += " in each item"
    gates = [
        _display(p.segments, "i")
        for p in slot.parents
        if p.segments[-1] is not INDEX and (not p.required or p.nullable)
    ]
    if gates:
        words[0] += " when " + " and ".join(gates) + " is given"
    if slot.nullable:
        words.append("null allowed")
    return ", ".join(words)


@dataclass(frozen=True)
class _SlotLine:
    id: int
    tag: str
    path: str
    kind: str
    presence: str
    instruction: str
    heading: str | None = None
    #: The list this slot opens (``path: list of objects, count, presence``), if any.
    items: str | None = None


def _slot_lines(plan: SlotPlan) -> list[_SlotLine]:
    lines: list[_SlotLine] = []
    seen_arrays: set[tuple[Any, ...]] = set()
    for slot in plan.slots:
        heading = items = None
        array = slot.array
        if array is not None and array.items_are_objects and array.segments not in seen_arrays:
            seen_arrays.add(array.segments)
            items = (
                f"{array.path}: list of objects, {_count_text(array)}, "
                f"{'required' if array.required else 'optional'}"
            )
            heading = f"{items}; item i is written with index i on every one of its fields:"
        lines.append(
            _SlotLine(
                id=slot.id,
                tag=frame_tag(slot.id, None) + (":i" if slot.repeatable else ""),
                path=_display(slot.segments, "i"),
                kind=_kind_text(slot),
                presence=_presence(slot),
                instruction=_one_line(slot.instruction),
                heading=heading,
                items=items,
            )
        )
    return lines


def _item_indexes(plan: SlotPlan) -> bool:
    """Whether some list of objects may need an item index (v2): its first field is
    not one every item has."""
    seen: set[tuple[Any, ...]] = set()
    for slot in plan.slots:
        array = slot.array
        if array is not None and array.items_are_objects and array.segments not in seen:
            seen.add(array.segments)
            if not always_in_item(slot):
                return True
    return False


def prompt(plan: SlotPlan, syntax: str = "v1") -> str:
    """The instructions for ``plan``: the frame contract, the slots, an example answer."""
    example = formatter(syntax)(_frames_of(plan, example_instance(plan)))
    text = template(syntax, "prompt.j2").render(
        title=_one_line(plan.title),
        description=_one_line(plan.description) if plan.description else None,
        slots=_slot_lines(plan),
        item_indexes=_item_indexes(plan),
        example=example,
        example_begin=EXAMPLE_BEGIN,
        example_end=EXAMPLE_END,
    )
    if len(text) > plan.limits.max_prompt_chars:
        raise limit_error(
            "max_prompt_chars",
            f"the prompt has more than {plan.limits.max_prompt_chars} characters",
        )
    return text


def _frames_of(plan: SlotPlan, instance: Any) -> list[FrameValue]:
    return list(walk_instance(plan, instance))


# -- retries --------------------------------------------------------------------------


@dataclass(frozen=True)
class RetryItem:
    """One slot to produce again.

    ``index``: the item index for a repeatable slot; ``None`` on a scalar-array slot
    asks for the whole list again. ``reason``: why the value failed (the validation
    message). ``rejected``: the raw text that was rejected, if any.
    """

    slot: Slot
    index: int | None
    reason: str
    rejected: str | None = None


@dataclass(frozen=True)
class _RetryLine:
    tags: str
    #: The v2 line start the example uses (``5``, ``7:1``).
    head: str
    #: The whole scalar list is asked for again.
    whole_list: bool
    path: str
    kind: str
    instruction: str
    reason: str
    rejected: str | None


def _retry_frames(item: RetryItem) -> list[FrameValue]:
    slot, array = item.slot, item.slot.array
    if array is not None and not array.items_are_objects and item.index is None:
        count = _example_count(array)
        return [FrameValue(slot, i, value_text(slot, example_value(slot, i))) for i in range(count)]
    return [FrameValue(slot, item.index, value_text(slot, example_value(slot, item.index)))]


def _retry_line(item: RetryItem, head: str) -> _RetryLine:
    slot, array = item.slot, item.slot.array
    whole_list = slot.repeatable and item.index is None
    if whole_list:
        if array is not None and array.items_are_objects:
            raise ValueError(f"slot {slot.id} ({slot.path}) is an item field: index needed")
        tags = f"<{slot.id}:0>, <{slot.id}:1>, … (the whole list, from index 0)"
        path = _display(slot.segments, "i")
    else:
        tags = f"<{frame_tag(slot.id, item.index)}>"
        path = slot.display(item.index)
    return _RetryLine(
        tags=tags,
        head=head,
        whole_list=whole_list,
        path=path,
        kind=_kind_text(slot),
        instruction=_one_line(slot.instruction),
        reason=_one_line(item.reason),
        rejected=None if item.rejected is None else json.dumps(item.rejected, ensure_ascii=False),
    )


def retry_prompt(
    plan: SlotPlan,
    requests: Sequence[RetryItem],
    accepted: Mapping[str, Any] | None = None,
    syntax: str = "v1",
) -> str:
    """The follow-up asking for ``requests`` again, with the accepted values as context."""
    fmt = formatter(syntax)
    per_item = [_retry_frames(item) for item in requests]
    frames = [frame for item_frames in per_item for frame in item_frames]
    heads = line_heads(frames)
    firsts: list[str] = []  # the v2 head of each request's first frame
    at = 0
    for item, item_frames in zip(requests, per_item, strict=True):
        firsts.append(heads[at] if item_frames else str(item.slot.id))
        at += len(item_frames)
    return template(syntax, "retry.j2").render(
        title=_one_line(plan.title),
        requests=[_retry_line(item, head) for item, head in zip(requests, firsts, strict=True)],
        accepted=_compact(accepted) if accepted else None,
        example=fmt(frames),
        example_begin=EXAMPLE_BEGIN,
        example_end=EXAMPLE_END,
    )
