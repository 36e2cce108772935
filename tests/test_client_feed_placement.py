"""The async stream keeps the caller's event loop free while a value's checks run.

Closing a value validates it and runs its slot checks, custom ones included. Here a
custom check blocks on one value until the test lets it go; meanwhile the test's own
coroutine (on the same loop) must run. The check waits at most :data:`BOUND_S` seconds
(so that a held loop fails the test instead of hanging it) and records whether the
test released it or the bound ran out: nothing here depends on how long anything takes.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from slotflight import StreamClosed
from slotflight.assemble.checks import CheckFailure, CheckState
from slotflight.assemble.events import SlotComplete, SlotDelta
from slotflight.client.async_stream import AsyncSlotStream, astream
from slotflight.client.core import new_core
from slotflight.client.feed_placement import COSTLY_STEP_S, OFFLOAD_CHARS
from slotflight.client.request import StreamOptions
from slotflight.client.workers import Workers
from slotflight.plan.compiler import compile as compile_schema
from slotflight.plan.model import Slot
from slotflight.syntax import DEFAULT_SYNTAX, render_frames
from slotflight.testing import Reply, ScriptedServer
from tests.client_support import async_client

#: Seconds the blocking check waits for the test at most.
BOUND_S = 10.0

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"owner": {"type": "string"}, "summary": {"type": "string"}},
    "required": ["owner", "summary"],
}
PLAN = compile_schema(SCHEMA)
MESSAGES = [{"role": "user", "content": "Summarise."}]
#: A value long enough to be fed on a worker from its :data:`OFFLOAD_CHARS` th character.
LARGE = " ".join(f"word{i}" for i in range(5000))
#: Short values, and one whose check costs more CPU than :data:`COSTLY_STEP_S`.
SHORT = "the platform team"
OTHER = "a short summary"
COSTLY = "a summary whose check is costly"

#: Set by the test around the stream; read by the check wherever it runs.
CALLER: contextvars.ContextVar[str] = contextvars.ContextVar("caller", default="unset")


class SlowCheck:
    """A custom check that passes every value: it blocks on ``blocked`` until
    released, spends CPU on ``costly``, and notes the thread and context of each call."""

    def __init__(self, blocked: str | None = None, costly: str | None = None) -> None:
        self.blocked = blocked
        self.costly = costly
        self.entered = threading.Event()
        self.release = threading.Event()
        self.outcomes: list[str] = []  # per blocked call: "released" or "bound ran out"
        self.calls: dict[str, tuple[str, str]] = {}  # value -> (thread name, CALLER)

    def __call__(self, slot: Slot, value: Any, state: CheckState) -> CheckFailure | None:
        self.calls[value] = (threading.current_thread().name, CALLER.get())
        if value == self.costly:
            started = time.thread_time()
            while time.thread_time() - started <= 4 * COSTLY_STEP_S:
                pass
        if value == self.blocked:
            self.entered.set()
            released = self.release.wait(BOUND_S)
            self.outcomes.append("released" if released else "bound ran out")
        return None


@pytest.fixture
def check() -> Iterator[SlowCheck]:
    made = SlowCheck()
    yield made
    made.release.set()  # no blocked check outlives the test


@pytest.fixture
async def server() -> AsyncIterator[ScriptedServer]:
    async with ScriptedServer() as scripted:
        yield scripted


def _reply(value: dict[str, str], chunks: int) -> Reply:
    return Reply(render_frames(PLAN, value, DEFAULT_SYNTAX), chunks=chunks)


async def _read_while_blocked(
    stream: AsyncSlotStream[Any], check: SlowCheck
) -> tuple[bool, list[Any], Any]:
    """Read ``stream`` in a task; once ``check`` blocks, note whether this coroutine
    ran before the check's bound ran out (the loop was free), then release it."""

    async def read() -> tuple[list[Any], Any]:
        async with stream:
            events = [event async for event in stream]
            return events, await stream.final()

    reading = asyncio.create_task(read())
    assert await asyncio.to_thread(check.entered.wait, BOUND_S)
    loop_was_free = not check.outcomes
    check.release.set()
    events, result = await reading
    return loop_was_free, events, result


def _whole(events: list[Any], value: dict[str, str]) -> None:
    """Every value's deltas, in order, make the value; each completed once."""
    for name, text in value.items():
        path = f"/{name}"
        deltas = [e.delta for e in events if isinstance(e, SlotDelta) and e.path == path]
        assert "".join(deltas) == text
        assert [e.value for e in events if isinstance(e, SlotComplete) and e.path == path] == [text]


async def test_a_large_values_checks_run_off_the_callers_loop(
    server: ScriptedServer, check: SlowCheck
) -> None:
    assert len(LARGE) > 2 * OFFLOAD_CHARS
    value = {"owner": SHORT, "summary": LARGE}
    server.add(_reply(value, chunks=50))
    check.blocked = LARGE
    CALLER.set("the caller")
    stream = astream(
        async_client(server), model="m", messages=MESSAGES, output=SCHEMA, checks=[check]
    )
    loop_was_free, events, result = await _read_while_blocked(stream, check)
    assert loop_was_free
    assert check.outcomes == ["released"]
    assert result == value
    _whole(events, value)
    loop_thread = threading.current_thread().name
    large_thread, large_caller = check.calls[LARGE]
    assert large_thread.startswith("slotflight-feed") and large_thread != loop_thread
    assert large_caller == "the caller"  # the check ran in the caller's context
    assert check.calls[SHORT] == (loop_thread, "the caller")  # before it: on the loop


