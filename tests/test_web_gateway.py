"""The gateway over real HTTP: uvicorn on 127.0.0.1, the scripted upstream, httpx."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import httpx
import pytest
from httpx_sse import aconnect_sse

from slotflight.testing import AppServer, Reply, ScriptedServer
from slotflight.web import RequestLimits, create_app
from tests.web_support import (
    TRIAGE_SCHEMA,
    TRIAGE_VALUE,
    apply_messages,
    gateway_process,
    triage_frames,
)

BODY: dict[str, Any] = {
    "model": "scripted",
    "messages": [{"role": "user", "content": "The export fails. Please help."}],
    "schema": TRIAGE_SCHEMA,
    "options": {"temperature": 0.2, "max_attempts": 1},
}

#: ``gateway(**options)``: a client of a gateway app started with ``options``.
Gateway = Callable[..., AbstractAsyncContextManager[httpx.AsyncClient]]


@pytest.fixture
async def upstream() -> AsyncIterator[ScriptedServer]:
    async with ScriptedServer() as server:
        yield server


@pytest.fixture
def gateway(upstream: ScriptedServer) -> Gateway:
    @asynccontextmanager
    async def client_of(**options: Any) -> AsyncIterator[httpx.AsyncClient]:
        async with (
            AppServer(create_app(upstream.base_url, **options)) as app,
            httpx.AsyncClient(base_url=app.url, timeout=30) as client,
        ):
            yield client

    return client_of


async def collect(source: Any, limit: int | None = None) -> list[Any]:
    messages = []
    async for message in source.aiter_sse():
        messages.append(message)
        if limit is not None and len(messages) >= limit:
            break
    return messages


async def start_then_drop(client: httpx.AsyncClient, limit: int) -> tuple[str, list[Any]]:
    """POST a stream, read its first ``limit`` messages, drop the connection."""
    async with aconnect_sse(client, "POST", "/v1/slot-streams", json=BODY) as source:
        return source.response.headers["location"], await collect(source, limit=limit)


async def resume(client: httpx.AsyncClient, location: str, last_event_id: str) -> list[Any]:
    """Reconnect to ``location`` after ``last_event_id`` and read to the end."""
    async with aconnect_sse(
        client, "GET", location, headers={"Last-Event-ID": last_event_id}
    ) as source:
        return await collect(source)


async def test_post_streams_the_object_and_names_the_stream(
    upstream: ScriptedServer, gateway: Gateway
) -> None:
    upstream.add(Reply(triage_frames(), chunks=6))
    async with (
        gateway() as client,
        aconnect_sse(client, "POST", "/v1/slot-streams", json=BODY) as source,
    ):
        headers = source.response.headers
        messages = await collect(source)
    stream_id = headers["slot-stream-id"]
    assert headers["location"] == f"/v1/slot-streams/{stream_id}/events"
    assert [int(m.id) for m in messages] == list(range(1, len(messages) + 1))
    assert messages[-1].event == "done"
    assert json.loads(messages[-1].data)["state"] == TRIAGE_VALUE
    sent = upstream.request(0).body
    assert sent["model"] == "scripted" and sent["temperature"] == 0.2 and sent["stream"] is True
    assert any("The export fails" in m["content"] for m in sent["messages"])


#: A 1x1 PNG, inline.
PNG = (
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"
    "YPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)
TEXT_AND_IMAGE = [
    {"type": "text", "text": "The export fails with this dialog."},
    {"type": "image_url", "image_url": {"url": PNG, "detail": "low"}},
]


async def test_a_user_message_of_text_and_an_image_goes_upstream_as_parts(
    upstream: ScriptedServer, gateway: Gateway
) -> None:
    upstream.add(Reply(triage_frames(), chunks=6))
    body = {**BODY, "messages": [{"role": "user", "content": TEXT_AND_IMAGE}]}
    async with (
        gateway() as client,
        aconnect_sse(client, "POST", "/v1/slot-streams", json=body) as source,
    ):
        messages = await collect(source)
    assert json.loads(messages[-1].data)["state"] == TRIAGE_VALUE
    system, user = upstream.request(0).body["messages"]
    assert system["role"] == "system" and "summary" in system["content"]
    assert user == {"role": "user", "content": TEXT_AND_IMAGE}  # as sent, nothing added


def _with_content(content: Any, role: str = "user") -> bytes:
    return json.dumps({**BODY, "messages": [{"role": role, "content": content}]}).encode()


def _image(url: str) -> list[dict[str, Any]]:
    return [{"type": "image_url", "image_url": {"url": url}}]


@pytest.mark.parametrize(
    ("content", "location"),
    [
        # a URL the model server would fetch from its own network, for a stranger
        (_with_content(_image("https://example.com/a.png")), "/messages/0/content/0/image_url/url"),
        (_with_content(_image("http://169.254.169.254/x")), "/messages/0/content/0/image_url/url"),
        (
            _with_content(_image("data:image/svg+xml;base64,PHN2Zz4=")),
            "/messages/0/content/0/image_url/url",
        ),
        (
            _with_content(_image("data:image/png;base64,iVBO*w==")),
            "/messages/0/content/0/image_url/url",
        ),
        (_with_content(_image("data:image/png;base64,iVB")), "/messages/0/content/0/image_url/url"),
        (_with_content(TEXT_AND_IMAGE, role="system"), "/messages/0"),
        (_with_content([{"type": "input_audio", "input_audio": {}}]), "/messages/0/content/0"),
        (_with_content([{"type": "image_url"}]), "/messages/0/content/0/image_url"),
        (_with_content(["text"]), "/messages/0/content/0"),
        (_with_content([]), "/messages/0/content"),
        (_with_content({"text": "x"}), "/messages/0/content"),
        (_with_content([{"type": "text", "text": "x"}] * 65), "/messages/0/content"),
    ],
    ids=[
        "https-url",
        "metadata-url",
        "svg",
        "not-base64",
        "cut-base64",
        "image-in-system",
        "audio",
        "no-image-url",
        "bare-string-part",
        "no-parts",
        "object",
        "too-many-parts",
    ],
)
async def test_message_parts_the_gateway_refuses(
    upstream: ScriptedServer, gateway: Gateway, content: bytes, location: str
) -> None:
    async with gateway() as client:
        response = await client.post(
            "/v1/slot-streams", content=content, headers={"content-type": "application/json"}
        )
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "invalid_request"
    assert error["details"][0]["location"] == location
    assert error["message"].startswith(location + ": ")
    assert upstream.requests == []


async def test_state_mode_options(upstream: ScriptedServer, gateway: Gateway) -> None:
    upstream.add(Reply(triage_frames(), chunks=6), Reply(triage_frames(), chunks=6))
    full_body = {**BODY, "options": {"state_mode": "full", "coalesce_ms": 0}}
    async with gateway() as client:
        async with aconnect_sse(client, "POST", "/v1/slot-streams", json=BODY) as source:
            lean = [json.loads(m.data) for m in await collect(source)]
        async with aconnect_sse(client, "POST", "/v1/slot-streams", json=full_body) as source:
            full = [json.loads(m.data) for m in await collect(source)]
    # The default is the lean patch mode.
    deltas = [d for d in lean if d["type"] == "slot-delta"]
    assert deltas and all("delta" in d and "state" not in d for d in deltas)
    assert apply_messages(lean) == TRIAGE_VALUE == lean[-1]["state"]
    assert all("state" in d for d in full)
    summary = [
        d["value"] for d in full if d.get("path") == "/summary" and d["type"] == "slot-delta"
    ]
    assert summary[-1] == TRIAGE_VALUE["summary"]
    assert full[-1]["state"] == full[-1]["value"] == TRIAGE_VALUE


async def test_reconnect_with_last_event_id_gets_the_rest(
    upstream: ScriptedServer, gateway: Gateway
) -> None:
    upstream.add(Reply(triage_frames(), chunks=3, chunk_delay=0.02))
    async with gateway(resume_grace_s=30) as client:
        location, first = await start_then_drop(client, 5)
        rest = await resume(client, location, first[-1].id)
        async with aconnect_sse(client, "GET", f"{location}?last_event_id=0") as source:
            everything = await collect(source)

    assert [int(m.id) for m in first + rest] == list(range(1, len(first) + len(rest) + 1))
    assert rest[-1].event == "done"
    assert json.loads(rest[-1].data)["state"] == TRIAGE_VALUE
    assert [(m.id, m.event, m.data) for m in everything] == [
        (m.id, m.event, m.data) for m in first + rest
    ]
    # The stream was produced once.
    assert len(upstream.requests) == 1


async def test_disconnect_cancels_the_upstream_request(
    upstream: ScriptedServer, gateway: Gateway
) -> None:
    upstream.add(Reply(triage_frames(), chunks=4, stall_after_bytes=20))
    async with gateway(resume_grace_s=0) as client:
        location, seen = await start_then_drop(client, 2)
        record = await asyncio.to_thread(upstream.wait_for_disconnect, 0, 3.0)
        assert record.disconnected and not record.completed
        # Whoever comes back learns that the stream was abandoned.
        rest = await resume(client, location, seen[-1].id)
    assert rest[-1].event == "error"
    assert json.loads(rest[-1].data)["error"]["code"] == "abandoned"


async def test_unknown_stream_and_bad_last_event_id(gateway: Gateway) -> None:
    async with gateway() as client:
        missing = await client.get("/v1/slot-streams/nope/events")
        bad = await client.get("/v1/slot-streams/nope/events", headers={"Last-Event-ID": "x"})
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "stream_not_found"
    assert bad.status_code == 400


def _deep_schema(levels: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"x": schema}, "required": ["x"]}
    return schema


def _wide_schema(fields: int) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {f"f{i}": {"type": "string"} for i in range(fields)},
    }


@pytest.mark.parametrize(
    ("content", "status", "code"),
    [
        (b"{not json", 400, "invalid_json"),
        (b"[1, 2]", 422, "invalid_request"),
        (
            json.dumps({k: v for k, v in BODY.items() if k != "model"}).encode(),
            422,
            "invalid_request",
        ),
        (json.dumps({**BODY, "messages": []}).encode(), 422, "invalid_request"),
        (
            json.dumps({**BODY, "options": {"state_mode": "everything"}}).encode(),
            422,
            "invalid_request",
        ),
        (json.dumps({**BODY, "options": {"colour": "blue"}}).encode(), 422, "invalid_request"),
        (
            json.dumps(
                {**BODY, "schema": {"type": "object", "properties": {"a": {"type": "rainbow"}}}}
            ).encode(),
            422,
            "invalid_schema",
        ),
        (json.dumps({**BODY, "schema": _deep_schema(20)}).encode(), 413, "schema_too_large"),
        (json.dumps({**BODY, "schema": _wide_schema(30)}).encode(), 413, "schema_too_large"),
    ],
    ids=[
        "not-json",
        "not-object",
        "missing-model",
        "no-messages",
        "bad-option",
        "unknown-option",
        "invalid-schema",
        "too-deep",
        "too-many-slots",
    ],
)
async def test_bad_requests_get_clear_4xx(
    upstream: ScriptedServer, gateway: Gateway, content: bytes, status: int, code: str
) -> None:
    limits = RequestLimits(max_slots=20, max_schema_depth=24)
    async with gateway(limits=limits) as client:
        response = await client.post(
            "/v1/slot-streams", content=content, headers={"content-type": "application/json"}
        )
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == code
    assert error["message"]
    assert upstream.requests == []


async def test_error_bodies_say_where(gateway: Gateway) -> None:
    schema = {"type": "object", "properties": {"a": {"type": "rainbow"}}}
    async with gateway() as client:
        missing = await client.post("/v1/slot-streams", json={**BODY, "model": None})
        invalid = await client.post("/v1/slot-streams", json={**BODY, "schema": schema})
    assert missing.json()["error"]["details"][0]["location"] == "/model"
    assert invalid.json()["error"]["location"].startswith("/properties/a")


async def test_body_limit_is_enforced_while_reading(gateway: Gateway) -> None:
    async with gateway(limits=RequestLimits(max_body_bytes=4096)) as client:
        declared = await client.post("/v1/slot-streams", content=b"x" * 5000)
        # A chunked upload that never ends: the answer must come before the body does.
        reader, writer = await asyncio.open_connection("127.0.0.1", client.base_url.port)
        writer.write(
            b"POST /v1/slot-streams HTTP/1.1\r\nhost: test\r\n"
            b"content-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n"
        )
        for _ in range(8):
            writer.write(b"400\r\n" + b"x" * 1024 + b"\r\n")
        await writer.drain()
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        writer.close()
    assert declared.status_code == 413
    assert declared.json()["error"]["code"] == "body_too_large"
    assert head.startswith(b"HTTP/1.1 413")


async def test_token_is_required_when_configured(
    upstream: ScriptedServer, gateway: Gateway
) -> None:
    upstream.add(Reply(triage_frames()))
    async with gateway(token="s3cret") as client:
        without = await client.post("/v1/slot-streams", json=BODY)
        wrong = await client.post(
            "/v1/slot-streams", json=BODY, headers={"authorization": "Bearer guess"}
        )
        reading = await client.get("/v1/slot-streams/any/events")
        async with aconnect_sse(
            client,
            "POST",
            "/v1/slot-streams",
            json=BODY,
            headers={"authorization": "Bearer s3cret"},
        ) as source:
            status = source.response.status_code
            messages = await collect(source)
        page = await client.get("/")
    assert without.status_code == wrong.status_code == reading.status_code == 401
    assert without.json()["error"]["code"] == "unauthorized"
    assert status == 200 and messages[-1].event == "done"
    assert page.status_code == 200  # the page itself is public
    assert len(upstream.requests) == 1


async def test_cors_is_off_unless_configured(gateway: Gateway) -> None:
    preflight = {
        "origin": "https://app.example",
        "access-control-request-method": "POST",
        "access-control-request-headers": "content-type",
    }
    async with gateway() as client:
        off = await client.options("/v1/slot-streams", headers=preflight)
        off_simple = await client.get("/health", headers={"origin": "https://app.example"})
    async with gateway(cors_origins=["https://app.example"]) as client:
        on = await client.options("/v1/slot-streams", headers=preflight)
        other = await client.options(
            "/v1/slot-streams", headers={**preflight, "origin": "https://evil.example"}
        )
    assert "access-control-allow-origin" not in off.headers
    assert "access-control-allow-origin" not in off_simple.headers
    assert on.status_code == 200
    assert on.headers["access-control-allow-origin"] == "https://app.example"
    assert "access-control-allow-origin" not in other.headers


async def test_too_many_streams_is_503(upstream: ScriptedServer, gateway: Gateway) -> None:
    upstream.add(Reply(triage_frames(), stall_after_bytes=10))
    async with (
        gateway(max_active_streams=1, resume_grace_s=30) as client,
        aconnect_sse(client, "POST", "/v1/slot-streams", json=BODY) as source,
    ):
        await collect(source, limit=1)
        second = await client.post("/v1/slot-streams", json=BODY)
    assert second.status_code == 503
    assert second.json()["error"]["code"] == "too_many_streams"


async def test_page_and_assets_are_served(gateway: Gateway) -> None:
    async with gateway() as client:
        page = await client.get("/")
        script = await client.get("/static/app.js")
        client_build = await client.get("/static/slotflight.js")
        schema = await client.get("/static/triage.schema.json")
    assert page.headers["content-type"].startswith("text/html")
    assert 'id="run"' in page.text and "static/app.js" in page.text
    assert "static/slotflight.js" in page.text
    assert "v1/slot-streams" in script.text and "Slotflight.streamSlots" in script.text
    # The JS package's browser build (clients/js), committed for the wheel.
    assert client_build.status_code == 200
    assert "var Slotflight=" in client_build.text
    assert schema.json() == TRIAGE_SCHEMA


async def test_serve_command_runs_the_gateway(upstream: ScriptedServer) -> None:
    upstream.add(Reply(triage_frames(), chunks=8))
    async with (
        gateway_process(upstream, "--token", "s3cret") as gateway,
        httpx.AsyncClient(base_url=gateway.url, timeout=30) as client,
    ):
        refused = await client.post("/v1/slot-streams", json=BODY)
        async with aconnect_sse(
            client,
            "POST",
            "/v1/slot-streams",
            json=BODY,
            headers={"authorization": "Bearer s3cret"},
        ) as source:
            messages = await collect(source)
    assert refused.status_code == 401
    assert messages[-1].event == "done"
    assert json.loads(messages[-1].data)["state"] == TRIAGE_VALUE


async def test_serve_command_sets_the_body_limit(upstream: ScriptedServer) -> None:
    """Images come inline, so the body limit is the serve command's to raise."""
    upstream.add(Reply(triage_frames()))
    image = _image("data:image/png;base64," + "A" * 4096)
    body = {**BODY, "messages": [{"role": "user", "content": [*TEXT_AND_IMAGE[:1], *image]}]}
    async with (
        gateway_process(upstream, "--max-body-bytes", "4096") as small,
        gateway_process(upstream, "--max-body-bytes", "65536") as large,
        httpx.AsyncClient(timeout=30) as client,
    ):
        refused = await client.post(f"{small.url}/v1/slot-streams", json=body)
        async with aconnect_sse(
            client, "POST", f"{large.url}/v1/slot-streams", json=body
        ) as source:
            messages = await collect(source)
    assert refused.status_code == 413
    assert refused.json()["error"]["code"] == "body_too_large"
    assert json.loads(messages[-1].data)["state"] == TRIAGE_VALUE


async def test_a_failed_pass_does_not_end_the_stream(
    upstream: ScriptedServer, gateway: Gateway
) -> None:
    # The first answer is chatter only: the pass stops (pass-failed) and is regenerated.
    chatter = "I am thinking about this ticket very carefully.\n" * 200
    upstream.add(Reply(chatter, chunks=64), Reply(triage_frames(), chunks=6))
    body = {**BODY, "options": {"max_attempts": 2}}
    async with (
        gateway() as client,
        aconnect_sse(client, "POST", "/v1/slot-streams", json=body) as source,
    ):
        messages = await collect(source)
    kinds = [m.event for m in messages]
    assert "pass-failed" in kinds and "error" not in kinds
    failed = json.loads(messages[kinds.index("pass-failed")].data)
    assert failed["error"]["code"] == "no_frames"
    assert kinds.index("pass-failed") < kinds.index("retry") < len(kinds) - 1
    assert kinds[-1] == "done"
    final = json.loads(messages[-1].data)["state"]
    assert final["summary"] == TRIAGE_VALUE["summary"]
    assert final["priority"] == TRIAGE_VALUE["priority"]
    assert len(upstream.requests) == 2
