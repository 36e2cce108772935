"""The syntax contract, checked for every registered syntax (``slotflight.syntax.SYNTAXES``).

A syntax registered there gets this whole suite:

- what :meth:`Syntax.write` writes reads back through the real :class:`Assembler` to the
  same values, under any chunking (whole, characters, single bytes, random splits, splits
  inside UTF-8 characters, CRLF line ends split between ``\\r`` and ``\\n``);
- the writer streams: the frames of a prefix of an answer write a prefix of its text;
- the grammar admits what the writer writes (llama.cpp's own grammar engine decides),
  the default and the compact grammar; a follow-up grammar admits its targets' frames and
  rejects any other slot's frame;
- the prompt's example answer parses, and the prompt names every slot by
  :meth:`Syntax.ref`;
- the conformance vectors of ``tests/conformance/<syntax>/`` hold.

Faults every syntax must survive are in ``test_faults.py``; what is special to one
syntax is in its own file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field

from slotflight.assemble.assembler import Assembler
from slotflight.bench.models import SCHEMAS
from slotflight.plan.compiler import compile as compile_schema
from slotflight.plan.instance import FrameValue, walk_instance
from slotflight.plan.model import SlotPlan
from slotflight.prompting.prompt import (
    RetryItem,
    example_instance,
    extract_example,
    prompt,
    retry_prompt,
    retry_targets,
)
from slotflight.syntax import get_syntax, grammar, render_frames
from slotflight.syntax.base import Open
from slotflight.syntax.gbnf import UNBOUNDED_ITEMS, literal
from slotflight.syntax.lines import LineSyntax
from tests.assembler_support import SYNTAXES, drive, split_at, written
from tests.conformance.make_vectors import cases_for, run_vector
from tests.golden_models import GOLDEN_MODELS, TicketTriage
from tests.grammar_support import (
    PLAN_DATA,
    GrammarEngine,
    Place,
    Plan,
    Step,
    plan_text,
)
from tests.strategies import (
    Case,
    ListSpec,
    ModelSpec,
    TypeSpec,
    model_and_instance,
    model_with_examples,
    writes_every_item,
)

ROOT = Path(__file__).parent.parent.parent
VECTORS = Path(__file__).parent.parent / "conformance"


# -- written frames read back -------------------------------------------------------------


def _has_leaf(spec: TypeSpec, value: Any, in_item: bool) -> bool:
    """Whether ``value`` gets at least one frame: a null object, an object with no field
    set, and a null or empty list outside array items (no item frame), get none."""
    if isinstance(spec, ModelSpec):
        if value is None:
            return False
        return any(
            _has_leaf(f.type, value[f.name], in_item) for f in spec.fields if f.name in value
        )
    if isinstance(spec, ListSpec) and not in_item:
        return bool(value)
    return True


def expressible(spec: ModelSpec, value: dict[str, Any], *, in_item: bool = False) -> dict[str, Any]:
    """``value`` as frames can carry it: an optional field that gets no frame is absent
    (it takes its default); a required object that gets none is ``{}``."""
    out: dict[str, Any] = {}
    for f in spec.fields:
        if f.name not in value:
            continue
        v = value[f.name]
        if (
            f.optional
            and isinstance(f.type, ModelSpec | ListSpec)
            and not _has_leaf(f.type, v, in_item)
        ):
            continue
        if isinstance(f.type, ModelSpec) and isinstance(v, dict):
            out[f.name] = expressible(f.type, v, in_item=in_item)
        elif isinstance(f.type, ListSpec) and isinstance(f.type.item, ModelSpec) and not in_item:
            item = f.type.item
            out[f.name] = None if v is None else [expressible(item, x, in_item=True) for x in v]
        else:
            out[f.name] = v
    return out


CHUNKINGS = ["whole", "chars", "bytes1", "random", "inside-utf8", "crlf"]


def _chunks(text: str, mode: str, data: st.DataObject) -> list[Any]:
    encoded = text.encode("utf-8")
    if mode == "whole":
        return [text]
    if mode == "chars":
        return list(text)
    if mode == "bytes1":
        return [encoded[i : i + 1] for i in range(len(encoded))]
    if mode == "random":
        return split_at(encoded, data.draw(st.lists(st.integers(0, len(encoded)), max_size=20)))
    if mode == "inside-utf8":
        # a cut after the first byte of every character that has more than one
        inside = [i + 1 for i, b in enumerate(encoded) if b >= 0xC0]
        return split_at(encoded, inside)
    crlf = text.replace("\n", "\r\n").encode("utf-8")
    between = [i + 1 for i in range(len(crlf)) if crlf[i : i + 1] == b"\r"]
    return split_at(crlf, between + data.draw(st.lists(st.integers(0, len(crlf)), max_size=5)))


@pytest.mark.parametrize("syntax", SYNTAXES)
@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(case=model_and_instance(), data=st.data())
def test_written_frames_read_back_under_any_chunking(
    syntax: str, case: Case, data: st.DataObject
) -> None:
    assume(writes_every_item(case.spec, case.instance))
    plan = compile_schema(case.model)
    text = render_frames(plan, case.instance, syntax)
    whole = drive([text], plan, syntax=syntax, check=False)
    asm = whole.asm
    assert asm is not None
    assert asm.outcome.ok, (text, asm.outcome.errors)
    assert asm.result == case.model.model_validate(expressible(case.spec, case.instance))
    chunks = _chunks(text, data.draw(st.sampled_from(CHUNKINGS)), data)
    run = drive(chunks, plan, syntax=syntax, check=len(chunks) <= 300)
    assert run.non_delta() == whole.non_delta()
    assert run.deltas() == whole.deltas()
    assert run.final == whole.final


@pytest.mark.parametrize("syntax", SYNTAXES)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=model_and_instance())
def test_the_frames_of_a_prefix_write_a_prefix_of_the_text(syntax: str, case: Case) -> None:
    assume(writes_every_item(case.spec, case.instance))  # an empty item cannot be written
    """The writer streams: an answer can be cut between frames (and continued) by
    writing a prefix of its frames, which the syntax-neutral test helpers rely on."""
    plan = compile_schema(case.model)
    frames = list(walk_instance(plan, case.instance))
    text = get_syntax(syntax).write(plan, frames)
    for k in range(len(frames) + 1):
        assert text.startswith(written(plan, frames[:k], syntax)), k


def test_every_syntax_is_registered_under_its_name_with_its_templates() -> None:
    from slotflight.prompting.templates import prompts_dir
    from slotflight.syntax import SYNTAXES as REGISTERED

    for name, syntax in REGISTERED.items():
        assert syntax.name == name and get_syntax(name) is syntax and get_syntax(syntax) is syntax
        assert (prompts_dir() / syntax.templates / "prompt.j2").is_file()
        assert (prompts_dir() / syntax.templates / "retry.j2").is_file()
        assert syntax.summary
    with pytest.raises(ValueError, match="syntax"):
        get_syntax("v9")


# -- the grammar ---------------------------------------------------------------------------

MODELS: list[type[BaseModel]] = [Plan, Step, Place, *GOLDEN_MODELS.values(), *SCHEMAS.values()]


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_every_grammar_loads(engine: GrammarEngine, syntax: str) -> None:
    for model in MODELS:
        plan = compile_schema(model)
        for compact in (None, 40):
            text = grammar(plan, syntax, max_string_chars=compact)
            assert engine.loads(text), text
    assert engine.loads(grammar(compile_schema({"type": "object", "properties": {}}), syntax))
    assert not engine.loads("root ::= undefined-rule")


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_grammar_admits_the_benchmark_instances(engine: GrammarEngine, syntax: str) -> None:
    path = ROOT / "benchmarks" / "instances.jsonl"
    for line in path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        plan = compile_schema(SCHEMAS[row["schema"]])
        text = render_frames(plan, row["output"], syntax)
        assert engine.accepts(grammar(plan, syntax), text), row["task"]


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_grammar_admits_every_kind_and_leaves_out_what_may_be_left_out(
    engine: GrammarEngine, syntax: str
) -> None:
    g = grammar(compile_schema(Plan), syntax)
    assert engine.accepts(g, plan_text(syntax))
    assert engine.accepts(g, plan_text(syntax, place=None, ref=None, steps=[], at=None))
    minimal = {"summary": "s", "priority": 5, "delta": 0, "ratio": 1e-05, "urgent": False}
    minimal |= {"mood": "calm", "tags": ["a", "b", "c"], "steps": []}
    assert engine.accepts(g, render_frames(compile_schema(Plan), minimal, syntax))
    # nothing but the frames: no chatter after them, no answer cut short
    text = plan_text(syntax)
    assert not engine.accepts(g, text + "Done!\n")
    assert not engine.accepts(g, text[: len(text) // 2])
    assert not engine.accepts(g, plan_text(syntax, tags=["a", "b", "c", "d"]))


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_compact_grammar_bounds_strings_to_one_line(engine: GrammarEngine, syntax: str) -> None:
    plan = compile_schema(Plan)
    g = grammar(plan, syntax, max_string_chars=20)
    one_line = {**PLAN_DATA, "summary": "Export fails"}
    assert engine.accepts(g, render_frames(plan, one_line, syntax))
    assert engine.accepts(g, render_frames(plan, {**one_line, "summary": "x" * 20}, syntax))
    for summary in ("x" * 21, ""):
        assert not engine.accepts(g, render_frames(plan, {**one_line, "summary": summary}, syntax))
    # a value written over more than one line (a quoted syntax writes "\n" on one line)
    lines = render_frames(plan, one_line, syntax).count("\n")
    two = render_frames(plan, {**one_line, "summary": "two\nlines"}, syntax)
    assert engine.accepts(g, two) == (two.count("\n") == lines)
    # the default grammar admits all of them
    assert engine.accepts(grammar(plan, syntax), render_frames(plan, PLAN_DATA, syntax))


def _no_empty_string(plan: Any, instance: Any) -> bool:
    """Whether no frame of ``instance`` is an empty string (a grammar admits none)."""
    return all(f.value != "" for f in walk_instance(plan, instance))


@pytest.mark.parametrize("syntax", SYNTAXES)
@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(case=model_and_instance())
def test_grammar_admits_written_random_instances(
    engine: GrammarEngine, syntax: str, case: Case
) -> None:
    assume(writes_every_item(case.spec, case.instance))
    plan = compile_schema(case.model)
    assume(_no_empty_string(plan, case.instance))
    text = render_frames(plan, case.instance, syntax)
    assert engine.accepts(grammar(plan, syntax), text)
    # the compact grammar admits it too when every string is one line of a few characters
    strings = [
        f.value
        for f in walk_instance(plan, case.instance)
        if f.slot.kind == "string" and isinstance(f.value, str)
    ]
    if all(s and "\n" not in s for s in strings):
        assert engine.accepts(grammar(plan, syntax, max_string_chars=200), text), text


class Note(BaseModel):
    title: Annotated[str, Field(max_length=30)]
    body: str
    labels: list[Annotated[str, Field(max_length=12)]]
    data: dict[str, Any] = {}


NOTE = {"title": "Export", "body": "fails", "labels": ["bug"], "data": {"k": "v"}}


@pytest.mark.parametrize("syntax", SYNTAXES)
@pytest.mark.parametrize("compact", [None, 40])
def test_reading_under_the_grammar_relies_only_on_what_it_rules_out(
    engine: GrammarEngine, syntax: str, compact: int | None
) -> None:
    """Every text the grammar admits reads the same whether or not the assembler is told
    the output follows the grammar (``Assembler(grammar=True)``), under any chunking;
    a value written over two lines where the grammar keeps it to one is refused by the
    grammar, so the assembler never needs the ``|`` line it no longer waits for."""
    plan = compile_schema(Note)
    g = grammar(plan, syntax, max_string_chars=compact)
    one_line = {"title", "labels"} | ({"body"} if compact else set())
    # a JSON string writes "\n" as an escape
    quoted = {s.segments[0] for s in plan.slots if get_syntax(syntax).quotes(s)}
    for field in ("title", "body", "labels", None):
        value = "two\nlines" if field != "labels" else ["two\nlines"]
        data = NOTE if field is None else {**NOTE, field: value}
        text = render_frames(plan, data, syntax)
        admitted = engine.accepts(g, text)
        assert admitted == (field is None or field in quoted or field not in one_line), (
            field,
            text,
        )
        if not admitted:
            continue
        plain = drive([text], plan, syntax=syntax)
        assert plain.final == data
        for chunks in ([text], list(text), split_at(text.encode(), range(0, len(text), 3))):
            run = drive(chunks, plan, syntax=syntax, grammar=True, grammar_max_string_chars=compact)
            assert run.non_delta() == plain.non_delta()
            assert run.final == plain.final


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_unbounded_arrays_are_capped_and_min_items_spelled_out(
    engine: GrammarEngine, syntax: str
) -> None:
    class Bag(BaseModel):
        words: list[str]
        numbers: Annotated[list[int], Field(min_length=UNBOUNDED_ITEMS + 2)]

    plan = compile_schema(Bag)
    g = grammar(plan, syntax)
    least = list(range(UNBOUNDED_ITEMS + 2))

    def text(words: int, numbers: list[int]) -> str:
        return render_frames(plan, {"words": ["w"] * words, "numbers": numbers}, syntax)

    assert engine.accepts(g, text(UNBOUNDED_ITEMS, least))
    assert engine.accepts(g, text(0, least))
    assert not engine.accepts(g, text(UNBOUNDED_ITEMS + 1, least))
    assert not engine.accepts(g, text(1, least[:-1]))


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_enum_values_are_spelled_out_escaped(engine: GrammarEngine, syntax: str) -> None:
    # (a value over two lines, or one that starts like a tag, cannot be written in
    # every syntax: see the per-syntax tests)
    values: list[Any] = ['say "hi"', "back\\slash", "a|b", "end", "1 x", 3, True]
    schema = {"type": "object", "properties": {"q": {"enum": values}}, "required": ["q"]}
    plan = compile_schema(schema)
    g = grammar(plan, syntax)
    for value in values:
        text = render_frames(plan, {"q": value}, syntax)
        assert engine.accepts(g, text), value
        asm = Assembler(plan, syntax=syntax)
        asm.feed(text)
        asm.close()
        assert asm.outcome.ok and asm.state == {"q": value}, (value, asm.outcome.errors)
    written = render_frames(plan, {"q": 3}, syntax)  # the writer refuses a value outside the enum
    assert not engine.accepts(g, written.replace("3", "say hi", 1))
    assert literal('a"b\\c\n\x01') == '"a\\"b\\\\c\\n\\x01"'


def test_an_unknown_syntax_is_refused_everywhere() -> None:
    plan = compile_schema(Plan)
    for call in (
        lambda: grammar(plan, "v9"),
        lambda: render_frames(plan, {}, "v9"),
        lambda: prompt(plan, "v9"),
        lambda: Assembler(plan, syntax="v9"),
    ):
        with pytest.raises(ValueError, match="syntax"):
            call()


def _targets(
    plan: SlotPlan, frames: list[FrameValue], data: st.DataObject
) -> tuple[list[tuple[Any, int | None, bool]], list[FrameValue]]:
    """Some frames of an answer as the targets of a follow-up (a scalar list as a whole,
    an object-array field at its index), and the frames that answer them."""
    units: list[tuple[Any, int | None, list[FrameValue]]] = []
    for f in frames:
        array = f.slot.array
        if array is not None and not array.items_are_objects:
            if units and units[-1][0] is f.slot:
                units[-1][2].append(f)
            else:
                units.append((f.slot, None, [f]))
        else:
            units.append((f.slot, f.index, [f]))
    chosen = data.draw(st.lists(st.sampled_from(range(len(units))), min_size=1, unique=True))
    picked = [units[i] for i in sorted(chosen)]
    required = data.draw(st.lists(st.booleans(), min_size=len(picked), max_size=len(picked)))
    targets = [(slot, index, req) for (slot, index, _), req in zip(picked, required, strict=True)]
    return targets, [f for _, _, fs in picked for f in fs]


@pytest.mark.parametrize("syntax", SYNTAXES)
@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(case=model_and_instance(), data=st.data())
def test_follow_up_grammar_admits_its_targets_and_no_other_slot(
    engine: GrammarEngine, syntax: str, case: Case, data: st.DataObject
) -> None:
    assume(writes_every_item(case.spec, case.instance))  # an empty item cannot be written
    plan = compile_schema(case.model)
    frames = list(walk_instance(plan, case.instance))
    assume(frames and _no_empty_string(plan, case.instance))
    targets, answer = _targets(plan, frames, data)
    chosen = get_syntax(syntax)
    # a follow-up's text in the line syntaxes does not start with a quote or a bracket
    # (test_follow_up_text_cannot_start_with_a_quote_or_a_bracket)
    assume(not (_unquoted_lines(chosen) and any(_opens_like_junk(f) for f in answer)))
    g = chosen.grammar(plan, only=targets)
    text = chosen.write(plan, answer)
    assert engine.accepts(g, text), (targets, text)
    # read in a pass of its own, the answer names exactly the targets' frames
    lexer = chosen.lexer(plan)
    opened = [t for t in lexer.feed(text) + lexer.close() if isinstance(t, Open)]
    assert [(t.slot, t.index) for t in opened] == [(f.slot.id, f.index) for f in answer]
    others = [f for f in frames if f.slot.id not in {t[0].id for t in targets}]
    if others:
        assert not engine.accepts(g, chosen.write(plan, [*answer, others[0]]))
        assert not engine.accepts(g, chosen.write(plan, [others[0], *answer]))


_TRIAGE: dict[str, Any] = {
    "summary": "s",
    "priority": 3,
    "sentiment": "negative",
    "urgent": True,
    "tags": ["a"],
    "action_items": [{"owner": "ops", "task": "t", "due": "2025-01-01"}],
}


def _unquoted_lines(chosen: Any) -> bool:
    return isinstance(chosen, LineSyntax) and not chosen.quoted


def _opens_like_junk(frame: FrameValue) -> bool:
    value = frame.value
    return (
        frame.slot.kind == "string"
        and not frame.slot.enum
        and isinstance(value, str)
        and value[:1] in ('"', "[")
    )


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_follow_up_text_cannot_start_with_a_quote_or_a_bracket(
    engine: GrammarEngine, syntax: str
) -> None:
    """What a small model reaches for when asked again (a quoted copy, ``[Triage]``) is
    out of a follow-up's grammar in the unquoted line syntaxes; the first pass still
    admits it, a quote or bracket inside the text is fine, and the other syntaxes keep
    their text bodies. (Where a follow-up's text may be a JSON string, ``v4-quoted``, a
    value that starts with a quote is written as one, which reads back quotes and all;
    v4 writes it so too, but its follow-up keeps v3's raw line.)"""
    plan = compile_schema(TicketTriage)
    chosen = get_syntax(syntax)
    summary = plan.by_path("summary")
    follow_up = chosen.grammar(plan, only=[(summary, None, True)])

    def answer(text: str) -> str:
        return chosen.write(plan, [FrameValue(summary, None, text)])

    assert engine.accepts(follow_up, answer('Export fails "sometimes" [log]'))
    for junk in ('"Export fails"', "[Summary]"):
        as_json = _unquoted_lines(chosen) and chosen.follow_up_quotes(summary) and junk[0] == '"'
        expected = as_json or not _unquoted_lines(chosen)
        assert engine.accepts(follow_up, answer(junk)) is expected, junk
        first = render_frames(plan, {**_TRIAGE, "summary": junk}, syntax)
        assert engine.accepts(chosen.grammar(plan), first), junk


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_follow_up_grammar_of_a_retry_request(engine: GrammarEngine, syntax: str) -> None:
    """The targets the assembler asks for again, and the frames that answer them."""
    plan = compile_schema(TicketTriage)
    value = {
        "summary": "s",
        "priority": 9,
        "sentiment": "negative",
        "urgent": True,
        "tags": ["a"],
        "action_items": [
            {"owner": "ops", "task": "t", "due": "2025-01-01"},
            {"owner": "dev", "task": "u", "due": "someday"},
        ],
    }
    asm = Assembler(plan, syntax=syntax)
    asm.feed(render_frames(plan, value, syntax))
    asm.close()
    request = asm.retry_request()
    assert request is not None
    items = [RetryItem(t.slot, t.index, t.error.message) for t in request.targets]
    assert {(t.slot.path, t.index) for t in request.targets} == {
        ("priority", None),
        ("action_items[].due", 1),
    }
    g = get_syntax(syntax).grammar(plan, only=retry_targets(items))
    fixed = {**value, "priority": 3, "action_items": [value["action_items"][0], {"due": None}]}
    answer = [
        f
        for f in walk_instance(plan, fixed)
        if (f.slot.path, f.index) in {("priority", None), ("action_items[].due", 1)}
    ]
    text = get_syntax(syntax).write(plan, answer)
    assert engine.accepts(g, text), text
    asm.begin_retry(request)
    asm.feed(text)
    asm.close()
    assert asm.outcome.ok, asm.outcome.errors
    assert asm.state["priority"] == 3 and asm.state["action_items"][1]["due"] is None


# -- the prompt ------------------------------------------------------------------------------


def _check_example(model: type[BaseModel], syntax: str) -> None:
    plan = compile_schema(model)
    instance = example_instance(plan)
    example = extract_example(prompt(plan, syntax))
    if not instance:
        assert example is None
        return
    assert example == (render_frames(plan, instance, syntax) or None)  # no frames: none shown
    if example is None:
        return
    asm = Assembler(plan, syntax=syntax)
    asm.feed(example)
    asm.close()
    assert asm.outcome.ok, asm.outcome.errors
    assert not asm.diagnostics
    assert asm.result == model.model_validate(instance)


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_prompt_examples_of_the_golden_models_parse(syntax: str) -> None:
    shown = 0
    for model in GOLDEN_MODELS.values():
        _check_example(model, syntax)
        shown += extract_example(prompt(compile_schema(model), syntax)) is not None
    assert shown >= 1  # the model whose fields carry examples


@pytest.mark.parametrize("syntax", SYNTAXES)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model=model_with_examples())
def test_prompt_examples_of_random_models_parse(syntax: str, model: type[BaseModel]) -> None:
    assert example_instance(compile_schema(model)) is not None
    _check_example(model, syntax)


