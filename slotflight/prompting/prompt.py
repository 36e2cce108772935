"""The prompt a plan sends, and the follow-up that asks for failed slots again.

Both are rendered from the syntax's Jinja2 templates (``prompts/<templates>/prompt.j2``
and ``retry.j2``); this module only prepares the facts they show, in one phrasing for
every syntax: per slot its name on the wire (:meth:`Syntax.ref`), its kind and bounds,
whether it is required, and its description. Each fact is said once.

The prompt teaches without leaking: it holds no made-up values a model could copy.
The only example values it ever shows are the schema's own (``examples``, ``default``),
and an example answer is shown only when they fill every required slot. With a
grammar (``grammar=True``) the facts the grammar already enforces (value shapes,
booleans, dates) are left out.

No prompt line starts with whitespace, and names, enum values and descriptions are
put on one line each, so no text from the schema can start a frame line of its own.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Final

from ..plan.compiler import bounds_phrase
from ..plan.instance import value_text, walk_instance
from ..plan.limits import limit_error
from ..plan.model import MISSING, ArrayNode, Slot, SlotPlan
from ..plan.tree import Group, Leaf, ScalarArray, layout
from ..syntax import get_syntax
from ..syntax.base import Syntax
from ..syntax.gbnf import one_line_string
from .templates import template

__all__ = [
    "EXAMPLE_BEGIN",
    "EXAMPLE_END",
    "RetryItem",
    "example_instance",
    "extract_example",
    "prompt",
    "retry_prompt",
    "retry_targets",
]

EXAMPLE_BEGIN: Final = "--- example start ---"
EXAMPLE_END: Final = "--- example end ---"

_KIND_TEXT: Final[Mapping[str, str]] = {
    "string": "text",
    "integer": "integer",
    "number": "number",
    "boolean": "true or false",
    "date": "date YYYY-MM-DD",
    "datetime": "date and time YYYY-MM-DDTHH:MM:SSZ",
    "time": "time HH:MM:SSZ",
    "uuid": "UUID",
}
#: Kinds whose shape a grammar enforces completely: nothing to say with a grammar.
_SHAPE_ONLY: Final = frozenset({"boolean", "date", "datetime", "time", "uuid"})


def _one_line(text: str) -> str:
    return " ".join(text.split())


#: Line breaks other than LF and CR that ``str.splitlines`` (and a reader) counts, which
#: JSON leaves unescaped in a string: escaped, so that JSON text stays on its line.
_JSON_LINE_BREAKS: Final = {0x85: "\\u0085", 0x2028: "\\u2028", 0x2029: "\\u2029"}


def _compact(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    return text.translate(_JSON_LINE_BREAKS)


# -- slot facts -------------------------------------------------------------------------


def _kind(slot: Slot, grammar: bool) -> str:
    """``text, at most 80 characters``, ``a | b | c``, ``integer 1-5``; empty when the
    grammar enforces everything there is to say."""
    if slot.kind == "enum":
        if grammar:
            return ""
        return " | ".join(_one_line(value_text(slot, v)) for v in slot.enum or ())
    if slot.kind == "json":
        return "JSON on one line, matching the schema " + _compact(slot.schema)
    constraints = slot.constraints
    if grammar and slot.kind == "string":
        line = one_line_string(slot, None)
        constraints = {k: v for k, v in constraints.items() if not _enforced(k, v, line)}
        if not constraints:
            return ""
    bounds = bounds_phrase(slot.kind, constraints)
    if grammar and slot.kind in _SHAPE_ONLY and not bounds:
        return ""
    text = _KIND_TEXT[slot.kind]
    return f"{text}, {bounds}" if bounds else text


def _enforced(keyword: str, value: Any, line: tuple[int, int] | None) -> bool:
    """Whether the plan's grammar enforces this string constraint: a ``minLength`` of at
    most 1 (no value is empty), and the bounds ``line`` of a string it keeps to one
    bounded line (:func:`~..syntax.gbnf.one_line_string`)."""
    if keyword == "minLength" and isinstance(value, int) and value <= 1:
        return True
    return line is not None and (keyword, value) in (("minLength", line[0]), ("maxLength", line[1]))


def _count(array: ArrayNode) -> str:
    low, high = array.min_items, array.max_items
    if high is None:
        return f"at least {low}" if low else "any number of"
    if low == high:
        return f"exactly {low}"
    return f"{low} to {high}" if low else f"up to {high}"


def _note(slot: Slot) -> str:
    """What the schema says the slot means: its description, else its title."""
    for text in (slot.description, slot.title):
        if text and text.strip():
            return _one_line(text)
    return ""


@dataclass(frozen=True)
class SlotFacts:
    """What a prompt says about one slot (see the module docs)."""

    ref: str
    #: How the field list names the slot: its ``ref``, with its path when the ref does
    #: not say it (``3 priority``, ``<5:i> tags[i]``; ``owner`` in a named syntax).
    label: str
    path: str
    kind: str
    required: bool
    nullable: bool
    note: str
    #: A scalar list: one frame per item (``count``: how many items).
    listed: bool = False
    count: str = ""
    #: The value is written as a JSON string: the form shows it in double quotes.
    quoted: bool = False
    shape: ClassVar[str] = "slot"


def _leaf_refs(fields: tuple[Any, ...]) -> list[str]:
    """The refs of the slots under ``fields``, in order (nested groups and lists
    included)."""
    refs: list[str] = []
    for f in fields:
        refs.extend(_leaf_refs(f.fields) if f.shape in ("list", "group") else [f.ref])
    return refs


@dataclass(frozen=True)
class ListFacts:
    """A list of objects: its fields follow, once per item."""

    path: str
    #: How the syntax names the list (:meth:`Syntax.list_ref`).
    ref: str
    count: str
    required: bool
    note: str
    fields: tuple[Any, ...]
    shape: ClassVar[str] = "list"

    @property
    def first_ref(self) -> str:
        """The ref of the item's first slot ("" when the item has none)."""
        refs = _leaf_refs(self.fields)
        return refs[0] if refs else ""

    @property
    def last_ref(self) -> str:
        """The ref of the item's last slot ("" when the item has none)."""
        refs = _leaf_refs(self.fields)
        return refs[-1] if refs else ""


