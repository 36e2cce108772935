"""Slot checks: values a reader would reject at a glance, caught when a slot closes.

A check is a pure function of the closing slot, its validated value and the state so
far (:data:`Check`), returning ``None`` or a :class:`CheckFailure` with a ``code`` and
a human ``reason`` that the follow-up request quotes. Checks run after the slot's
schema validation (:mod:`.validation`), on values that validated. The built-in ones,
by code (:data:`CHECK_CODES`), on the values of string fields (not enums, not dates:
two fields rightly share a date too often):

- ``repeat``: a text of two words or more equal (after
  :func:`~.text_rules.normalize_text`) or a near copy (token-F1 at least
  :data:`CROSS_FIELD_NEAR_COPY_F1`) of an earlier field's accepted value (a single word,
  an id or a version, rightly recurs in data); for an item of a list of strings, of
  another field's value or an item of another list (the title as a tag, a decision
  written again as an attendee). Fields of
  different items of a list of objects may share a value (two action items, one owner),
  and a short text (fewer than :data:`~.text_rules.NEAR_COPY_MIN_WORDS` words, a note in
  brackets not counted: :func:`~.text_rules.name_words`) that the input holds may be
  referred to twice (an owner who is also an attendee, ``Aiko Tanaka (design)``).
- ``list_repeat``: an item of a list of strings repeating (equal, or a near copy by the
  benchmark's rule, :func:`~.text_rules.is_near_copy`) an earlier item of that list;
  and an item of a list of objects
  whose first field (the one that opens the item: ``- task: …`` in syntax v4) repeats
  that field of an earlier item of the list, for a text of at least
  :data:`~.text_rules.NEAR_COPY_MIN_WORDS` words (shorter ones, names and ids, rightly
  recur: two action items, one owner).
- ``placeholder``: a bare small number or a bracketed placeholder (``1``, ``[5]``,
  ``[Triage]``); in a text field a bare number the input states as a whole number is an
  answer (not the ``1`` of "1.5 kg" or "€1,188.00"), in a list of texts it is not (a tag
  ``3`` copies a quantity of the input or counts the items).
- ``schema_copy``: a copy of the schema's own words: the form's title or the model's
  class name (``supporttriage``), a field's title or description (or a near copy of
  one), an ``examples`` value, or a name a description gives as an example
  (``e.g. 'Léa Martin'``; a lowercase one such as ``'billing team'`` is vocabulary the
  answer may use), a field's name with an index, as the follow-up names the fields
  it asks for (``owner[1]``, ``description[0] was not taken``), or a note the form
  writes after a placeholder (``Friday (optional) (may be``:
  :data:`~.value_rules.FORM_NOTE`); unless that text is in the input messages (for an
  example: unless one of its words begins a word of the input).
- ``quoted``: wrapped in quotes it did not need (``"Ada"``).
- ``digit_run``: a run of numbers and separators (``1,3,2,1,1,2,…``).

Fields with a ``pattern`` or ``format`` define their own shape: only ``repeat``,
``list_repeat`` and ``schema_copy`` apply to them. Enum, boolean and number fields are never checked by
the built-ins.

Configuration (:class:`CheckSettings`): per run, ``checks`` is ``"all"``, ``"none"``,
or a list of codes and custom :data:`Check` callables; per field, the schema keywords
``x-slotflight-checks`` (a list of codes, or ``false`` for none) and
``x-slotflight-allow-repeat: true`` (no ``repeat``/``list_repeat``), on the field's
schema or, for a list, on the list's (Pydantic: ``json_schema_extra``).

What a failure does (:meth:`SlotChecker.judge`):

- An item of a list of scalars is dropped (the list keeps its distinct items); after a
  ``list_repeat`` the rest of the list is not read in this pass. An item repeating
  another field (``repeat``) is kept and flagged instead under ``on_failure="accept"``
  (real data repeats so too, and an item is not asked for again on its own). A list left shorter
  than its ``minItems`` is asked for again as a whole. A ``list_repeat`` of a list of
  objects drops the repeating item likewise and stops the list.
- Any other value fails its slot and is asked for again by the regenerator. A retry
  that writes the same value again is accepted, with a ``check_confirmed`` diagnostic,
  when the input holds that value (a shipping address rightly equal to the billing
  one stays writable); when it does not, the value is settled at once, as below (a
  small model writes its own text again, right or not).
- When the failures are settled: with ``on_failure="accept"`` (the default) on the
  second attempt (:data:`ACCEPT_SETTLES_ON`: a rejected value is asked for again once),
  the value is kept and *flagged* (a repeating list item too: the list goes on, so that
  it can reach its ``minItems``), and a required field that the retry left without an
  acceptable value keeps the value rejected before, flagged; with ``"error"`` on the
  last attempt, an optional field is left out (``check_left_out`` diagnostic) and a
  required one fails, its error naming the values tried.
- What was tried and held is kept per field and item; an item of a list of objects
  taken out (every field failed) takes it along when the next item takes its position
  (:meth:`SlotChecker.move_items`), so a value is "written again" only by the item
  that wrote it, and a held value is kept only for that item.

Complexity: each check is O(value) at slot close (the near-copy search reads at most
:data:`MAX_NEAR_COPY_TEXTS` candidates per word), and accepting a value adds it to
small per-run indexes in O(value); the state is never re-scanned.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any, Final, Literal, TypeAlias

from .._errors import ErrorDetail
from .._jsonable import dumps
from ..plan.model import Slot, SlotPlan
from .results import Key, SlotResults, move_item_records
from .text_rules import (
    NEAR_COPY_MIN_WORDS,
    is_digit_run,
    name_words,
    needless_quotes,
    word_tokens,
)
from .value_rules import (
    CROSS_FIELD_NEAR_COPY_F1,
    MAX_DEPTH,
    MAX_INPUT_NEEDLE,
    MAX_ITEMS,
    MAX_NEAR_COPY_TEXTS,
    InputText,
    SchemaWords,
    TextIndex,
    is_unstated_placeholder,
    schema_nodes,
)

__all__ = [
    "ACCEPT_SETTLES_ON",
    "CHECK_CODES",
    "CROSS_FIELD_NEAR_COPY_F1",
    "MAX_DEPTH",
    "MAX_INPUT_NEEDLE",
    "MAX_ITEMS",
    "MAX_NEAR_COPY_TEXTS",
    "Check",
    "CheckFailure",
    "CheckSettings",
    "CheckState",
    "ChecksOption",
    "Held",
    "Judgement",
    "OnCheckFailure",
    "SlotChecker",
    "item_openers",
    "schema_nodes",
]

#: With ``on_failure="accept"``, the attempt on which check failures are settled (kept,
#: flagged) when ``max_attempts`` allows it: a rejected value is asked for again once.
#: A value that fails its checks twice is rarely right on a third attempt, which costs a
#: whole request; measured in ``docs/bench.md``. A schema failure is still asked for up
#: to ``max_attempts`` times.
ACCEPT_SETTLES_ON: Final = 2

CHECK_CODES: Final = ("placeholder", "quoted", "digit_run", "schema_copy", "list_repeat", "repeat")
"""The built-in checks' codes, in the order they run (``checks="all"`` runs them all)."""
#: Values tried per field remembered for the final error.
_MAX_TRIED: Final = 5
_MAX_SHOWN: Final = 80
_REPEAT_CODES: Final = frozenset({"repeat", "list_repeat"})
#: Codes that also apply to fields with a ``pattern`` or ``format``.
_SHAPED_CODES: Final = frozenset({"repeat", "list_repeat", "schema_copy"})


