"""A resume on the Redis store costs two round trips on the stream's keys: one reading
its last id (which also says that it is retained) before the response starts, one
reading the messages after ``Last-Event-ID``. The id is not read a second time."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis
from httpx_sse import aconnect_sse
from redis.asyncio.client import Pipeline

from slotflight.testing import AppServer, Reply, ScriptedServer
from slotflight.web import RedisEventStore, create_app
from tests.redis_support import redis_url  # noqa: F401 - the fixture
from tests.web_support import TRIAGE_BODY, triage_frames

pytestmark = pytest.mark.redis


def _texts(args: tuple[Any, ...]) -> tuple[str, ...]:
    return tuple(a.decode() if isinstance(a, bytes) else str(a) for a in args)


class _CountingPipeline(Pipeline):
    trips: list[list[tuple[str, ...]]]

    async def execute(self, raise_on_error: bool = True) -> list[Any]:
        self.trips.append([_texts(args) for args, _ in self.command_stack])
        return await super().execute(raise_on_error)


class _CountingRedis(aioredis.Redis):
    """Records each round trip: the commands of one call or one pipeline."""

    trips: list[list[tuple[str, ...]]]

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        self.trips.append([_texts(args)])
        return await super().execute_command(*args, **options)  # type: ignore[no-untyped-call]

    def pipeline(self, transaction: bool = True, shard_hint: str | None = None) -> Pipeline:
        pipe = _CountingPipeline(
            self.connection_pool, self.response_callbacks, transaction, shard_hint
        )
        pipe.trips = self.trips
        return pipe


def _on_stream(trips: list[list[tuple[str, ...]]], stream_id: str) -> list[list[str]]:
    """The commands of the round trips on the stream's messages (not the presence
    marks readers renew meanwhile)."""
    return [
        [command[0].upper() for command in trip]
        for trip in trips
        if any(stream_id in arg and not arg.endswith(":readers") for c in trip for arg in c)
    ]


async def test_a_resume_reads_the_last_id_once(redis_url: str) -> None:  # noqa: F811
    client = _CountingRedis.from_url(redis_url)
    assert isinstance(client, _CountingRedis)
    client.trips = []
    # The app runs on a loop of its own and closes the store, and so its client.
    store = RedisEventStore(
        client, prefix=f"test-{uuid.uuid4().hex}:", block_ms=200, owns_client=True
    )
    async with ScriptedServer() as upstream:
        upstream.add(Reply(triage_frames(), chunks=40))
        async with (
            AppServer(create_app(upstream.base_url, store=store)) as app,
            httpx.AsyncClient(base_url=app.url, timeout=30) as http,
        ):
            async with aconnect_sse(http, "POST", "/v1/slot-streams", json=TRIAGE_BODY) as source:
                stream_id = source.response.headers["slot-stream-id"]
                first = [message async for message in source.aiter_sse()]
            assert first[-1].event == "done"
            location = f"/v1/slot-streams/{stream_id}/events"

            client.trips.clear()
            async with aconnect_sse(
                http, "GET", location, headers={"Last-Event-ID": first[1].id}
            ) as source:
                assert source.response.status_code == 200
                rest = [message async for message in source.aiter_sse()]
            resumed = _on_stream(client.trips, stream_id)

            client.trips.clear()
            beyond = await http.get(location, headers={"Last-Event-ID": str(len(first) + 1)})
            refused = _on_stream(client.trips, stream_id)

            client.trips.clear()
            gone = await http.get(
                f"/v1/slot-streams/{uuid.uuid4().hex}/events", headers={"Last-Event-ID": "3"}
            )

    assert [m.id for m in rest] == [m.id for m in first[2:]]
    assert len(resumed) == 2, resumed  # the last id (and retained), then the messages
    assert resumed[-1] == ["XREAD"]
    assert (beyond.status_code, beyond.json()["error"]["code"]) == (400, "invalid_last_event_id")
    assert len(refused) == 1, refused
    assert gone.status_code == 404
