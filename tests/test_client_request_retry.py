"""A failed request sent again under the stream's timeouts (real HTTP, the real ``openai``
client): with ``timeout`` or ``idle_timeout`` set, the stream retries what the client
would have retried, as often as its ``max_retries``, while the wait fits the limits."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import httpx2
import openai
import pytest

from slotflight._errors import (
    StreamClosed,
    UpstreamDisconnected,
    UpstreamStatusError,
)
from slotflight.client.async_stream import astream
from slotflight.client.request_retry import MAX_RETRY_AFTER, retry_delay
from slotflight.client.sync_stream import stream
from slotflight.testing import Reply, ScriptedServer
from tests.client_support import MESSAGES, TRIAGE, Triage, close_while_reading, frames

TEXT = frames(TRIAGE)
BAD = "not a slot frame at all\n"  # a first pass whose every slot is missing

# -- through the stream ---------------------------------------------------------------------


@pytest.mark.parametrize("option", ["timeout", "idle_timeout"])
def test_sync_a_503_is_sent_again_within_the_timeouts(option: str) -> None:
    replies = [
        Reply(status=503, retry_after=0.01),
        Reply(status=429, retry_after=0.01),
        Reply(TEXT),
    ]
    with ScriptedServer(replies) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="t")  # max_retries=2
        options: dict[str, Any] = {option: 30.0}
        with stream(client, model="m", messages=MESSAGES, output=Triage, **options) as s:
            assert s.final() == TRIAGE
        assert len(server.requests) == 3


@pytest.mark.parametrize("option", ["timeout", "idle_timeout"])
async def test_async_a_503_is_sent_again_within_the_timeouts(option: str) -> None:
    replies = [Reply(status=503, retry_after=0.01), Reply(status=500), Reply(TEXT)]
    async with ScriptedServer(replies) as server:
        client = openai.AsyncOpenAI(base_url=server.base_url, api_key="t")
        options: dict[str, Any] = {option: 30.0}
        async with astream(client, model="m", messages=MESSAGES, output=Triage, **options) as s:
            assert await s.final() == TRIAGE
        assert len(server.requests) == 3


def test_no_more_retries_than_the_clients_max_retries() -> None:
    replies = [Reply(status=503, retry_after=0.01)] * 3 + [Reply(TEXT)]
    with ScriptedServer(replies) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="t", max_retries=1)
        with (
            stream(client, model="m", messages=MESSAGES, output=Triage, timeout=30) as s,
            pytest.raises(UpstreamStatusError) as raised,
        ):
            s.final()
        assert raised.value.status_code == 503
        assert len(server.requests) == 2


def test_max_retries_zero_sends_once() -> None:
    with ScriptedServer([Reply(status=503, retry_after=0.01), Reply(TEXT)]) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="t", max_retries=0)
        with (
            stream(client, model="m", messages=MESSAGES, output=Triage, timeout=30) as s,
            pytest.raises(UpstreamStatusError),
        ):
            s.final()
        assert len(server.requests) == 1


@pytest.mark.parametrize("status", [400, 401, 404, 422])
def test_a_client_error_is_not_sent_again(status: int) -> None:
    with ScriptedServer([Reply(status=status), Reply(TEXT)]) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="t")
        with (
            stream(client, model="m", messages=MESSAGES, output=Triage, timeout=30) as s,
            pytest.raises(UpstreamStatusError) as raised,
        ):
            s.final()
        assert raised.value.status_code == status
        assert len(server.requests) == 1


@pytest.mark.parametrize(
    ("retry_after", "limit"),
    [(6.0, {"timeout": 10.0}), (2.0, {"idle_timeout": 1.0})],
    ids=["longer-than-half-the-time-left", "longer-than-the-idle-timeout"],
)
def test_a_wait_that_does_not_fit_is_not_waited(
    retry_after: float, limit: dict[str, float]
) -> None:
    with ScriptedServer([Reply(status=503, retry_after=retry_after), Reply(TEXT)]) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="t")
        with (
            stream(client, model="m", messages=MESSAGES, output=Triage, **limit) as s,
            pytest.raises(UpstreamStatusError),
        ):
            s.final()
        assert len(server.requests) == 1


def test_a_follow_up_request_is_retried_too() -> None:
    def run(replies: list[Reply]) -> tuple[Triage, int, list[Any]]:
        with ScriptedServer(replies) as server:
            client = openai.OpenAI(base_url=server.base_url, api_key="t", max_retries=1)
            with stream(client, model="m", messages=MESSAGES, output=Triage, timeout=30) as s:
                return s.final(), s.attempt, [r.body for r in server.requests]

    plain, attempts, bodies = run([Reply(BAD), Reply(TEXT)])
    retried, retried_attempts, retried_bodies = run(
        [Reply(BAD), Reply(status=502, retry_after=0.01), Reply(TEXT)]
    )
    assert (retried, retried_attempts) == (plain, attempts) == (plain, 2)
    assert retried_bodies == [bodies[0], bodies[1], bodies[1]]  # the same follow-up again


@contextlib.contextmanager
def _hanging_up() -> Iterator[tuple[str, list[int]]]:
    """A server that accepts each connection and closes it before answering; the
    base URL and how many connections it took."""
    accepted: list[int] = []
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                continue
            accepted.append(1)
            connection.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1", accepted
    finally:
        stop.set()
        thread.join(5)
        listener.close()


def test_a_connection_that_breaks_before_the_answer_is_retried() -> None:
    with _hanging_up() as (base_url, accepted):
        client = openai.OpenAI(base_url=base_url, api_key="t", max_retries=2)
        with (
            stream(client, model="m", messages=MESSAGES, output=Triage, timeout=30) as s,
            pytest.raises(UpstreamDisconnected),
        ):
            s.final()
        assert len(accepted) == 3


def test_sync_close_during_the_wait_ends_the_stream() -> None:
    with ScriptedServer([Reply(status=503, retry_after=20.0), Reply(TEXT)]) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="t")
        s = stream(client, model="m", messages=MESSAGES, output=Triage, timeout=60)
        errors = close_while_reading(s, server)  # waiting to send the request again
        assert len(errors) == 1 and isinstance(errors[0], StreamClosed), errors
        assert len(server.requests) == 1


async def test_async_close_during_the_wait_ends_the_stream() -> None:
    async with ScriptedServer([Reply(status=503, retry_after=20.0), Reply(TEXT)]) as server:
        client = openai.AsyncOpenAI(base_url=server.base_url, api_key="t")
        s = astream(client, model="m", messages=MESSAGES, output=Triage, timeout=60)
        task = asyncio.create_task(s.final())
        await asyncio.to_thread(server.wait_for, lambda r: len(r) == 1)
        await asyncio.sleep(0)
        await s.close()
        with pytest.raises(StreamClosed):
            await asyncio.wait_for(task, 10)
        assert len(server.requests) == 1


# -- the rule ------------------------------------------------------------------------------


def _status(status: int, **headers: str) -> openai.APIStatusError:
    request = httpx2.Request("POST", "http://127.0.0.1/v1/chat/completions")
    response = httpx2.Response(status, headers=headers, request=request)
    return openai.APIStatusError("failed", response=response, body=None)


def _never() -> float:
    raise AssertionError("no jitter expected")


@pytest.mark.parametrize("status", [408, 409, 429, 500, 502, 503, 504, 599])
def test_the_statuses_the_openai_client_retries_are_retried(status: int) -> None:
    assert retry_delay(_status(status), 0, jitter=lambda: 0.0) == 0.5


@pytest.mark.parametrize("status", [400, 401, 403, 404, 413, 422])
def test_other_statuses_are_not(status: int) -> None:
    assert retry_delay(_status(status), 0, jitter=_never) is None


def test_the_server_can_say_whether_to_retry() -> None:
    assert retry_delay(_status(400, **{"x-should-retry": "true"}), 0, jitter=lambda: 0.0) == 0.5
    assert retry_delay(_status(503, **{"x-should-retry": "false"}), 0, jitter=_never) is None


def test_the_backoff_doubles_up_to_eight_seconds_less_a_quarter_at_most() -> None:
    error = _status(503)
    assert [retry_delay(error, n, jitter=lambda: 0.0) for n in range(6)] == [
        0.5,
        1.0,
        2.0,
        4.0,
        8.0,
        8.0,
    ]
    assert retry_delay(error, 10**9, jitter=lambda: 1.0) == 6.0
    assert retry_delay(error, 1, jitter=lambda: 1.0) == 0.75


def test_the_servers_wait_is_honoured_up_to_sixty_seconds() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    at = lambda seconds: format_datetime(now + timedelta(seconds=seconds), usegmt=True)  # noqa: E731
    clock = now.timestamp
    cases: list[tuple[dict[str, str], float | None]] = [
        ({"retry-after": "3"}, 3.0),
        ({"retry-after": "2.5"}, 2.5),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
        ({"retry-after": at(12)}, 12.0),
        ({"retry-after": str(MAX_RETRY_AFTER)}, MAX_RETRY_AFTER),
        ({"retry-after": "61"}, None),  # longer than honoured: not retried at all
        ({"retry-after": at(3600)}, None),
        ({"retry-after": "1e999"}, None),
        ({"retry-after": "inf"}, None),
    ]
    for headers, expected in cases:
        assert retry_delay(_status(429, **headers), 0, jitter=_never, now=clock) == expected, (
            headers
        )
    for unread in (
        {"retry-after": "soon"},
        {"retry-after": "nan"},
        {"retry-after": "0"},
        {"retry-after": "-4"},
        {"retry-after": at(-30)},
    ):
        assert retry_delay(_status(429, **unread), 2, jitter=lambda: 0.0, now=clock) == 2.0, unread


def test_timeouts_and_foreign_errors_are_not_retried() -> None:
    request = httpx2.Request("POST", "http://127.0.0.1/v1/chat/completions")
    assert retry_delay(openai.APITimeoutError(request=request), 0, jitter=_never) is None
    assert retry_delay(TimeoutError(), 0, jitter=_never) is None
    assert retry_delay(ValueError("x"), 0, jitter=_never) is None
    dropped = openai.APIConnectionError(request=request)
    assert retry_delay(dropped, 0, jitter=lambda: 0.0) == 0.5
