"""The SSE route helper over real HTTP: a Starlette app on uvicorn streaming
``astream(...)`` against the scripted upstream, read with httpx and httpx-sse."""

from __future__ import annotations

import asyncio
import datetime
import json
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import httpx
import openai
import pytest
from httpx_sse import aconnect_sse
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from slotflight.assemble.assembler import Assembler
from slotflight.assemble.events import Event, SlotComplete
from slotflight.client.async_stream import astream
from slotflight.plan.compiler import compile as compile_schema
from slotflight.testing import AppServer, Reply, ScriptedServer
from slotflight.web import encode_events, slot_event_response
from tests.web_support import TRIAGE_SCHEMA, TRIAGE_VALUE, apply_messages, triage_frames

MESSAGES = [{"role": "user", "content": "Triage this ticket."}]


async def _broken_stream() -> AsyncGenerator[Event, None]:
    yield SlotComplete(1, "summary", "/summary", None, 1, (), "ok")
    raise RuntimeError("boom")


async def _unfinished_stream() -> AsyncGenerator[Event, None]:
    yield SlotComplete(1, "summary", "/summary", None, 1, (), "ok")


async def _dated_stream() -> AsyncGenerator[Event, None]:
    from slotflight.assemble.events import Done, PatchOp

    when = datetime.date(2025, 7, 1)
    op = PatchOp("add", "/due", when)
    yield SlotComplete(1, "due", "/due", None, 1, (op,), when)
    yield Done(1, {"due": when})


def helper_app(upstream: ScriptedServer) -> Starlette:
    client = openai.AsyncOpenAI(base_url=upstream.base_url, api_key="test", max_retries=0)

    async def triage(request: Request) -> Response:
        query = request.query_params
        stream = astream(
            client,
            model="scripted",
            messages=MESSAGES,
            output=TRIAGE_SCHEMA,
            max_attempts=int(query.get("attempts", "1")),
        )
        options: dict[str, Any] = {}
        if "mode" in query:
            options["state_mode"] = query["mode"]
        if "coalesce" in query:
            options["coalesce_ms"] = float(query["coalesce"])
        return slot_event_response(stream, **options)

    async def special(request: Request) -> Response:
        sources = {
            "broken": _broken_stream,
            "unfinished": _unfinished_stream,
            "dated": _dated_stream,
        }
        mode = "patch" if request.query_params.get("mode") == "patch" else "full"
        return slot_event_response(sources[request.path_params["name"]](), state_mode=mode)

    return Starlette(
        routes=[
            Route("/triage", triage, methods=["POST"]),
            Route("/special/{name}", special, methods=["POST"]),
        ]
    )


@pytest.fixture
async def upstream() -> AsyncIterator[ScriptedServer]:
    async with ScriptedServer() as server:
        yield server


@pytest.fixture
async def app_url(upstream: ScriptedServer) -> AsyncIterator[str]:
    async with AppServer(helper_app(upstream)) as server:
        yield server.url


async def read_stream(url: str) -> list[Any]:
    async with httpx.AsyncClient(timeout=30) as client, aconnect_sse(client, "POST", url) as source:
        assert source.response.headers["content-type"].startswith("text/event-stream")
        return [message async for message in source.aiter_sse()]


def payloads(messages: list[Any]) -> list[dict[str, Any]]:
    return [json.loads(m.data) for m in messages]


async def test_events_have_types_ids_and_full_state(upstream: ScriptedServer, app_url: str) -> None:
    upstream.add(Reply(triage_frames(), chunks=5))
    messages = await read_stream(f"{app_url}/triage?mode=full&coalesce=0")
    data = payloads(messages)

    assert [int(m.id) for m in messages] == list(range(1, len(messages) + 1))
    assert messages[0].retry is not None and messages[0].retry > 0
    assert [m.event for m in messages] == [d["type"] for d in data]
    assert messages[-1].event == "done"
    assert data[-1]["value"] == TRIAGE_VALUE
    assert all("state" in d and "patch" not in d for d in data)
    assert data[-1]["state"] == TRIAGE_VALUE
    deltas = [d for d in data if d["type"] == "slot-delta" and d["slot"] == "summary"]
    assert deltas, "the summary streams as deltas"
    first = deltas[0]
    assert set(first) >= {"type", "slot", "path", "value", "state"}
    assert first["path"] == "/summary"
    assert first["state"]["summary"] == first["value"]
    assert TRIAGE_VALUE["summary"].startswith(first["value"])
    # Scalars appear in state only with their slot-complete.
    priority_at = next(
        i
        for i, d in enumerate(data)
        if d.get("path") == "/priority" and d["type"] == "slot-complete"
    )
    assert all("priority" not in d["state"] for d in data[:priority_at])
    assert all(d["state"]["priority"] == 2 for d in data[priority_at:])