class _EmptyOnly(BaseModel):
    title: list[Annotated[str, Field(examples=["a"])]] = Field(max_length=0)


class _OptionalEmptyOnly(BaseModel):
    title: _EmptyOnly | None = None


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_prompt_example_leaves_out_an_optional_object_that_writes_no_frame(syntax: str) -> None:
    """An optional object holding only an empty list writes no frame, so it reads back as
    absent: the example instance leaves it out rather than show one that does not round
    trip (found by the random-model test)."""
    assert example_instance(compile_schema(_OptionalEmptyOnly)) == {}
    _check_example(_OptionalEmptyOnly, syntax)


def _named(text: str, ref: str) -> bool:
    """Whether a line of ``text`` names ``ref``: a list line ``- ref`` (then a blank or
    a colon) or a form line ``ref:``."""
    return any(
        (line.startswith(f"- {ref}") and line[len(ref) + 2 : len(ref) + 3] in (" ", ":"))
        or line.startswith(f"{ref}:")
        for line in text.split("\n")
    )


@pytest.mark.parametrize("syntax", SYNTAXES)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=model_and_instance())
def test_prompt_names_every_slot_by_its_ref(syntax: str, case: Case) -> None:
    plan = compile_schema(case.model)
    chosen = get_syntax(syntax)
    for with_grammar in (False, True):
        text = prompt(plan, syntax, grammar=with_grammar)
        for slot in plan.slots:
            assert _named(text, chosen.ref(plan, slot)), (slot.path, text)


