"""A resume with the id of a finished stream's terminal message (``done`` or ``error``)
is answered ``204`` with no body, at once, on both stores, by the gateway and by the
route helper: an ``EventSource`` reconnects whenever the server closes the connection,
and an empty ``200`` had it reconnect forever (on Redis each time after a whole
``XREAD BLOCK``); ``204`` ends it. A resume from an earlier id still gets the rest."""

from __future__ import annotations

import json
import uuid

import httpx
import openai
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

import slotflight
from slotflight.testing import AppServer, Reply, ScriptedServer
from slotflight.web import (
    EventStore,
    MemoryEventStore,
    RedisEventStore,
    StreamTail,
    slot_event_response,
)
from tests.redis_support import redis_url  # noqa: F401 - the fixture
from tests.test_web_resume_beyond import finished_stream
from tests.test_web_resume_round_trips import _CountingRedis, _on_stream
from tests.test_web_store import StoreFactory, event, make_store  # noqa: F401 - the fixture
from tests.web_support import (
    TRIAGE_BODY,
    TRIAGE_SCHEMA,
    event_ids,
    gateway_on,
    live_stream,
    post_triage,
    triage_frames,
)


def counting_store(url: str) -> RedisEventStore:
    """A Redis store (which closes its client) whose client counts its round trips
    (``client.trips``), blocking for a second, the default."""
    client = _CountingRedis.from_url(url)
    assert isinstance(client, _CountingRedis)
    client.trips = []
    return RedisEventStore(client, prefix=f"test-{uuid.uuid4().hex}:", owns_client=True)


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
def gateway_store(request: pytest.FixtureRequest) -> EventStore:
    """A store for a gateway (which closes it); the Redis one counts its round trips."""
    if request.param == "memory":
        return MemoryEventStore()
    return counting_store(request.getfixturevalue("redis_url"))


async def test_the_tail_says_whether_the_stream_finished(
    make_store: StoreFactory,  # noqa: F811 - the fixture
) -> None:
    store = make_store()
    await store.create("s")
    assert await store.tail("s") == StreamTail(0, False)
    await store.append("s", event(1))
    assert await store.tail("s") == StreamTail(1, False)
    await store.append("s", event(2, "done"))
    assert await store.tail("s") == StreamTail(2, True)
    assert await store.last_id("s") == 2
    assert await store.tail("other") is None

    await store.create("ended")
    await store.append("ended", event(1))
    assert await store.end("ended", json.dumps({"type": "error"}))
    assert await store.tail("ended") == StreamTail(2, True)


async def test_following_a_finished_stream_from_its_end_reads_nothing(
    make_store: StoreFactory,  # noqa: F811 - the fixture
) -> None:
    store = await finished_stream(make_store())
    assert [e async for e in store.follow("s", 3)] == []
    assert [e.id async for e in store.follow("s", 1)] == [2, 3]


@pytest.mark.redis
async def test_a_redis_follow_from_the_end_sends_no_blocking_read(
    redis_url: str,  # noqa: F811
) -> None:
    store = counting_store(redis_url)
    client = store.client
    assert isinstance(client, _CountingRedis)
    try:
        await store.create("s")
        await store.append("s", event(1))
        await store.append("s", event(2, "done"))
        client.trips.clear()
        assert [e async for e in store.follow("s", 2)] == []
        assert _on_stream(client.trips, "s") == [["GET", "HGET"]]
    finally:
        await store.aclose()


async def test_the_gateway_answers_204_to_a_resume_at_the_terminal_message(
    gateway_store: EventStore,
) -> None:
    async with gateway_on(gateway_store) as (upstream, client):
        posted = await post_triage(upstream, client)
        location = posted.headers["location"]
        stream_id = posted.headers["slot-stream-id"]
        sent = event_ids(posted.text)
        last = sent[-1]
        trips = getattr(getattr(gateway_store, "client", None), "trips", [])

        trips.clear()
        by_header = await client.get(location, headers={"Last-Event-ID": str(last)})
        by_query = await client.get(location, params={"last_event_id": last})
        for ended in (by_header, by_query):
            assert (ended.status_code, ended.content) == (204, b"")
        if isinstance(gateway_store, RedisEventStore):  # one read each, no XREAD
            assert _on_stream(trips, stream_id) == [["GET", "HGET"]] * 2

        rest = await client.get(location, headers={"Last-Event-ID": str(sent[-3])})
        assert rest.status_code == 200
        assert event_ids(rest.text) == sent[-2:]
        assert "event: done" in rest.text
        whole = await client.get(location)
        assert event_ids(whole.text) == sent


async def test_a_stream_that_ended_with_error_answers_204_at_its_end(
    gateway_store: EventStore,
) -> None:
    async with gateway_on(gateway_store) as (upstream, client):
        upstream.add(Reply("", status=500))
        posted = await client.post("/v1/slot-streams", json=TRIAGE_BODY)
        assert "event: error" in posted.text
        last = event_ids(posted.text)[-1]
        ended = await client.get(posted.headers["location"], headers={"Last-Event-ID": str(last)})
        assert (ended.status_code, ended.content) == (204, b"")


async def test_a_live_stream_resumed_at_its_last_message_streams_on(
    gateway_store: EventStore,
) -> None:
    async with (
        gateway_on(gateway_store) as (upstream, client),
        live_stream(upstream, client) as (location, first),
        client.stream("GET", location, headers={"Last-Event-ID": first}) as live,
    ):
        assert live.status_code == 200
        assert live.headers["content-type"].startswith("text/event-stream")


def helper_app(upstream: ScriptedServer, *, with_request: bool) -> Starlette:
    """A GET route made with the route helper, as an ``EventSource`` would read it."""
    model = openai.AsyncOpenAI(base_url=upstream.base_url, api_key="unused", max_retries=0)

    async def triage(request: Request) -> Response:
        stream = slotflight.astream(
            model,
            model="scripted",
            messages=[{"role": "user", "content": "The export fails."}],
            output=TRIAGE_SCHEMA,
            max_attempts=1,
        )
        if with_request:
            return slot_event_response(stream, request=request)
        return slot_event_response(stream)

    return Starlette(routes=[Route("/triage", triage, methods=["GET"])])


async def test_the_route_helper_answers_204_to_a_reconnection() -> None:
    async with (
        ScriptedServer() as upstream,
        AppServer(helper_app(upstream, with_request=True)) as app,
    ):
        upstream.add(Reply(triage_frames(), chunks=6), Reply(triage_frames(), chunks=6))
        async with httpx.AsyncClient(base_url=app.url, timeout=30) as client:
            first = await client.get("/triage")
            assert first.status_code == 200 and "event: done" in first.text
            for after in (event_ids(first.text)[-1], 1):
                again = await client.get("/triage", headers={"Last-Event-ID": str(after)})
                assert (again.status_code, again.content) == (204, b"")
            assert len(upstream.requests) == 1, "a reconnection asked the model again"