@dataclass(frozen=True)
class GroupFacts:
    """A nested object: its fields follow."""

    path: str
    required: bool
    nullable: bool
    note: str
    fields: tuple[Any, ...]
    shape: ClassVar[str] = "group"


def _slot_facts(syntax: Syntax, plan: SlotPlan, slot: Slot, grammar: bool) -> SlotFacts:
    array = slot.array
    listed = array is not None and not array.items_are_objects
    ref = _one_line(syntax.ref(plan, slot))
    keys = ".".join(s for s in slot.segments if isinstance(s, str))
    shown = _one_line(slot.display("i"))
    says_path = not shown or slot.is_rest or keys.endswith(ref)
    return SlotFacts(
        ref=ref,
        label=ref if says_path else f"{ref} {shown}",
        path=_one_line(slot.path),
        kind=_kind(slot, grammar),
        required=(array.required and array.min_items > 0) if listed and array else slot.required,
        nullable=slot.nullable,
        note=_note(slot) or (_one_line(array.description or "") if array else ""),
        listed=listed,
        count=_count(array) if listed and array else "",
        quoted=syntax.quotes(slot),
    )


def _facts(syntax: Syntax, plan: SlotPlan, group: Group, grammar: bool) -> tuple[Any, ...]:
    out: list[Any] = []
    for unit in group.units:
        if isinstance(unit, Leaf | ScalarArray):
            out.append(_slot_facts(syntax, plan, unit.slot, grammar))
        elif isinstance(unit, Group):
            node = unit.node
            assert node is not None
            out.append(
                GroupFacts(
                    path=_one_line(".".join(s for s in node.segments if isinstance(s, str))),
                    required=node.required,
                    nullable=node.nullable,
                    note="",
                    fields=_facts(syntax, plan, unit, grammar),
                )
            )
        else:
            array = unit.array
            out.append(
                ListFacts(
                    path=_one_line(array.path),
                    ref=_one_line(syntax.list_ref(plan, array)),
                    count=_count(array),
                    required=array.required and array.min_items > 0,
                    note=_one_line(array.description or ""),
                    fields=_facts(syntax, plan, unit.item, grammar),
                )
            )
    return tuple(out)