@pytest.mark.parametrize("syntax", SYNTAXES)
def test_retry_prompt_names_every_target_by_its_ref(syntax: str) -> None:
    plan = compile_schema(TicketTriage)
    chosen = get_syntax(syntax)
    items = [
        RetryItem(plan.by_path("priority"), None, "too high", "7"),
        RetryItem(plan.by_path("tags[]"), None, "too many"),
        RetryItem(plan.by_path("action_items[].due"), 1, "not a date", "someday"),
        RetryItem(plan.by_path("action_items[].owner"), 2, "missing", optional=True),
    ]
    text = retry_prompt(plan, items, {"summary": "s"}, syntax)
    for item in items:
        index = None if item.slot.array and not item.slot.array.items_are_objects else item.index
        assert _named(text, chosen.ref(plan, item.slot, index)), (item, text)


# -- conformance vectors -----------------------------------------------------------------------

VECTOR_FILES = sorted(VECTORS.glob("*/*.json"))


def test_every_syntax_has_a_vector_file_per_case() -> None:
    for syntax in SYNTAXES:
        files = {p.stem for p in (VECTORS / syntax).glob("*.json")}
        assert files == set(cases_for(syntax)), syntax
    assert {p.parent.name for p in VECTOR_FILES} == set(SYNTAXES)


@pytest.mark.parametrize(
    "path", VECTOR_FILES, ids=[f"{p.parent.name}/{p.stem}" for p in VECTOR_FILES]
)
def test_vector(path: Path) -> None:
    vector: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    assert vector["syntax"] == path.parent.name
    got = run_vector(vector["schema"], vector["chunks"], vector["complete"], vector["syntax"])
    assert got == vector["expected"]