@dataclass(frozen=True)
class CheckFailure:
    """Why a check rejected a value: a ``code`` and a ``reason`` the follow-up quotes
    (written to complete "the value …": ``repeats the value of title``)."""

    code: str
    reason: str

    def to_json(self) -> dict[str, str]:
        return {"code": self.code, "reason": self.reason}


class CheckState:
    """What the checks know of the run so far, for built-in and custom checks.

    Read it through its methods; each is O(the text asked about), never O(state).
    """

    __slots__ = ("_accepted", "_input", "_schema", "_texts", "item_openers")

    def __init__(self, plan: SlotPlan, results: SlotResults, input_text: str) -> None:
        self._accepted = results.accepted
        #: The first field (in plan order) of each list of objects' items, by slot id.
        self.item_openers: frozenset[int] = item_openers(plan)
        self._input = InputText(input_text)
        self._texts = TextIndex()
        model = plan.model
        self._schema = SchemaWords(plan.schema, None if model is None else model.__name__)

    @property
    def accepted(self) -> Mapping[Key, tuple[str, Any]]:
        """Accepted values by key ``(slot id, position)``: ``(pointer, value)``."""
        return MappingProxyType(self._accepted)

    @property
    def input(self) -> InputText:
        """The input messages' text."""
        return self._input

    def in_input(self, text: str) -> bool:
        """Whether ``text`` (normalized) is in the input messages, at word bounds.
        Texts longer than :data:`MAX_INPUT_NEEDLE` characters are not looked for (the
        search is O(input · text))."""
        return self._input.contains(text)

    def repeated_by(
        self, slot: Slot, text: str, *, same_field: bool = False, other_field: bool = False
    ) -> tuple[Slot, str] | None:
        """An earlier accepted text value that ``text`` repeats (equal or a near copy):
        for an item of a list of scalars, an earlier item of the same list (with
        ``other_field``: another field's value, items of other lists included); for any
        other field, another field's value; ``same_field``: the same field of an
        earlier item of the same list of objects. Its slot and field."""
        same_list = _is_list_item(slot) and not other_field
        for entry, score in self._texts.matches(text):
            other, key, value, shown = entry
            if self._accepted.get(key, (None, None))[1] is not value:
                continue  # taken back since (a retry, or the whole-object check)
            if same_list or same_field:
                if other.id == slot.id:
                    return other, shown
            elif other.id != slot.id and score >= CROSS_FIELD_NEAR_COPY_F1:
                return other, shown
        return None

    def shares_words_with_input(self, text: str) -> bool:
        """Whether a word of ``text`` (of three letters or more) begins a word of the
        input (``refund`` in "refunded"). The input's word stems are gathered once."""
        return self._input.shares_words(text)

    def schema_words(self, text: str) -> str | None:
        """What part of the schema ``text`` copies (``the form's title`` …), if any,
        unless the input holds it (:meth:`SchemaWords.copied_by`)."""
        return self._schema.copied_by(text, self._input)

    def record(self, slot: Slot, key: Key, value: str, shown: str) -> None:
        """An accepted text value: later values are compared with it."""
        self._texts.add(value, (slot, key, value, shown))


