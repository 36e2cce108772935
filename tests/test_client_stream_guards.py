"""Regressions of the SDK streams: the total timeout of a stalled sync read, early exit
at a list item's start and its cost on long lists, a failed follow-up after a cut
inside an optional value, the sync watchdog's thread, and option validation."""

from __future__ import annotations

import gc
import math
import threading
import time
from typing import Any

import pytest
from pydantic import BaseModel

import slotflight
from slotflight import Limits, UpstreamTimeout
from slotflight.assemble.closing import PassCloser
from slotflight.assemble.events import Diagnostic, SlotComplete
from slotflight.client.async_stream import astream
from slotflight.client.sync_stream import stream
from slotflight.plan.instance import walk_instance
from slotflight.testing import Reply, ScriptedServer
from tests.client_support import (
    MESSAGES,
    TRIAGE,
    Triage,
    async_client,
    bytes_before,
    frames,
    sync_client,
)

TEXT = frames(TRIAGE)


# -- the total timeout of a sync read stalled in recv -----------------------------------


def test_sync_total_timeout_ends_a_stalled_read_at_the_deadline() -> None:
    # The headers come 2.7 s in, then a few bytes, then silence. The HTTP read timeout
    # (3 s, set when the request was sent) restarts with the last byte, so only the
    # watchdog can end the read at the 3 s deadline; closing the response alone does
    # not wake a read blocked in recv.
    reply = Reply(TEXT, delay=2.7, stall_after_bytes=30)
    with ScriptedServer([reply]) as server:
        start = time.monotonic()
        with pytest.raises(UpstreamTimeout, match="total timeout"):
            slotflight.complete(
                sync_client(server), model="m", messages=MESSAGES, output=Triage, timeout=3.0
            )
        elapsed = time.monotonic() - start
        assert server.wait_for_disconnect(0).stalled
    # failure guard only: the restarted read timeout would end the read near 5.7 s
    assert elapsed < 5.0


# -- early exit at the start of a list item ---------------------------------------------


class Order(BaseModel):
    title: str
    tags: list[str]


#: As a tokenizer splits it: "-" (the next item's start) comes alone, after the
#: previous item closed, while every required slot is already valid.
ORDER_TOKENS = [
    "title", ":", " Widgets", "\n", "tags", ":\n",
    "-", " red", "\n", "-", " blue", "\n", "-", " green", "\n", "end", "\n",
]  # fmt: skip


def test_early_exit_does_not_invent_a_list_item_sync() -> None:
    with (
        ScriptedServer([Reply(chunks=ORDER_TOKENS)]) as server,
        stream(
            sync_client(server), model="m", messages=MESSAGES, output=Order, early_exit=True
        ) as s,
    ):
        events = list(s)
        result = s.final()
    assert "" not in result.tags
    assert result.tags == ["red", "blue", "green"]
    completed = [e.value for e in events if isinstance(e, SlotComplete)]
    assert "" not in completed


async def test_early_exit_does_not_invent_a_list_item_async() -> None:
    async with ScriptedServer([Reply(chunks=ORDER_TOKENS)]) as server:
        result = await slotflight.acomplete(
            async_client(server), model="m", messages=MESSAGES, output=Order, early_exit=True
        )
    assert result.tags == ["red", "blue", "green"]


# -- early exit on a long list of objects -----------------------------------------------


class Item(BaseModel):
    name: str
    qty: int


class Bill(BaseModel):
    items: list[Item]
    total: int  # required and written last: early exit can only stop after it