# -- examples from the schema ------------------------------------------------------------


def example_instance(plan: SlotPlan) -> dict[str, Any] | None:
    """An instance made of the schema's own example and default values, or ``None``
    when they do not fill every required slot (the prompt then shows no example)."""
    return _example_group(layout(plan))


def _example_group(group: Group) -> dict[str, Any] | None:
    out: dict[str, Any] = {}
    for unit in group.units:
        if isinstance(unit, Leaf):
            value = unit.slot.example
            if value is not MISSING:
                out[unit.key] = value
            elif unit.slot.required:
                return None
        elif isinstance(unit, ScalarArray):
            array = unit.slot.array
            assert array is not None
            value = unit.slot.example
            if value is not MISSING and (_example_items(array) or array.required):
                out[unit.key] = [value] * _example_items(array)
            elif array.required and array.min_items > 0:
                return None
        elif isinstance(unit, Group):
            inner = _example_group(unit)
            if inner is not None and (
                _writes_frames(inner) or unit.node is None or unit.node.required
            ):
                assert unit.key is not None
                out[unit.key] = inner
            elif unit.node is not None and unit.node.required:
                return None
        else:
            item = _example_group(unit.item)
            if (
                item is not None
                and _writes_frames(item)
                and (_example_items(unit.array) or unit.array.required)
            ):
                out[unit.key] = [item] * _example_items(unit.array)
            elif unit.array.required and unit.array.min_items > 0:
                return None
    return out


def _writes_frames(value: Any) -> bool:
    """Whether ``value`` writes at least one frame. An object holding only empty lists
    writes none: left out as optional, it reads back as absent; as a list item, it is
    an empty item no frame can write."""
    if isinstance(value, dict):
        return any(_writes_frames(v) for v in value.values())
    if isinstance(value, list):
        return bool(value)
    return True


def _example_items(array: ArrayNode) -> int:
    """How many items an example list has: one, or the bounds' nearest count. (An
    optional list of none is left out: no frame can tell it from an absent one.)"""
    count = max(array.min_items, 1)
    return count if array.max_items is None else min(count, array.max_items)


def _example(syntax: Syntax, plan: SlotPlan) -> str | None:
    """The example answer, or ``None``; :class:`SchemaError` (``max_prompt_chars``) when
    its values alone would pass the prompt's bound, found before any of it is written
    (a long example repeated as many items as ``minItems`` asks for)."""
    instance = example_instance(plan)
    if not instance:
        return None
    try:
        frames = []
        size = 0
        for frame in walk_instance(plan, instance):
            size += len(frame.text)
            if size > plan.limits.max_prompt_chars:
                raise limit_error(
                    "max_prompt_chars",
                    f"the prompt's example has more than {plan.limits.max_prompt_chars} characters",
                )
            frames.append(frame)
        return syntax.write(plan, frames)
    except (TypeError, ValueError):
        return None


def extract_example(text: str) -> str | None:
    """The example answer of a prompt (between the marker lines), if it has one."""
    begin = text.find(EXAMPLE_BEGIN + "\n")
    if begin < 0:
        return None
    start = begin + len(EXAMPLE_BEGIN) + 1
    return text[start : text.index(EXAMPLE_END, start)]


# -- prompts ------------------------------------------------------------------------------