Check: TypeAlias = Callable[[Slot, Any, CheckState], CheckFailure | None]
"""A custom check: called with the closing slot, its value and the run's
:class:`CheckState`; returns a :class:`CheckFailure` to reject the value, ``None`` to
accept it."""
ChecksOption: TypeAlias = Literal["all", "none"] | Sequence[str | Check]
"""The ``checks=`` option: ``"all"`` (the default), ``"none"``, or a list of built-in
codes and custom :data:`Check` callables."""
OnCheckFailure: TypeAlias = Literal["error", "accept"]
"""The ``on_check_failure=`` option: ``"accept"`` (the default) keeps a value that still
fails its checks on its retry, flagged; ``"error"`` leaves an optional field out and
ends the run on a required one when it fails at the last attempt."""


@dataclass(frozen=True)
class CheckSettings:
    """The slot checks of one run (see the module docs).

    ``input_text``: the text of the input messages (a schema's words found there are
    not copies). ``max_attempts``: the run's last attempt (:attr:`settles_on` is the
    one on which check failures are settled).
    """

    checks: ChecksOption = "all"
    on_failure: OnCheckFailure = "accept"
    input_text: str = ""
    max_attempts: int = 3

    def __post_init__(self) -> None:
        validate_checks(self.checks)
        validate_on_check_failure(self.on_failure)

    @property
    def enabled(self) -> bool:
        return self.checks != "none"

    @property
    def settles_on(self) -> int:
        """The attempt on which check failures are settled: the second
        (:data:`ACCEPT_SETTLES_ON`) or the last, if earlier, with ``"accept"``; the
        last with ``"error"``, where a value that still fails costs the field."""
        if self.on_failure == "accept":
            return min(self.max_attempts, ACCEPT_SETTLES_ON)
        return self.max_attempts


def validate_on_check_failure(value: object) -> None:
    """Raise ``ValueError`` for an ``on_check_failure=`` value that is not valid."""
    if value not in ("error", "accept"):
        raise ValueError(f"on_check_failure must be 'error' or 'accept', got {value!r}")