async def test_after_a_costly_feed_even_short_values_close_off_the_loop(
    server: ScriptedServer, check: SlowCheck
) -> None:
    value = {"owner": COSTLY, "summary": SHORT}
    server.add(_reply(value, chunks=4))
    check.costly, check.blocked = COSTLY, SHORT
    stream = astream(
        async_client(server), model="m", messages=MESSAGES, output=SCHEMA, checks=[check]
    )
    loop_was_free, events, result = await _read_while_blocked(stream, check)
    assert loop_was_free
    assert result == value
    _whole(events, value)
    assert check.calls[COSTLY][0] == threading.current_thread().name  # not costly yet
    assert check.calls[SHORT][0].startswith("slotflight-feed")


async def test_cheap_streams_are_fed_on_the_loop(server: ScriptedServer, check: SlowCheck) -> None:
    value = {"owner": SHORT, "summary": OTHER}
    server.add(_reply(value, chunks=5))
    async with astream(
        async_client(server), model="m", messages=MESSAGES, output=SCHEMA, checks=[check]
    ) as stream:
        events = [event async for event in stream]
        assert await stream.final() == value
    _whole(events, value)
    loop_thread = threading.current_thread().name
    assert [thread for thread, _ in check.calls.values()] == [loop_thread, loop_thread]


async def test_a_full_pool_feeds_on_the_loop(server: ScriptedServer, check: SlowCheck) -> None:
    """With no worker free and no room to wait, a large value is fed on the loop:
    the stream goes on, whole, rather than fail or wait."""
    value = {"owner": SHORT, "summary": LARGE}
    server.add(_reply(value, chunks=50))
    workers = Workers(threads=1, queued=0, timeout_s=None, name="busy")
    held = threading.Event()
    busy = asyncio.create_task(workers.run(lambda: held.wait(BOUND_S)))
    try:
        while workers.in_pool == 0:
            await asyncio.sleep(0)
        options = StreamOptions(checks=[check])
        core = new_core(
            SCHEMA,
            model="m",
            messages=MESSAGES,
            options=options,
            params={},
            client_timeout=None,
        )
        async with AsyncSlotStream(async_client(server), core, workers) as stream:
            events = [event async for event in stream]
            assert await stream.final() == value
    finally:
        held.set()
        assert await busy
        workers.close()
    _whole(events, value)
    assert check.calls[LARGE][0] == threading.current_thread().name


def _blocked_on_large(server: ScriptedServer, check: SlowCheck) -> AsyncSlotStream[Any]:
    server.add(_reply({"owner": SHORT, "summary": LARGE}, chunks=50))
    check.blocked = LARGE
    return astream(
        async_client(server), model="m", messages=MESSAGES, output=SCHEMA, checks=[check]
    )


async def test_a_stream_cancelled_during_a_feed_waits_for_it(
    server: ScriptedServer, check: SlowCheck
) -> None:
    """The feed running on a worker touches the stream's state: the cancelled task ends
    only once it is done, so what the caller reads next is not being changed."""
    stream = _blocked_on_large(server, check)
    reading = asyncio.create_task(stream.final())
    assert await asyncio.to_thread(check.entered.wait, BOUND_S)
    reading.cancel()
    done, _ = await asyncio.wait({reading}, timeout=1.0)
    assert not done  # still waiting for the check it started
    check.release.set()
    with pytest.raises(asyncio.CancelledError):
        await reading
    assert check.outcomes == ["released"]
    assert stream.completed() == {"/owner": SHORT, "/summary": LARGE}
    await stream.close()


async def test_a_stream_closed_during_a_feed_ends_closed(
    server: ScriptedServer, check: SlowCheck
) -> None:
    stream = _blocked_on_large(server, check)
    reading = asyncio.create_task(stream.final())
    assert await asyncio.to_thread(check.entered.wait, BOUND_S)
    await stream.close()  # from another task, while a worker feeds the stream
    check.release.set()
    with pytest.raises(StreamClosed):
        await reading
    assert check.outcomes == ["released"]


async def test_reading_the_state_during_a_feed_waits_for_it(
    server: ScriptedServer, check: SlowCheck
) -> None:
    """Another task reading the state while a worker feeds the stream sees it before or
    after that feed, never half applied: here the read, made from another thread while
    the check blocks, returns only once the feed is done, with its value in."""
    stream = _blocked_on_large(server, check)
    reading = asyncio.create_task(stream.final())
    assert await asyncio.to_thread(check.entered.wait, BOUND_S)
    seen: list[Any] = []
    reader = threading.Thread(target=lambda: seen.append(stream.completed()))
    reader.start()
    reader.join(0.5)
    assert reader.is_alive()  # waiting for the feed the check holds up
    check.release.set()
    await asyncio.to_thread(reader.join, BOUND_S)
    assert seen == [{"/owner": SHORT, "/summary": LARGE}]
    assert await reading == {"owner": SHORT, "summary": LARGE}
