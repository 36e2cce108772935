"""Random plans x random valid instances x random chunkings: the final object is the instance."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from slotflight.plan.compiler import compile as compile_schema
from slotflight.syntax import render_frames
from tests.assembler_support import SYNTAXES, drive, split_at
from tests.strategies import (
    Case,
    ListSpec,
    ModelSpec,
    TypeSpec,
    model_and_instance,
    writes_every_item,
)


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


@pytest.mark.parametrize("syntax", SYNTAXES)
@settings(
    max_examples=2000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(case=model_and_instance(), data=st.data())
def test_random_plan_round_trip_under_any_chunking(
    syntax: str, case: Case, data: st.DataObject
) -> None:
    assume(writes_every_item(case.spec, case.instance))
    plan = compile_schema(case.model)
    text = render_frames(plan, case.instance, syntax)
    encoded = text.encode("utf-8")
    mode = data.draw(st.sampled_from(["whole", "bytes1", "random"]))
    if mode == "whole":
        chunks: list[Any] = [text]
    elif mode == "bytes1":
        chunks = [encoded[i : i + 1] for i in range(len(encoded))]
    else:
        cuts = data.draw(st.lists(st.integers(0, len(encoded)), max_size=20))
        chunks = split_at(encoded, cuts)
    run = drive(chunks, plan, syntax=syntax, check=len(chunks) <= 300)
    asm = run.asm
    assert asm is not None
    assert asm.outcome.ok, (text, asm.outcome.errors)
    assert asm.result == case.model.model_validate(expressible(case.spec, case.instance))
    whole = drive([text], plan, syntax=syntax, check=False)
    assert run.non_delta() == whole.non_delta()
    assert run.deltas() == whole.deltas()
    assert run.final == whole.final