def prompt(plan: SlotPlan, syntax: str | Syntax | None = None, *, grammar: bool = False) -> str:
    """The instructions for ``plan``: the frame format, the slots, and an example answer
    when the schema's own examples make one. ``grammar``: the request also sends the
    plan's grammar, so what it enforces is not repeated. :class:`SchemaError` when the
    prompt would pass the plan's ``max_prompt_chars`` (or a plan compiled with a
    ``max_expansion_depth`` above what the interpreter's stack holds nests too deeply)."""
    chosen = get_syntax(syntax)
    try:
        text = template(chosen.templates, "prompt.j2").render(
            syntax=chosen,
            grammar=grammar,
            title=_one_line(plan.title),
            description=_one_line(plan.description) if plan.description else None,
            fields=_facts(chosen, plan, layout(plan), grammar),
            quotes=any(chosen.quotes(slot) for slot in plan.slots),
            example=_example(chosen, plan),
            example_begin=EXAMPLE_BEGIN,
            example_end=EXAMPLE_END,
        )
    except RecursionError:
        raise limit_error(
            "max_expansion_depth", "the plan nests too deeply to write its prompt"
        ) from None
    return _bounded(plan, _finish(text))


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
    #: Asked for only in case the model meant to write it (an optional value the
    #: stream dropped before): the follow-up may leave it out.
    optional: bool = False


@dataclass(frozen=True)
class _RetryLine:
    ref: str
    optional: bool
    whole_list: bool
    #: A whole list of objects asked for again: the refs of an item's fields.
    fields: tuple[str, ...]
    path: str
    #: How the syntax names the list a whole list asked for belongs to.
    list_ref: str
    kind: str
    note: str
    reason: str
    rejected: str | None

    @property
    def asked(self) -> str:
        """How the follow-up's closing line names what to write again."""
        if self.fields:
            return self.list_ref or self.path
        return self.ref


def _retry_line(syntax: Syntax, plan: SlotPlan, item: RetryItem, grammar: bool) -> _RetryLine:
    slot, array = item.slot, item.slot.array
    whole_list = slot.repeatable and item.index is None
    fields: tuple[str, ...] = ()
    path = slot.display(None if whole_list else item.index)
    list_ref = syntax.list_ref(plan, array) if whole_list and array is not None else ""
    if whole_list and array is not None and array.items_are_objects:
        fields = tuple(
            _one_line(syntax.ref(plan, s))
            for s in plan.slots
            if s.array is not None and s.array.segments == array.segments
        )
        path = array.path
    return _RetryLine(
        ref=_one_line(syntax.ref(plan, slot, None if whole_list else item.index)),
        optional=item.optional,
        whole_list=whole_list,
        fields=fields,
        path=_one_line(path),
        list_ref=_one_line(list_ref),
        kind=_kind(slot, grammar),
        note=_note(slot),
        reason=_one_line(item.reason),
        rejected=None
        if item.rejected is None
        else json.dumps(item.rejected, ensure_ascii=False).translate(_JSON_LINE_BREAKS),
    )


def retry_prompt(
    plan: SlotPlan,
    requests: Sequence[RetryItem],
    accepted: Mapping[str, Any] | None = None,
    syntax: str | Syntax | None = None,
    *,
    grammar: bool = False,
) -> str:
    """The follow-up asking for ``requests`` again, with the accepted values as context."""
    chosen = get_syntax(syntax)
    return _finish(
        template(chosen.templates, "retry.j2").render(
            syntax=chosen,
            grammar=grammar,
            title=_one_line(plan.title),
            requests=[_retry_line(chosen, plan, item, grammar) for item in requests],
            accepted=_compact(accepted) if accepted else None,
        )
    )


def _bounded(plan: SlotPlan, text: str) -> str:
    bound = plan.limits.max_prompt_chars
    if len(text) > bound:
        raise limit_error("max_prompt_chars", f"the prompt has more than {bound} characters")
    return text


def _finish(text: str) -> str:
    return text.strip("\n") + "\n"


def retry_targets(requests: Iterable[RetryItem]) -> list[tuple[Slot, int | None, bool]]:
    """The grammar targets of a follow-up (:meth:`Syntax.grammar` ``only``)."""
    return [(r.slot, r.index, not r.optional) for r in requests]
