"""The last attempt ends invalid only in optional parts: they are left out, the object is
valid without them, and nothing else changes (``Assembler.leave_out_failed``)."""

from __future__ import annotations

from typing import Any

import jsonpatch
import jsonpointer
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field, model_validator

from slotflight import compile
from slotflight._errors import OutputValidationError
from slotflight.assemble.assembler import Assembler
from slotflight.assemble.events import Diagnostic, Done, Event, Retry
from slotflight.client.sync_stream import stream
from slotflight.testing import Reply, ScriptedServer
from tests.client_support import MESSAGES, sync_client


class Size(BaseModel):
    width_cm: float = Field(gt=0)
    depth_cm: float = Field(gt=0)


class Step(BaseModel):
    task: str
    minutes: int = Field(ge=1)


class Product(BaseModel):
    name: str
    price: float = Field(ge=0)
    rating: float | None = Field(default=None, ge=0, le=5)
    size: Size | None = None
    colours: list[str] | None = Field(default=None, min_length=2)
    steps: list[Step] = Field(default_factory=list)


class SizedIfInStock(Product):
    in_stock: bool = False

    @model_validator(mode="after")
    def _size_when_in_stock(self) -> SizedIfInStock:
        if self.in_stock and self.size is None:
            raise ValueError("a product in stock has a size")
        return self


PLAN = compile(Product)
GOOD = "name: Desk\nprice: 279.99\n"


def close(text: str, plan: Any = PLAN) -> tuple[Assembler, list[Event]]:
    asm = Assembler(plan)
    events = asm.feed(text + "end\n")
    events += asm.close()
    return asm, events


def replay(events: list[Event]) -> Any:
    """The state a client builds from the events' patches alone."""
    doc: Any = {}
    for event in events:
        ops = [op.to_json() for op in event._patch_ops()]
        if ops:
            doc = jsonpatch.apply_patch(doc, ops)
    return doc


def test_an_optional_object_with_a_failed_field_is_left_out_whole() -> None:
    asm, events = close(GOOD + "width_cm: 110\ndepth_cm: 0\n")
    assert not asm.outcome.ok
    assert [e.code for e in asm.outcome.errors] == ["greater_than"]
    more = asm.leave_out_failed()
    assert asm.outcome.ok and asm.outcome.errors == ()
    assert asm.result == Product(name="Desk", price=279.99)
    notes = [e for e in more if isinstance(e, Diagnostic)]
    assert [(n.code, n.slot) for n in notes] == [("left_out", "size")]
    assert "size.depth_cm (greater_than)" in notes[0].message
    assert "110" in notes[0].message  # the value it held is named
    done = more[-1]
    assert isinstance(done, Done) and done.value["size"] is None
    # a client applying the patches sees the same object as the done event
    assert replay(events + more) == done.value
    assert "/size/width_cm" not in asm.completed()


def test_a_field_missing_in_a_started_optional_object_is_left_out_with_it() -> None:
    asm, _ = close(GOOD + "width_cm: 110\n")
    assert [e.code for e in asm.outcome.errors] == ["missing"]
    asm.leave_out_failed()
    assert asm.outcome.ok and asm.result.size is None


def test_optional_fields_and_lists_are_left_out_alone() -> None:
    asm, _ = close(GOOD + "rating: 7\ncolours:\n- red\n")
    assert {e.slot for e in asm.outcome.errors} == {"rating", "colours"}
    more = asm.leave_out_failed()
    assert asm.outcome.ok
    assert asm.result == Product(name="Desk", price=279.99)
    assert sorted(e.slot for e in more if isinstance(e, Diagnostic)) == ["colours", "rating"]


