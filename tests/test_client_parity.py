"""The sync and async streams behave the same: one script, the same events and result."""

from __future__ import annotations

from typing import Any

import pytest

from slotflight._errors import OutputValidationError, SlotflightError, UpstreamDisconnected
from slotflight.client.async_stream import astream
from slotflight.client.sync_stream import stream
from slotflight.testing import RandomChunks, Reply, ScriptedServer
from tests.client_support import (
    MESSAGES,
    PLAN,
    Frame,
    Plan,
    async_client,
    edited,
    inside_frame,
    sync_client,
    written,
)


def script() -> list[Reply]:
    """A first pass with an invalid date and a missing title, then a drop, then the fix."""
    first = edited(PLAN, drop=[(1, None)], replace={(3, 0): "someday"})
    fixed: list[Frame] = [(1, "Fix export"), (3, "2025-01-30", 0)]
    return [
        Reply(first, chunks=RandomChunks(seed=3, max_size=6)),
        # dropped inside the date, after the title
        Reply(written(Plan, *fixed), drop_after_bytes=inside_frame(Plan, fixed, 1)),
        Reply(written(Plan, (3, "2025-01-30", 0)), chunks=2),
    ]


def run_sync(replies: list[Reply], **options: Any) -> tuple[list[dict[str, Any]], Any]:
    with (
        ScriptedServer(replies) as server,
        stream(sync_client(server), model="m", messages=MESSAGES, output=Plan, **options) as s,
    ):
        events: list[dict[str, Any]] = []
        try:
            for event in s:
                events.append(event.to_json())
        except SlotflightError as exc:
            return events, exc
        return events, s.final()


async def run_async(replies: list[Reply], **options: Any) -> tuple[list[dict[str, Any]], Any]:
    async with ScriptedServer(replies) as server:
        client = async_client(server)
        async with astream(client, model="m", messages=MESSAGES, output=Plan, **options) as s:
            events: list[dict[str, Any]] = []
            try:
                async for event in s:
                    events.append(event.to_json())
            except SlotflightError as exc:
                return events, exc
            return events, await s.final()


async def test_same_script_same_events_and_result() -> None:
    sync_events, sync_result = run_sync(script())
    async_events, async_result = await run_async(script())
    assert [e["type"] for e in sync_events] == [e["type"] for e in async_events]
    assert sync_events == async_events
    assert sync_result == async_result
    assert sync_result == PLAN.model_copy(
        update={
            "actions": [PLAN.actions[0].model_copy(update={"due": "2025-01-30"}), PLAN.actions[1]]
        }
    )
    assert [e["attempt"] for e in sync_events if e["type"] == "retry"] == [2, 3]


@pytest.mark.parametrize(
    ("max_attempts", "error"), [(1, OutputValidationError), (2, UpstreamDisconnected)]
)
async def test_same_failure_both_ways(max_attempts: int, error: type[SlotflightError]) -> None:
    sync_events, sync_error = run_sync(script(), max_attempts=max_attempts)
    async_events, async_error = await run_async(script(), max_attempts=max_attempts)
    assert sync_events == async_events
    assert sync_events[-1]["type"] == "error"
    assert type(sync_error) is type(async_error) is error
    assert sync_error.to_json() == async_error.to_json()