def test_early_exit_checks_the_required_slots_a_bounded_number_of_times(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Finding the missing required slots walks every item so far: done after every
    # chunk, a list of N objects would cost O(N^2).
    calls = 0
    missing = PassCloser.missing

    def counted(self: PassCloser, *, cut: bool) -> Any:
        nonlocal calls
        calls += 1
        return missing(self, cut=cut)

    monkeypatch.setattr(PassCloser, "missing", counted)
    plan = slotflight.compile(Bill)
    n = 200
    bill = Bill(items=[Item(name=f"w{i}", qty=i) for i in range(n)], total=n)
    text = slotflight.SYNTAXES["v1"].write(plan, list(walk_instance(plan, bill)))
    with (
        ScriptedServer([Reply(text, chunks=12)]) as server,
        stream(
            sync_client(server),
            model="m",
            messages=MESSAGES,
            output=plan,
            syntax="v1",
            early_exit=True,
            checks="none",
        ) as s,
    ):
        result = s.final()
    assert len(result.items) == n and result.total == n
    assert calls < 20


# -- a failed follow-up after a cut inside an optional value ----------------------------


@pytest.mark.parametrize("index", [0, 1])
def test_follow_up_failure_after_a_cut_inside_an_optional_value_keeps_the_object(
    index: int,
) -> None:
    # Every required value arrived; the drop lands inside an optional list item, so
    # the pass ends invalid (that item is cut) and a follow-up asks for the list.
    cut = Reply(TEXT, drop_after_bytes=bytes_before(TRIAGE, 4, index, inside=True))
    with ScriptedServer([cut, Reply(status=500)]) as server:
        with stream(sync_client(server), model="m", messages=MESSAGES, output=Triage) as s:
            events = list(s)
            result = s.final()
        assert len(server.requests) == 2
    assert result == TRIAGE.model_copy(update={"tags": []})
    codes = [e.code for e in events if isinstance(e, Diagnostic)]
    assert "follow_up_failed" in codes
    assert events[-1].type == "done"


async def test_follow_up_failure_after_a_cut_inside_an_optional_value_async() -> None:
    cut = Reply(TEXT, drop_after_bytes=bytes_before(TRIAGE, 4, 1, inside=True))
    async with (
        ScriptedServer([cut, Reply(status=500)]) as server,
        astream(async_client(server), model="m", messages=MESSAGES, output=Triage) as s,
    ):
        events = [e async for e in s]
        result = await s.final()
    assert result == TRIAGE.model_copy(update={"tags": []})
    assert any(isinstance(e, Diagnostic) and e.code == "follow_up_failed" for e in events)


# -- the sync watchdog's thread ---------------------------------------------------------


def _watchdog_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name == "slotflight-read-deadline"}


def _assert_ended(threads: set[threading.Thread]) -> None:
    for thread in threads:
        thread.join(timeout=5.0)
    assert not any(t.is_alive() for t in threads)


def test_watchdog_thread_ends_at_done_without_close() -> None:
    before = _watchdog_threads()
    with ScriptedServer([Reply(TEXT, chunks=3)]) as server:
        s = stream(sync_client(server), model="m", messages=MESSAGES, output=Triage, idle_timeout=5)
        for event in s:
            if event.type == "done":
                break  # not resumed to its end, not closed
        started = _watchdog_threads() - before
        assert started  # the stream's reads were bounded by the watchdog
        _assert_ended(started)
        del s


def test_watchdog_thread_ends_when_a_stream_is_dropped_mid_way() -> None:
    before = _watchdog_threads()
    with ScriptedServer([Reply(TEXT, chunks=3)]) as server:
        s = stream(sync_client(server), model="m", messages=MESSAGES, output=Triage, idle_timeout=5)
        next(s)
        started = _watchdog_threads() - before
        assert started
        del s
        gc.collect()
        _assert_ended(started)


# -- option validation ------------------------------------------------------------------


#: What a caller may pass for ``limits`` by mistake: the fields as a dict.
NOT_LIMITS: Any = {"max_frame_chars": 5}


def test_limits_must_be_a_limits_instance() -> None:
    with ScriptedServer() as server:
        for open_stream, client in ((stream, sync_client), (astream, async_client)):
            with pytest.raises(TypeError, match="limits"):
                open_stream(
                    client(server),  # type: ignore[arg-type]
                    model="m",
                    messages=MESSAGES,
                    output=Triage,
                    limits=NOT_LIMITS,
                )
        assert not server.requests
    stream(
        sync_client(server), model="m", messages=MESSAGES, output=Triage, limits=Limits()
    ).close()


@pytest.mark.parametrize("name", ["timeout", "idle_timeout"])
@pytest.mark.parametrize("value", [math.inf, 1e300, threading.TIMEOUT_MAX * 2])
def test_timeouts_beyond_what_a_timer_can_wait_are_refused(name: str, value: float) -> None:
    # Accepted, they reached the sync watchdog's thread, which died on them.
    options: dict[str, Any] = {name: value}
    with ScriptedServer([Reply(TEXT)]) as server:
        with pytest.raises(ValueError, match=name):
            slotflight.complete(
                sync_client(server), model="m", messages=MESSAGES, output=Triage, **options
            )
        with pytest.raises(ValueError, match=name):
            astream(async_client(server), model="m", messages=MESSAGES, output=Triage, **options)
        assert not server.requests