@pytest.mark.parametrize(
    "text",
    [
        "name: Desk\nprice: -1\nwidth_cm: 110\ndepth_cm: 0\n",  # a required field fails too
        GOOD + "steps:\n- task: Unbox\nminutes: 0\n",  # in an item of a list of objects
    ],
)
def test_nothing_changes_when_a_failure_is_not_in_an_optional_part(text: str) -> None:
    asm, _ = close(text)
    errors = asm.outcome.errors
    before = (asm.completed(), asm.state)
    assert asm.leave_out_failed() == []
    assert not asm.outcome.ok and asm.outcome.errors == errors
    assert (asm.completed(), asm.state) == before
    with pytest.raises(OutputValidationError):
        _ = asm.result


def test_parts_go_back_when_the_object_still_fails_without_them() -> None:
    asm, _ = close(GOOD + "in_stock: true\nwidth_cm: 110\ndepth_cm: 0\n", compile(SizedIfInStock))
    before = (asm.completed(), asm.outcome.errors, asm.state)
    assert asm.leave_out_failed() == []
    assert (asm.completed(), asm.outcome.errors, asm.state) == before
    assert asm.state["size"] == {"width_cm": 110}  # the part is back, no default filled
    assert not asm.outcome.ok


def test_a_json_schema_plan_leaves_out_too() -> None:
    schema = Product.model_json_schema()
    asm, _ = close(GOOD + "width_cm: 0\ndepth_cm: 30\n", compile(schema))
    assert not asm.outcome.ok
    more = asm.leave_out_failed()
    assert asm.outcome.ok
    assert asm.result["size"] is None and asm.result["name"] == "Desk"
    done = more[-1]
    assert isinstance(done, Done)
    assert {"op": "remove", "path": "/size"} in [op.to_json() for op in done.ops]


@settings(max_examples=60, deadline=None)
@given(
    rating=st.sampled_from(["4.5", "9", None]),
    size=st.sampled_from([("110", "60"), ("110", "0"), ("110", None), None]),
    colours=st.sampled_from([["red", "blue"], ["red"], None]),
)
def test_every_good_value_outside_a_left_out_part_survives(
    rating: str | None, size: tuple[str, str | None] | None, colours: list[str] | None
) -> None:
    text = GOOD
    if rating is not None:
        text += f"rating: {rating}\n"
    if size is not None:
        text += f"width_cm: {size[0]}\n" + (f"depth_cm: {size[1]}\n" if size[1] else "")
    if colours is not None:
        text += "colours:\n" + "".join(f"- {c}\n" for c in colours)
    asm, events = close(text)
    good = dict(asm.completed())
    events += asm.leave_out_failed()
    assert asm.outcome.ok  # every failure here lies in an optional part
    done = events[-1]
    assert isinstance(done, Done)
    assert replay(events) == done.value
    Product.model_validate(done.value)
    left_out = {e.slot for e in events if isinstance(e, Diagnostic) and e.code == "left_out"}
    for pointer, value in good.items():
        if pointer.split("/")[1] not in left_out:
            assert jsonpointer.resolve_pointer(done.value, pointer) == value


def test_the_sdk_returns_the_object_without_the_part_on_the_last_attempt() -> None:
    bad = GOOD + "width_cm: 110\ndepth_cm: 0\nend\n"
    again = "depth_cm: 0\nend\n"
    with ScriptedServer([Reply(bad, chunks=4), Reply(again, chunks=2)]) as server:
        client = sync_client(server)
        with stream(client, model="m", messages=MESSAGES, output=Product, max_attempts=2) as s:
            events = list(s)
            result = s.final()
        assert len(server.requests) == 2
    assert result == Product(name="Desk", price=279.99)
    assert [e.attempt for e in events if isinstance(e, Retry)] == [2]
    notes = [e for e in events if isinstance(e, Diagnostic) and e.code == "left_out"]
    assert len(notes) == 1 and notes[0].attempt == 2
    assert events[-1].type == "done"
    assert s.state == events[-1].value


def _stream_product(
    replies: list[str | Reply], output: Any = Product
) -> tuple[Any, list[Event], int]:
    """The result (or the error), the events and the number of requests made."""
    scripted = [r if isinstance(r, Reply) else Reply(r, chunks=3) for r in replies]
    with ScriptedServer(scripted) as server:
        with stream(sync_client(server), model="m", messages=MESSAGES, output=output) as s:
            events: list[Event] = []
            try:
                events.extend(s)
                result: Any = s.final()
            except OutputValidationError as exc:
                result = exc
        return result, events, len(server.requests)


