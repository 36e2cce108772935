"""Stopping a stream: break, close, cancellation, timeouts and early exit, over real HTTP.

Each test that stops reading checks that the scripted server saw the client go away:
the upstream response was really closed, not left to the garbage collector.
"""

from __future__ import annotations

import asyncio
import threading

import pytest

from slotflight._errors import StreamClosed, UpstreamTimeout
from slotflight.assemble.events import ErrorEvent, Event
from slotflight.client.async_stream import astream
from slotflight.client.sync_stream import stream
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
#: Bytes up to the end of the sentiment frame: every required slot of Triage.
REQUIRED_PART = bytes_before(TRIAGE, 4, 0)
#: Bytes up to the end of the summary frame and one more: a line syntax completes a
#: text value when the next line starts.
FIRST_FRAME = bytes_before(TRIAGE, 2) + 1
#: Bytes up to the end of the summary frame, its newline included: under a grammar
#: that keeps the summary to one line it completes there.
SUMMARY_LINE = bytes_before(TRIAGE, 2)


def test_break_then_leaving_the_block_closes_the_upstream() -> None:
    with ScriptedServer([Reply(TEXT, stall_after_bytes=FIRST_FRAME)]) as server:
        with stream(sync_client(server), model="m", messages=MESSAGES, output=Triage) as s:
            for event in s:
                if event.type == "slot-complete":
                    break
        recorded = server.wait_for_disconnect(0)
        assert recorded.stalled
        assert not recorded.completed
    assert s.completed() == {"/summary": TRIAGE.summary}
    with pytest.raises(StreamClosed):
        next(s)
    with pytest.raises(StreamClosed):
        s.final()


def test_under_a_one_line_grammar_a_text_value_completes_at_its_newline() -> None:
    """The summary has no ``maxLength``; compact mode makes it one line in the grammar the
    request sends, so the stream completes it at its newline, though nothing after the
    newline ever arrives (without the grammar it would wait for the next line)."""
    with ScriptedServer([Reply(TEXT, stall_after_bytes=SUMMARY_LINE)]) as server:
        options = {"grammar": "llama.cpp", "grammar_max_string_chars": 200}
        client = sync_client(server, timeout=10.0)  # without the rule: a timeout, no value
        with stream(client, model="m", messages=MESSAGES, output=Triage, **options) as s:
            for event in s:
                if event.type == "slot-complete":
                    break
        recorded = server.wait_for_disconnect(0)
        assert recorded.stalled
    assert s.completed() == {"/summary": TRIAGE.summary}


async def test_async_under_a_one_line_grammar_a_text_value_completes_at_its_newline() -> None:
    async with ScriptedServer([Reply(TEXT, stall_after_bytes=SUMMARY_LINE)]) as server:
        client = async_client(server, timeout=10.0)
        async with astream(
            client,
            model="m",
            messages=MESSAGES,
            output=Triage,
            grammar="llama.cpp",
            grammar_max_string_chars=200,
        ) as s:
            async for event in s:
                if event.type == "slot-complete":
                    break
        recorded = await asyncio.to_thread(server.wait_for_disconnect, 0)
        assert recorded.stalled
    assert s.completed() == {"/summary": TRIAGE.summary}


def test_close_without_a_block_closes_the_upstream() -> None:
    with ScriptedServer([Reply(TEXT, stall_after_bytes=FIRST_FRAME)]) as server:
        s = stream(sync_client(server), model="m", messages=MESSAGES, output=Triage)
        first = next(s)
        assert first.type == "slot-start"
        s.close()
        assert server.wait_for_disconnect(0).disconnected
        s.close()  # idempotent
        assert s.closed


async def test_async_break_then_leaving_the_block_closes_the_upstream() -> None:
    async with ScriptedServer([Reply(TEXT, stall_after_bytes=FIRST_FRAME)]) as server:
        client = async_client(server)
        async with astream(client, model="m", messages=MESSAGES, output=Triage) as s:
            async for event in s:
                if event.type == "slot-complete":
                    break
        recorded = await asyncio.to_thread(server.wait_for_disconnect, 0)
        assert not recorded.completed
    with pytest.raises(StreamClosed):
        await s.final()


