"""ReadDeadline: the per-chunk timeout of the async stream, one timer for many waits."""

from __future__ import annotations

import asyncio
import time

import pytest

from slotflight.client.read_deadline import ReadDeadline


async def test_a_wait_past_its_deadline_raises_timeout_error() -> None:
    deadline = ReadDeadline()
    started = time.monotonic()
    with pytest.raises(TimeoutError), deadline.within(0.05):
        await asyncio.sleep(5)
    assert deadline.expired()
    assert 0.04 <= time.monotonic() - started < 4.0  # well before the 5 s sleep


async def test_waits_within_their_deadline_finish_and_do_not_expire() -> None:
    deadline = ReadDeadline()
    for _ in range(20):
        with deadline.within(0.2):
            await asyncio.sleep(0.01)
        assert not deadline.expired()
    deadline.close()


async def test_the_timer_follows_a_deadline_that_moved_later() -> None:
    """The timer armed by the first wait fires during a later wait whose deadline is
    later: it re-arms, and that wait runs out only at its own deadline."""
    deadline = ReadDeadline()
    with deadline.within(0.05):
        await asyncio.sleep(0)
    started = time.monotonic()
    with deadline.within(0.2):
        await asyncio.sleep(0.1)  # past the first timer, within this deadline
    assert not deadline.expired()
    with pytest.raises(TimeoutError), deadline.within(0.1):
        await asyncio.sleep(5)
    assert time.monotonic() - started >= 0.19


async def test_an_earlier_deadline_rearms_the_timer() -> None:
    deadline = ReadDeadline()
    with deadline.within(10):
        await asyncio.sleep(0)
    started = time.monotonic()
    with pytest.raises(TimeoutError), deadline.within(0.05):
        await asyncio.sleep(5)
    assert time.monotonic() - started < 4.0  # well before the 5 s sleep


async def test_no_limit_never_expires() -> None:
    deadline = ReadDeadline()
    with deadline.within(None):
        await asyncio.sleep(0.02)
    assert not deadline.expired()


async def test_an_outer_cancellation_is_not_taken_for_a_timeout() -> None:
    deadline = ReadDeadline()

    async def wait() -> None:
        with deadline.within(10):
            await asyncio.sleep(5)

    task = asyncio.create_task(wait())
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not deadline.expired()


async def test_a_wait_already_past_its_deadline_expires_at_once() -> None:
    deadline = ReadDeadline()
    with pytest.raises(TimeoutError), deadline.within(0):
        await asyncio.sleep(5)