async def test_patch_mode_is_the_default_and_rebuilds_the_state(
    upstream: ScriptedServer, app_url: str
) -> None:
    upstream.add(Reply(triage_frames(), chunks=3))
    data = payloads(await read_stream(f"{app_url}/triage?coalesce=0"))

    assert data[-1]["type"] == "done"
    assert "value" not in data[-1]  # the final object is ``state``
    for index, message in enumerate(data):
        if message["type"] in ("done", "error"):
            assert "state" in message
        if message["type"] in ("slot-start", "slot-delta", "slot-failed", "retry"):
            assert "state" not in message
        if "state" in message:
            assert apply_messages(data[: index + 1]) == message["state"]
    completes = [d for d in data if d["type"] == "slot-complete"]
    assert "state" in completes[0]  # the first slot-complete always carries a snapshot
    assert apply_messages(data) == TRIAGE_VALUE == data[-1]["state"]
    # Scalars are reported with their value; the streamed summary is not repeated.
    by_path = {d["path"]: d for d in completes}
    assert by_path["/priority"]["value"] == 2
    assert "value" not in by_path["/summary"] and "patch" not in by_path["/summary"]


async def test_coalescing_merges_deltas_without_losing_text(
    upstream: ScriptedServer, app_url: str
) -> None:
    text = triage_frames()
    upstream.add(Reply(text, chunks=2, chunk_delay=0.004), Reply(text, chunks=2, chunk_delay=0.004))
    plain = payloads(await read_stream(f"{app_url}/triage?mode=full&coalesce=0"))
    merged = payloads(await read_stream(f"{app_url}/triage?mode=full&coalesce=250"))

    def deltas(data: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [d for d in data if d["type"] == "slot-delta"]

    assert len(deltas(merged)) < len(deltas(plain))
    for data in (plain, merged):
        summary = "".join(d["delta"] for d in deltas(data) if d["path"] == "/summary")
        assert summary == TRIAGE_VALUE["summary"]
    # Non-delta events are neither dropped nor reordered.
    assert [d["type"] for d in merged if d["type"] != "slot-delta"] == [
        d["type"] for d in plain if d["type"] != "slot-delta"
    ]
    # A merged delta still reports the full value so far, consistent with its state.
    for d in deltas(merged):
        if d["path"] == "/summary":
            assert d["value"] == d["state"]["summary"]
    assert merged[-1]["state"] == TRIAGE_VALUE


async def test_patch_mode_with_coalescing_rebuilds_the_state(
    upstream: ScriptedServer, app_url: str
) -> None:
    upstream.add(Reply(triage_frames(), chunks=2, chunk_delay=0.003))
    data = payloads(await read_stream(f"{app_url}/triage?mode=patch&coalesce=100"))
    assert apply_messages(data) == TRIAGE_VALUE == data[-1]["state"]


async def test_upstream_failure_ends_with_an_error_event(
    upstream: ScriptedServer, app_url: str
) -> None:
    upstream.add(Reply(status=500, error_message="model crashed"))
    messages = await read_stream(f"{app_url}/triage")
    assert messages[-1].event == "error"
    error = json.loads(messages[-1].data)["error"]
    assert error["code"] == "upstream_status"
    assert [m.event for m in messages].count("error") == 1


async def test_invalid_output_ends_with_an_error_event(
    upstream: ScriptedServer, app_url: str
) -> None:
    upstream.add(Reply(triage_frames({**TRIAGE_VALUE, "priority": "high"})))
    data = payloads(await read_stream(f"{app_url}/triage"))
    assert data[-1]["type"] == "error"
    assert data[-1]["error"]["code"] == "output_invalid"
    assert any(d["type"] == "slot-failed" and d["path"] == "/priority" for d in data)


async def test_exception_in_stream_becomes_error_event(app_url: str) -> None:
    messages = await read_stream(f"{app_url}/special/broken?mode=patch")
    assert [m.event for m in messages] == ["slot-complete", "error"]
    error = json.loads(messages[-1].data)
    assert error["error"]["code"] == "internal_error"
    assert error["state"] == {}  # the slot-complete carried no patch


async def test_stream_without_terminal_event_gets_one(app_url: str) -> None:
    messages = await read_stream(f"{app_url}/special/unfinished")
    assert messages[-1].event == "error"
    assert json.loads(messages[-1].data)["error"]["code"] == "incomplete"


async def test_dates_serialise(app_url: str) -> None:
    data = payloads(await read_stream(f"{app_url}/special/dated"))
    assert data[0]["value"] == "2025-07-01"
    assert data[-1] == {
        "type": "done",
        "attempt": 1,
        "value": {"due": "2025-07-01"},
        "state": {"due": "2025-07-01"},
    }


async def test_client_disconnect_closes_the_upstream_request(
    upstream: ScriptedServer, app_url: str
) -> None:
    # The upstream sends the summary's first bytes, then nothing until the client leaves.
    upstream.add(Reply(triage_frames(), chunks=4, stall_after_bytes=20))
    seen = []
    async with (
        httpx.AsyncClient(timeout=30) as client,
        aconnect_sse(client, "POST", f"{app_url}/triage") as source,
    ):
        async for message in source.aiter_sse():
            seen.append(message.event)
            if message.event == "slot-delta":
                break
    assert seen[0] == "slot-start"
    record = await _wait_disconnect(upstream)
    assert record.disconnected and not record.completed


async def _wait_disconnect(upstream: ScriptedServer) -> Any:
    import asyncio

    return await asyncio.to_thread(upstream.wait_for_disconnect, 0, 3.0)


async def test_patch_mode_deltas_carry_only_the_appended_text(
    upstream: ScriptedServer, app_url: str
) -> None:
    upstream.add(Reply(triage_frames(), chunks=4))
    data = payloads(await read_stream(f"{app_url}/triage?coalesce=0"))
    deltas = [d for d in data if d["type"] == "slot-delta"]
    assert len(deltas) > 3
    for d in deltas:
        assert "value" not in d and "state" not in d and "patch" not in d
        assert 0 < len(d["delta"]) <= 8  # a 4-character chunk, plus held-back blanks
    assert apply_messages(data) == TRIAGE_VALUE


async def test_patch_mode_bytes_grow_linearly_with_the_value(
    upstream: ScriptedServer, app_url: str
) -> None:
    """Doubling a streamed string doubles the stream's bytes, every delta sent."""

    def reply(length: int) -> Reply:
        value = {**TRIAGE_VALUE, "summary": ("lorem ipsum " * length)[:length].strip() + "."}
        return Reply(triage_frames(value), chunks=4)

    sizes: dict[int, int] = {}
    for length in (2000, 4000):
        upstream.add(reply(length))
        messages = await read_stream(f"{app_url}/triage?mode=patch&coalesce=0")
        assert messages[-1].event == "done"
        sizes[length] = sum(len(m.data) for m in messages)
    assert sizes[4000] / sizes[2000] < 2.2


async def test_a_held_delta_goes_out_when_its_window_ends_while_the_source_is_silent() -> None:
    """The coalescing window ends on its own: the held delta is sent while the source
    still waits for its next chunk (no event has to come to push it out)."""
    text = triage_frames()
    begin = text.index(TRIAGE_VALUE["summary"])
    start = begin + 4
    resume = asyncio.Event()

    async def source() -> AsyncGenerator[Event, None]:
        assembler = Assembler(compile_schema(TRIAGE_SCHEMA))
        for piece in (text[:start], text[start : start + 3], text[start + 3 : start + 6]):
            for event in assembler.feed(piece):
                yield event
        await resume.wait()  # silent until the held delta has gone out
        for event in [*assembler.feed(text[start + 6 :]), *assembler.close()]:
            yield event

    received: list[dict[str, Any]] = []
    async with asyncio.timeout(5):
        async for wire in encode_events(source(), coalesce_ms=50):
            received.append(json.loads(wire.data))
            deltas = [d.get("delta", "") for d in received if d.get("path") == "/summary"]
            if "".join(deltas) == text[begin : start + 6]:
                resume.set()
    assert resume.is_set()
    assert received[-1]["type"] == "done" and received[-1]["state"] == TRIAGE_VALUE
    deltas = [d for d in received if d["type"] == "slot-delta" and d["path"] == "/summary"]
    assert "".join(d["delta"] for d in deltas) == TRIAGE_VALUE["summary"]