def validate_checks(checks: object) -> None:
    """Raise ``ValueError``/``TypeError`` for a ``checks=`` value that is not valid."""
    if checks in ("all", "none"):
        return
    if isinstance(checks, str | bytes) or not isinstance(checks, Sequence):
        raise TypeError("checks must be 'all', 'none' or a list of check codes and callables")
    for item in checks:
        if isinstance(item, str):
            if item not in CHECK_CODES:
                raise ValueError(f"unknown check {item!r}; known: {', '.join(CHECK_CODES)}")
        elif not callable(item):
            raise TypeError(f"a check must be a code or a callable, got {item!r}")
        elif inspect.iscoroutinefunction(item) or inspect.iscoroutinefunction(
            type(item).__call__  # an object whose __call__ is async
        ):
            raise TypeError(
                f"a check is called when its value closes and must return at once: "
                f"{item!r} is a coroutine function"
            )


@dataclass(frozen=True)
class Held:
    """A required value a check rejected, with where it went: what the attempt that
    settles check failures keeps, flagged, when it writes no acceptable value for the
    field."""

    slot: Slot
    display: str
    pointer: str
    index: int | None
    value: Any
    detail: ErrorDetail


@dataclass(frozen=True)
class Judgement:
    """What to do with a value that failed a check.

    ``action``: ``retry`` (the slot fails and is asked for again), ``drop`` (a list
    item is left out, the list goes on), ``stop`` (a list item is left out and the rest
    of the list is not read in this pass), ``leave_out`` (an optional field, on the last
    attempt), ``fail`` (a required field, on the last attempt), ``flag`` (kept, flagged:
    with ``"accept"``, from the attempt that settles check failures on),
    ``confirm`` (kept: the same value, which the input holds, was written again after a
    rejection).
    ``message``: the reason with the values tried, for an error.
    """

    action: Literal["retry", "drop", "stop", "leave_out", "fail", "flag", "confirm"]
    failure: CheckFailure
    message: str = ""

    @property
    def keeps(self) -> bool:
        """Whether the value is accepted anyway."""
        return self.action in ("flag", "confirm")