def test_a_follow_up_repeating_the_one_before_word_for_word_is_not_sent() -> None:
    """The retry wrote the same rejected value again: the third request would be the
    second's word for word, so it is not sent (the reply scripted for it would have
    mended the value) and the failure is settled as on the last attempt."""
    bad = GOOD + "width_cm: 110\ndepth_cm: 0\nend\n"
    result, events, requests = _stream_product([bad, "depth_cm: 0\nend\n", "depth_cm: 40\nend\n"])
    assert requests == 2
    assert result == Product(name="Desk", price=279.99)
    assert [e.attempt for e in events if isinstance(e, Retry)] == [2]
    notes = [e for e in events if isinstance(e, Diagnostic) and e.code == "left_out"]
    assert [n.attempt for n in notes] == [2]


def test_a_follow_up_with_another_rejected_text_or_new_values_is_sent() -> None:
    """Another rejected text (``-1`` after ``0``), or a value accepted on the retry,
    makes the next request a new one: it is sent, up to ``max_attempts``."""
    bad = GOOD + "width_cm: 110\ndepth_cm: 0\nend\n"
    result, _, requests = _stream_product([bad, "depth_cm: -1\nend\n", "depth_cm: 40\nend\n"])
    assert requests == 3
    assert result == Product(name="Desk", price=279.99, size=Size(width_cm=110, depth_cm=40))
    both = GOOD + "width_cm: 0\ndepth_cm: 0\nend\n"
    result, _, requests = _stream_product(
        [both, "width_cm: 110\ndepth_cm: 0\nend\n", "depth_cm: 40\nend\n"]
    )
    assert requests == 3
    assert result == Product(name="Desk", price=279.99, size=Size(width_cm=110, depth_cm=40))


def test_a_required_value_failing_word_for_word_again_ends_the_stream_there() -> None:
    result, _, requests = _stream_product(
        ["name: Desk\nprice: -1\nend\n", "price: -1\nend\n", "price: 279.99\nend\n"]
    )
    assert requests == 2
    assert isinstance(result, OutputValidationError)
    assert result.attempts == 2
    assert [e.code for e in result.errors] == ["greater_than_equal"]
    assert result.partial == {"name": "Desk"}


def test_repeats_compares_failures_rejected_texts_and_accepted_values() -> None:
    asm, _ = close(GOOD + "width_cm: 110\ndepth_cm: 0\n")
    first = asm.retry_request()
    assert first is not None and not first.repeats(None)
    asm.begin_retry(first)
    asm.feed("depth_cm: 0\nend\n")
    asm.close()
    again = asm.retry_request()
    assert again is not None and again.attempt == 3
    assert again.repeats(first) and first.repeats(again)
    asm2, _ = close(GOOD + "width_cm: 110\ndepth_cm: -1\n")
    other = asm2.retry_request()
    assert other is not None and not other.repeats(first)  # another rejected text
    asm3, _ = close("name: Table\nprice: 279.99\nwidth_cm: 110\ndepth_cm: 0\n")
    moved = asm3.retry_request()
    assert moved is not None and not moved.repeats(first)  # other accepted values


def test_a_follow_up_after_a_dropped_pass_is_sent_even_when_it_repeats() -> None:
    """A pass the connection cut is not the model's answer: the follow-up that would
    repeat the one before is still sent."""
    bad = GOOD + "width_cm: 110\ndepth_cm: 0\nend\n"
    again = "depth_cm: 0\nend\n"
    dropped = Reply(again, chunks=[again[:12], again[12:]], drop_after_bytes=12)
    result, _, requests = _stream_product([bad, dropped, "depth_cm: 40\nend\n"])
    assert requests == 3
    assert result == Product(name="Desk", price=279.99, size=Size(width_cm=110, depth_cm=40))
