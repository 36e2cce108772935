"""The pool for CPU-heavy work off the event loop (the async stream's costly feeds, the
gateway's compile work): bounded threads, queue and time."""

from __future__ import annotations

import asyncio
import os
import threading
import warnings
from collections.abc import Callable, Iterator

import pytest

from slotflight.client.workers import Workers, WorkRefused


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """Set at the end of each test, so that no blocked job outlives it."""
    event = threading.Event()
    yield event
    event.set()


@pytest.fixture
def pool() -> Iterator[Callable[..., Workers]]:
    """``pool(threads=, queued=, timeout_s=)``: a pool closed at the end of the test."""
    made: list[Workers] = []

    def make(*, threads: int, queued: int, timeout_s: float | None) -> Workers:
        made.append(Workers(threads=threads, queued=queued, timeout_s=timeout_s, name="test"))
        return made[-1]

    yield make
    for workers in made:
        workers.close()


def blocked_until(release: threading.Event, ran: list[str], name: str) -> Callable[[], str]:
    def job() -> str:
        ran.append(name)
        release.wait(10)
        return name

    return job


async def wait_until(condition: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "the condition never held"
        await asyncio.sleep(0.01)


async def running_job(
    workers: Workers, release: threading.Event, ran: list[str], name: str
) -> asyncio.Task[str]:
    """A job blocked until ``release``, started on ``workers``, once it runs."""
    task = asyncio.create_task(workers.run(blocked_until(release, ran, name)))
    await wait_until(lambda: name in ran)
    return task


@pytest.mark.parametrize("timeout_s", [5, None])
async def test_a_job_runs_on_a_worker_thread_and_returns_or_raises(
    pool: Callable[..., Workers], timeout_s: float | None
) -> None:
    workers = pool(threads=2, queued=0, timeout_s=timeout_s)
    assert await workers.run(threading.get_ident) != threading.get_ident()

    def failing() -> None:
        raise ValueError("bad schema")

    with pytest.raises(ValueError, match="bad schema"):
        await workers.run(failing)
    assert workers.in_pool == 0


async def test_a_full_pool_refuses_at_once(
    pool: Callable[..., Workers], release: threading.Event
) -> None:
    workers = pool(threads=1, queued=1, timeout_s=5)
    ran: list[str] = []
    running = await running_job(workers, release, ran, "a")
    waiting = asyncio.create_task(workers.run(blocked_until(release, ran, "b")))
    await wait_until(lambda: workers.in_pool == 2)
    with pytest.raises(WorkRefused) as refused:
        await workers.run(blocked_until(release, ran, "c"))
    assert refused.value.reason == "busy"
    release.set()
    assert await asyncio.gather(running, waiting) == ["a", "b"]
    assert ran == ["a", "b"]


async def test_a_job_that_waits_past_its_deadline_never_runs(
    pool: Callable[..., Workers], release: threading.Event
) -> None:
    workers = pool(threads=1, queued=1, timeout_s=0.3)
    ran: list[str] = []
    first = await running_job(workers, release, ran, "a")
    with pytest.raises(WorkRefused) as refused:
        await workers.run(blocked_until(release, ran, "b"))
    assert refused.value.reason == "busy"
    with pytest.raises(WorkRefused) as abandoned:
        await first
    assert abandoned.value.reason == "timeout"
    release.set()
    await wait_until(lambda: workers.in_pool == 0)
    assert ran == ["a"]


async def test_an_abandoned_job_keeps_its_thread_until_it_ends(
    pool: Callable[..., Workers], release: threading.Event
) -> None:
    workers = pool(threads=1, queued=0, timeout_s=0.2)
    ran: list[str] = []
    with pytest.raises(WorkRefused) as abandoned:
        await workers.run(blocked_until(release, ran, "a"))
    assert abandoned.value.reason == "timeout"
    # Still running: it counts, so the pool refuses more work.
    assert workers.in_pool == 1
    with pytest.raises(WorkRefused) as refused:
        await workers.run(lambda: "b")
    assert refused.value.reason == "busy"
    release.set()
    await wait_until(lambda: workers.in_pool == 0)
    assert await workers.run(lambda: "c") == "c"


@pytest.mark.parametrize("timeout_s", [5, None])
async def test_a_caller_that_leaves_drops_its_waiting_job(
    pool: Callable[..., Workers], release: threading.Event, timeout_s: float | None
) -> None:
    workers = pool(threads=1, queued=1, timeout_s=timeout_s)
    ran: list[str] = []
    first = await running_job(workers, release, ran, "a")
    second = asyncio.create_task(workers.run(blocked_until(release, ran, "b")))
    await wait_until(lambda: workers.in_pool == 2)
    second.cancel()
    with pytest.raises(asyncio.CancelledError):
        await second
    release.set()
    assert await first == "a"
    await wait_until(lambda: workers.in_pool == 0)
    assert ran == ["a"]


def _run_in_child(workers: Workers) -> int:
    """Fork; the child runs one job on ``workers`` (at most 10 s) and exits 0 when it
    ran, 1 when it waited that long, 2 on anything else. The child's exit status."""

    async def one_job() -> str:
        async with asyncio.timeout(10):
            return await workers.run(lambda: "ran in the child")

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # forking with threads
        pid = os.fork()
    if pid == 0:  # the child: never return into the test runner
        code = 2
        try:
            code = 0 if asyncio.run(one_job()) == "ran in the child" else 2
        except TimeoutError:
            code = 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
async def test_a_forked_child_starts_its_own_threads(
    pool: Callable[..., Workers], release: threading.Event
) -> None:
    """A fork copies none of the pool's threads: the child's first job must not wait
    for them (the default pool of async streams is shared by a whole process)."""
    workers = pool(threads=1, queued=1, timeout_s=None)
    assert await workers.run(lambda: "parent") == "parent"  # the parent's thread runs
    assert await asyncio.to_thread(_run_in_child, workers) == 0
    assert await workers.run(lambda: "parent again") == "parent again"