class SlotChecker:
    """Runs the checks of one run and keeps what they need (see the module docs)."""

    __slots__ = ("_checks", "_held", "_settings", "_tried", "state")

    def __init__(self, plan: SlotPlan, results: SlotResults, settings: CheckSettings) -> None:
        self._settings = settings
        self.state = CheckState(plan, results, settings.input_text)
        self._checks: dict[int, tuple[Check, ...]] = {
            slot.id: _slot_checks(slot, settings.checks) for slot in plan.slots
        }
        self._tried: dict[Key, list[str]] = {}
        self._held: dict[Key, Held] = {}

    def hold(self, key: Key, held: Held) -> None:
        """A required value a check rejected for a retry: the one kept, flagged, if no
        later attempt writes an acceptable one (:meth:`held_to_keep`)."""
        if held.slot.required:
            self._held[key] = held

    def move_items(self, fields: Sequence[Slot], moves: Sequence[tuple[int, int]]) -> None:
        """Items of a list of objects moved (``(from, to)`` positions, as
        :meth:`~.results.DroppedItems.placed` moves their failures): the values tried
        and held for their ``fields`` move with them, so that they never attach to the
        item that took a position. All are taken before any is put back (a swap).
        O(fields · moves)."""
        move_item_records(self._tried, fields, moves)
        move_item_records(self._held, fields, moves, _held_at)

    def held_to_keep(self, attempt: int) -> list[tuple[Key, Held]]:
        """On the attempt that settles check failures (:attr:`CheckSettings.settles_on`)
        and later, with ``on_failure="accept"``: the rejected values held for keys, to
        be kept flagged where the attempt left the field without a value."""
        settings = self._settings
        if attempt < settings.settles_on or settings.on_failure != "accept":
            return []
        return list(self._held.items())

    def judge(self, slot: Slot, key: Key, value: Any, attempt: int) -> Judgement | None:
        """Run the slot's checks on ``value``: ``None`` when it passes (it is then
        recorded), else what to do. Never raises: a custom check that raises fails
        the value with code ``check_error``."""
        failure = self._first_failure(slot, value)
        if failure is None:
            return None
        settings = self._settings
        final = attempt >= settings.settles_on
        array = slot.array
        keep = final and settings.on_failure == "accept"
        if array is not None and failure.code == "list_repeat":
            # kept once settled: a list cut short of its minItems fails the object
            return Judgement("flag" if keep else "stop", failure)
        if _is_list_item(slot):
            if failure.code == "repeat" and settings.on_failure == "accept":
                # Another field's value: real data repeats so too (two probes, one
                # command), and an item is not asked for again: kept, flagged.
                return Judgement("flag", failure)
            return Judgement("flag" if keep else "drop", failure)
        written = _shown(value)
        tried = self._tried.setdefault(key, [])
        if written in tried:
            if isinstance(value, str) and self.state.in_input(value):
                return Judgement("confirm", failure)
            # Written again, and the input does not bear it out: settled at once (a
            # small model writes its own text again, right or not).
            final = True
        elif len(tried) < _MAX_TRIED:
            tried.append(written)
        if not final:
            return Judgement("retry", failure)
        if settings.on_failure == "accept":
            return Judgement("flag", failure)
        if not slot.required:
            return Judgement("leave_out", failure)
        values = ", ".join(repr(t) for t in tried)
        return Judgement("fail", failure, f"{failure.reason} (values tried: {values})")

    def accept(self, slot: Slot, key: Key, value: Any, shown: str) -> None:
        """An accepted value: recorded for the repeat checks (text only)."""
        self._held.pop(key, None)
        if isinstance(value, str) and slot.kind == "string" and not slot.enum and value.strip():
            self.state.record(slot, key, value, shown)

    def _first_failure(self, slot: Slot, value: Any) -> CheckFailure | None:
        for check in self._checks.get(slot.id, ()):
            try:
                failure = check(slot, value, self.state)
            except Exception as exc:  # a custom check's fault fails the value, never the run
                return CheckFailure("check_error", f"could not be checked ({type(exc).__name__})")
            if isinstance(failure, CheckFailure):
                return failure
            if failure is not None:  # not what a check returns: its fault, as above
                if inspect.iscoroutine(failure):
                    failure.close()  # never awaited: closed, so not reported as leaked
                return CheckFailure(
                    "check_error",
                    f"could not be checked (the check returned {type(failure).__name__})",
                )
        return None


def _held_at(held: Held, slot: Slot, index: int) -> Held:
    """``held`` for ``slot``'s item now at ``index``."""
    pointer, display = slot.concrete_pointer(index), slot.display(index)
    detail = replace(held.detail, location=pointer, slot=display)
    return replace(held, pointer=pointer, display=display, index=index, detail=detail)


def _shown(value: Any) -> str:
    text = value if isinstance(value, str) else dumps(value)
    return text if len(text) <= _MAX_SHOWN else text[:_MAX_SHOWN] + "…"


# --------------------------------------------------------------------------- the checks


def _is_list_item(slot: Slot) -> bool:
    """Whether ``slot`` is an item of a list of scalars (``tags[]``), not a field."""
    return slot.array is not None and not slot.array.items_are_objects


def _text_of(slot: Slot, value: Any) -> str | None:
    """The value when it is a non-blank string of a free string field."""
    if slot.kind != "string" or slot.enum or not isinstance(value, str) or not value.strip():
        return None
    return value


def check_placeholder(slot: Slot, value: Any, state: CheckState) -> CheckFailure | None:
    """``placeholder``: a bare small number or a bracketed placeholder."""
    text = _text_of(slot, value)
    if text is not None and is_unstated_placeholder(text, state.input, item=_is_list_item(slot)):
        return CheckFailure(
            "placeholder", "is a placeholder (a bare number or a word in brackets), not a value"
        )
    return None


def check_quoted(slot: Slot, value: Any, state: CheckState) -> CheckFailure | None:
    """``quoted``: wrapped in quotes it did not need."""
    text = _text_of(slot, value)
    if text is not None and needless_quotes(text):
        return CheckFailure("quoted", "is wrapped in quotes; write the text without them")
    return None