async def test_cancelling_the_reading_task_closes_the_upstream() -> None:
    async with ScriptedServer([Reply(TEXT, stall_after_bytes=FIRST_FRAME)]) as server:
        client = async_client(server)
        got_first = asyncio.Event()
        seen: list[Event] = []

        async def consume() -> None:
            async with astream(client, model="m", messages=MESSAGES, output=Triage) as s:
                async for event in s:
                    seen.append(event)
                    if event.type == "slot-complete":
                        got_first.set()

        task = asyncio.create_task(consume())
        await asyncio.wait_for(got_first.wait(), 10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        recorded = await asyncio.to_thread(server.wait_for_disconnect, 0)
        assert recorded.stalled and not recorded.completed
    assert not any(isinstance(e, ErrorEvent) for e in seen)


async def test_cancelling_while_waiting_for_the_response_closes_the_request() -> None:
    async with ScriptedServer([Reply(TEXT, delay=30)]) as server:
        client = async_client(server)

        async def consume() -> None:
            async with astream(client, model="m", messages=MESSAGES, output=Triage) as s:
                await s.final()

        task = asyncio.create_task(consume())
        await asyncio.to_thread(server.wait_for, lambda requests: len(requests) == 1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert (await asyncio.to_thread(server.wait_for_disconnect, 0)).disconnected


async def test_close_from_another_task_stops_the_reader() -> None:
    async with ScriptedServer([Reply(TEXT, stall_after_bytes=FIRST_FRAME)]) as server:
        s = astream(async_client(server), model="m", messages=MESSAGES, output=Triage)
        got_first = asyncio.Event()

        async def consume() -> None:
            async for event in s:
                if event.type == "slot-complete":
                    got_first.set()

        task = asyncio.create_task(consume())
        await asyncio.wait_for(got_first.wait(), 10)
        await s.close()
        with pytest.raises(StreamClosed):
            await asyncio.wait_for(task, 10)
        assert (await asyncio.to_thread(server.wait_for_disconnect, 0)).disconnected
        assert len(server.requests) == 1  # no follow-up was started


def test_close_from_another_thread_stops_a_reader_blocked_on_a_silent_server() -> None:
    # The server goes silent after the first frame: the reading thread is blocked in a
    # read that only the client's read timeout (30 s here) would end, unless close()
    # wakes it.
    with ScriptedServer([Reply(TEXT, stall_after_bytes=FIRST_FRAME)]) as server:
        s = stream(sync_client(server, timeout=30.0), model="m", messages=MESSAGES, output=Triage)
        raised: list[BaseException] = []
        got_first = threading.Event()

        def consume() -> None:
            try:
                for event in s:
                    if event.type == "slot-complete":
                        got_first.set()
            except BaseException as exc:  # what the reader got
                raised.append(exc)

        reader = threading.Thread(target=consume, daemon=True)
        reader.start()
        assert got_first.wait(10)
        s.close()
        reader.join(10)
        assert not reader.is_alive()
        assert [type(e) for e in raised] == [StreamClosed]
        assert server.wait_for_disconnect(0).disconnected
        assert len(server.requests) == 1  # no follow-up was started


def test_idle_timeout_sync() -> None:
    with ScriptedServer([Reply(TEXT, stall_after_bytes=FIRST_FRAME)]) as server:
        client = sync_client(server)
        with stream(client, model="m", messages=MESSAGES, output=Triage, idle_timeout=0.3) as s:
            seen: list[Event] = []
            with pytest.raises(UpstreamTimeout, match="idle") as info:
                for event in s:
                    seen.append(event)
        assert server.wait_for_disconnect(0).disconnected
    assert isinstance(seen[-1], ErrorEvent) and seen[-1].error.code == "timeout"
    assert s.completed() == {"/summary": TRIAGE.summary}
    assert info.value.__cause__ is not None  # the client's read timeout


#: A reply that times the stream out, the total and idle timeouts, the error's wording.
TIMEOUTS = [
    pytest.param(Reply(TEXT, stall_after_bytes=FIRST_FRAME), None, 0.3, "idle", id="idle"),
    pytest.param(  # ~3 s in all, never idle for long
        Reply(TEXT, chunks=2, chunk_delay=0.05),
        0.5,
        None,
        "total",
        id="total-while-chunks-keep-coming",
    ),
    pytest.param(Reply(TEXT, delay=30), 0.3, None, "total", id="total-before-the-response-starts"),
]
TIMEOUT_ARGS = ("reply", "timeout", "idle_timeout", "match")


@pytest.mark.parametrize(TIMEOUT_ARGS, TIMEOUTS[1:])
def test_total_timeout_sync(
    reply: Reply, timeout: float | None, idle_timeout: float | None, match: str
) -> None:
    with ScriptedServer([reply]) as server:
        client = sync_client(server)
        s = stream(
            client,
            model="m",
            messages=MESSAGES,
            output=Triage,
            timeout=timeout,
            idle_timeout=idle_timeout,
        )
        with s, pytest.raises(UpstreamTimeout, match=match):
            s.final()
        assert server.wait_for_disconnect(0).disconnected


@pytest.mark.parametrize(TIMEOUT_ARGS, TIMEOUTS)
async def test_timeout_async(
    reply: Reply, timeout: float | None, idle_timeout: float | None, match: str
) -> None:
    async with ScriptedServer([reply]) as server:
        client = async_client(server)
        async with astream(
            client,
            model="m",
            messages=MESSAGES,
            output=Triage,
            timeout=timeout,
            idle_timeout=idle_timeout,
        ) as s:
            with pytest.raises(UpstreamTimeout, match=match):
                await s.final()
        assert (await asyncio.to_thread(server.wait_for_disconnect, 0)).disconnected


def test_early_exit_closes_the_upstream_once_required_slots_are_complete() -> None:
    # The server stalls right after the required frames; only early exit can finish.
    with ScriptedServer([Reply(TEXT, stall_after_bytes=REQUIRED_PART)]) as server:
        client = sync_client(server)
        with stream(client, model="m", messages=MESSAGES, output=Triage, early_exit=True) as s:
            types = [e.type for e in s]
            result = s.final()
        recorded = server.wait_for_disconnect(0)
    assert recorded.stalled
    assert types[-1] == "done"
    assert result == TRIAGE.model_copy(update={"tags": []})
    assert s.usage.requests == (None,)  # cut off before the usage chunk


def test_without_early_exit_the_same_stall_times_out() -> None:
    with ScriptedServer([Reply(TEXT, stall_after_bytes=REQUIRED_PART)]) as server:
        client = sync_client(server)
        with stream(client, model="m", messages=MESSAGES, output=Triage, idle_timeout=0.3) as s:
            with pytest.raises(UpstreamTimeout):
                s.final()
            assert s.state["sentiment"] == TRIAGE.sentiment


async def test_early_exit_async() -> None:
    async with ScriptedServer([Reply(TEXT, stall_after_bytes=REQUIRED_PART)]) as server:
        client = async_client(server)
        async with astream(
            client, model="m", messages=MESSAGES, output=Triage, early_exit=True
        ) as s:
            result = await s.final()
        assert (await asyncio.to_thread(server.wait_for_disconnect, 0)).stalled
    assert result.priority == TRIAGE.priority