def check_digit_run(slot: Slot, value: Any, state: CheckState) -> CheckFailure | None:
    """``digit_run``: a run of numbers and separators in a text field."""
    text = _text_of(slot, value)
    if text is not None and is_digit_run(text):
        return CheckFailure("digit_run", "is a run of numbers, not text")
    return None


def check_schema_copy(slot: Slot, value: Any, state: CheckState) -> CheckFailure | None:
    """``schema_copy``: the schema's own words, unless they are in the input."""
    text = _text_of(slot, value)
    if text is None:
        return None
    what = state.schema_words(text)
    if what is None:
        return None
    return CheckFailure("schema_copy", f"copies {what} instead of a value taken from the input")


def check_repeat(slot: Slot, value: Any, state: CheckState) -> CheckFailure | None:
    """``repeat``: repeats another field's value (an item of a list of scalars too;
    its own list's earlier items: see ``list_repeat``)."""
    return _repeat(slot, value, state, "repeat", other_field=True)


def check_list_repeat(slot: Slot, value: Any, state: CheckState) -> CheckFailure | None:
    """``list_repeat``: an item of a list of strings repeats an earlier item of it, or
    an item of a list of objects opens with the text an earlier item opened with."""
    if slot.array is None:
        return None
    if not slot.array.items_are_objects:
        return _repeat(slot, value, state, "list_repeat")
    if slot.id not in state.item_openers or not isinstance(value, str):
        return None
    if len(word_tokens(value)) < NEAR_COPY_MIN_WORDS:
        return None  # a name or an id rightly opens two items
    return _repeat(slot, value, state, "list_repeat", same_field=True)


def _repeat(
    slot: Slot,
    value: Any,
    state: CheckState,
    code: str,
    *,
    same_field: bool = False,
    other_field: bool = False,
) -> CheckFailure | None:
    if slot.kind != "string" or slot.enum or not isinstance(value, str) or not value.strip():
        return None
    found = state.repeated_by(slot, value, same_field=same_field, other_field=other_field)
    if found is None:
        return None
    other, shown = found
    if other.id != slot.id:
        if len(value.split()) < 2:
            return None  # one word (an id, a version, a status) rightly recurs in data
        if len(name_words(value)) < NEAR_COPY_MIN_WORDS and state.in_input(value):
            return None  # a short name the input gives, referred to twice (an owner)
    if other.id == slot.id:
        return CheckFailure(code, f"repeats an earlier item of {other.path.removesuffix('[]')}")
    return CheckFailure(code, f"repeats the value of {shown}")


_BUILT_IN: Final[Mapping[str, Check]] = {
    "placeholder": check_placeholder,
    "quoted": check_quoted,
    "digit_run": check_digit_run,
    "schema_copy": check_schema_copy,
    "list_repeat": check_list_repeat,
    "repeat": check_repeat,
}


def _slot_checks(slot: Slot, checks: ChecksOption) -> tuple[Check, ...]:
    """The checks that run on ``slot``: the run's choice, narrowed by the field's
    ``x-slotflight-*`` keywords and its shape."""
    if checks == "none":
        return ()
    chosen: list[str | Check] = list(CHECK_CODES) if checks == "all" else list(checks)
    extensions: dict[str, Any] = {}
    if slot.array is not None:
        extensions.update(slot.array.extensions)
    extensions.update({k: v for k, v in slot.schema.items() if str(k).startswith("x-slotflight")})
    only = extensions.get("x-slotflight-checks")
    if only is False:
        return ()
    if isinstance(only, list):
        chosen = [c for c in chosen if not isinstance(c, str) or c in only]
    if extensions.get("x-slotflight-allow-repeat") is True:
        chosen = [c for c in chosen if not isinstance(c, str) or c not in _REPEAT_CODES]
    shaped = any(k in slot.schema for k in ("pattern", "format"))
    if shaped:
        chosen = [c for c in chosen if not isinstance(c, str) or c in _SHAPED_CODES]
    return tuple(_BUILT_IN[c] if isinstance(c, str) else c for c in chosen)


def item_openers(plan: SlotPlan) -> frozenset[int]:
    """The slot id of the first field, in plan order, of each list of objects' items."""
    first: dict[tuple[object, ...], int] = {}
    for slot in plan.slots:
        array = slot.array
        if array is not None and array.items_are_objects:
            first.setdefault(array.segments, slot.id)
    return frozenset(first.values())
