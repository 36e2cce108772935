"""slotflight.testing.ScriptedServer, driven through the real openai client over HTTP."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from openai import AsyncOpenAI, OpenAI

from slotflight.testing import (
    RandomChunks,
    RecordedRequest,
    Reply,
    ScriptedServer,
    Usage,
    estimate_tokens,
)

MESSAGES: list[Any] = [
    {"role": "system", "content": "Answer briefly."},
    {"role": "user", "content": "Say something about the weather."},
]


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as running:
        yield running


def client_for(server: ScriptedServer, **options: Any) -> OpenAI:
    options.setdefault("max_retries", 0)
    return OpenAI(base_url=server.base_url, api_key="test", **options)


def stream_chunks(client: OpenAI, **extra: Any) -> list[Any]:
    stream = client.chat.completions.create(
        model="scripted", messages=MESSAGES, stream=True, **extra
    )
    return list(stream)


def content_deltas(chunks: list[Any]) -> list[str]:
    """The non-empty content deltas, as the client received them."""
    return [
        chunk.choices[0].delta.content
        for chunk in chunks
        if chunk.choices and chunk.choices[0].delta.content
    ]


# -- streaming ------------------------------------------------------------------------


def test_streamed_text_reassembles_exactly(server: ScriptedServer) -> None:
    text = "Sunny with a chance of 雨 — 23 °C\nwind: calm 🌤"
    server.add(Reply(text, chunks=RandomChunks(seed=7, max_size=5)))
    chunks = stream_chunks(client_for(server))
    assert "".join(content_deltas(chunks)) == text
    assert server.remaining == 0


def test_explicit_chunks_arrive_as_given(server: ScriptedServer) -> None:
    pieces = ["<1>\n", "Ad", "a Love", "lace\n</1>", "\n"]
    server.add(Reply(chunks=pieces))
    chunks = stream_chunks(client_for(server))
    assert content_deltas(chunks) == pieces


def test_fixed_size_chunks(server: ScriptedServer) -> None:
    text = "abcdefghijklmnopq"
    server.add(Reply(text, chunks=4))
    deltas = content_deltas(stream_chunks(client_for(server)))
    assert deltas == ["abcd", "efgh", "ijkl", "mnop", "q"]


def test_random_chunks_are_reproducible_per_seed(server: ScriptedServer) -> None:
    text = "The quick brown fox jumps over the lazy dog. " * 4
    server.add(
        Reply(text, chunks=RandomChunks(seed=1, min_size=2, max_size=6)),
        Reply(text, chunks=RandomChunks(seed=1, min_size=2, max_size=6)),
        Reply(text, chunks=RandomChunks(seed=2, min_size=2, max_size=6)),
    )
    client = client_for(server)
    first, second, third = (content_deltas(stream_chunks(client)) for _ in range(3))
    assert first == second
    assert first != third
    for deltas in (first, third):
        assert "".join(deltas) == text
        assert all(2 <= len(delta) <= 6 for delta in deltas[:-1])


def test_stream_shape_role_first_finish_reason_last(server: ScriptedServer) -> None:
    server.add(Reply("one two", chunks=3), Reply("truncated", finish_reason="length"))
    client = client_for(server)
    for expected_reason in ("stop", "length"):
        chunks = stream_chunks(client)
        assert chunks[0].object == "chat.completion.chunk"
        assert chunks[0].choices[0].delta.role == "assistant"
        assert all(chunk.choices[0].delta.role is None for chunk in chunks[1:])
        reasons = [chunk.choices[0].finish_reason for chunk in chunks]
        assert reasons[-1] == expected_reason
        assert all(reason is None for reason in reasons[:-1])
        assert chunks[-1].choices[0].delta.content is None
        assert all(chunk.model == "scripted" for chunk in chunks)


def test_usage_chunk_only_when_requested(server: ScriptedServer) -> None:
    text = "forty-two characters of assistant content"
    server.add(Reply(text, chunks=5), Reply(text, chunks=5, usage=Usage(11, 7)), Reply(text))
    client = client_for(server)

    estimated = stream_chunks(client, stream_options={"include_usage": True})
    assert estimated[-1].choices == []
    assert estimated[-1].usage is not None
    prompt = sum(estimate_tokens(message["content"]) for message in MESSAGES)
    assert estimated[-1].usage.prompt_tokens == prompt
    assert estimated[-1].usage.completion_tokens == estimate_tokens(text)
    assert estimated[-1].usage.total_tokens == prompt + estimate_tokens(text)
    assert all(chunk.usage is None for chunk in estimated[:-1])
    assert "".join(content_deltas(estimated)) == text

    explicit = stream_chunks(client, stream_options={"include_usage": True})
    assert explicit[-1].usage is not None
    assert (
        explicit[-1].usage.prompt_tokens,
        explicit[-1].usage.completion_tokens,
        explicit[-1].usage.total_tokens,
    ) == (11, 7, 18)

    plain = stream_chunks(client)
    assert all(chunk.choices for chunk in plain)
    assert all(chunk.usage is None for chunk in plain)


def test_raw_wire_format_ends_with_done(server: ScriptedServer) -> None:
    server.add(Reply("hi", chunks=1))
    body = {"model": "m", "messages": MESSAGES, "stream": True}
    response = httpx.post(f"{server.base_url}/chat/completions", json=body)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    events = response.text.split("\n\n")
    assert events[-1] == ""
    assert events[-2] == "data: [DONE]"
    assert all(event.startswith("data: {") for event in events[:-2])
    assert len(events) == 2 + 4  # role, "h", "i", finish
    assert server.wait_for_request(0).bytes_sent == len(response.content)


# -- non-streaming and models ----------------------------------------------------------


def test_non_stream_completion(server: ScriptedServer) -> None:
    server.add(Reply("The answer is 42.", usage=Usage(3, 5), finish_reason="length"))
    completion = client_for(server).chat.completions.create(model="scripted", messages=MESSAGES)
    assert completion.object == "chat.completion"
    assert completion.choices[0].message.role == "assistant"
    assert completion.choices[0].message.content == "The answer is 42."
    assert completion.choices[0].finish_reason == "length"
    assert completion.usage is not None
    assert (completion.usage.prompt_tokens, completion.usage.total_tokens) == (3, 8)
    recorded = server.wait_for_request(0)
    assert recorded.stream is False
    assert recorded.completed and recorded.finished and recorded.status == 200


def test_models_route(server: ScriptedServer) -> None:
    models = client_for(server).models.list()
    assert [model.id for model in models.data] == ["scripted-model"]
    assert [(item.method, item.path) for item in server.requests] == [("GET", "/v1/models")]


def test_unknown_route_is_recorded_404(server: ScriptedServer) -> None:
    response = httpx.post(f"{server.base_url}/embeddings", json={"input": "x"})
    assert response.status_code == 404
    assert "/v1/embeddings" in response.json()["error"]["message"]
    assert server.requests[0].path == "/v1/embeddings"
    assert server.requests[0].body == {"input": "x"}
    assert httpx.get(f"{server.base_url}/chat/completions").status_code == 405
    assert [item.status for item in server.requests] == [404, 405]


# -- error statuses --------------------------------------------------------------------


def test_500_raises_internal_server_error(server: ScriptedServer) -> None:
    server.add(Reply(status=500, error_message="backend exploded"))
    with pytest.raises(openai.InternalServerError) as caught:
        stream_chunks(client_for(server))
    assert caught.value.status_code == 500
    assert "backend exploded" in caught.value.message
    assert server.requests[0].status == 500


def test_429_raises_rate_limit_error_with_retry_after(server: ScriptedServer) -> None:
    server.add(Reply(status=429, retry_after=7))
    with pytest.raises(openai.RateLimitError) as caught:
        client_for(server).chat.completions.create(model="m", messages=MESSAGES)
    assert caught.value.response.headers["retry-after"] == "7"
    assert isinstance(caught.value.body, dict)
    assert caught.value.body["type"] == "rate_limit_error"


def test_client_retries_429_and_gets_the_next_reply(server: ScriptedServer) -> None:
    server.add(Reply(status=429, retry_after=0.01), Reply("after the retry", chunks=2))
    client = client_for(server, max_retries=2)
    chunks = stream_chunks(client)
    assert "".join(content_deltas(chunks)) == "after the retry"
    requests = server.requests
    assert [item.status for item in requests] == [429, 200]
    assert [item.headers["x-stainless-retry-count"] for item in requests] == ["0", "1"]
    assert server.remaining == 0


def test_empty_script_answers_500_naming_the_request(server: ScriptedServer) -> None:
    server.add("only one")
    client = client_for(server)
    assert "".join(content_deltas(stream_chunks(client))) == "only one"
    with pytest.raises(openai.InternalServerError) as caught:
        stream_chunks(client)
    assert "no scripted reply left for request #1" in caught.value.message
    recorded = server.requests[1]
    assert recorded.status == 500
    assert recorded.error is not None and "request #1" in recorded.error


def test_no_matching_reply_answers_500(server: ScriptedServer) -> None:
    server.add(Reply("never", match=lambda body: body.get("model") == "other"))
    with pytest.raises(openai.InternalServerError) as caught:
        client_for(server).chat.completions.create(model="m", messages=MESSAGES)
    assert "none of their match accepts it" in caught.value.message
    assert server.remaining == 1


# -- faults mid-stream -----------------------------------------------------------------


def test_drop_after_bytes_breaks_the_stream_after_partial_text(server: ScriptedServer) -> None:
    text = "partial text that never finishes"
    server.add(Reply(text, chunks=4, drop_after_bytes=10))
    received: list[str] = []
    stream = client_for(server).chat.completions.create(model="m", messages=MESSAGES, stream=True)
    with pytest.raises(openai.APIConnectionError) as caught:
        for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                received.append(chunk.choices[0].delta.content)
    # openai wraps the transport's error: a chunked body that ended without its last chunk.
    assert "incomplete chunked read" in str(caught.value.__cause__)
    assert "".join(received) == text[:10]
    assert received == ["part", "ial ", "te"]
    recorded = server.wait_for_request(0)
    assert recorded.dropped and not recorded.completed and not recorded.disconnected
    assert recorded.content_sent == text[:10]


def test_drop_is_an_incomplete_chunked_read_for_httpx(server: ScriptedServer) -> None:
    server.add(Reply("héllo", drop_after_bytes=2))
    body = {"model": "m", "messages": MESSAGES, "stream": True}
    received = bytearray()
    with (
        pytest.raises(httpx.RemoteProtocolError, match="incomplete chunked read"),
        httpx.stream("POST", f"{server.base_url}/chat/completions", json=body) as response,
    ):
        for data in response.iter_bytes():
            received += data
    assert b'"content":"h"' in received
    assert b"[DONE]" not in received
    assert b'finish_reason":"stop' not in received
    # "é" takes two bytes: a two-byte budget stops before it, never inside it.
    assert server.wait_for_request(0).content_sent == "h"


def test_drop_of_a_non_stream_response(server: ScriptedServer) -> None:
    server.add(Reply("whole answer", drop_after_bytes=20))
    with pytest.raises(openai.APIConnectionError):
        client_for(server).chat.completions.create(model="m", messages=MESSAGES)
    recorded = server.wait_for_request(0)
    assert recorded.dropped and recorded.bytes_sent == 20


def test_stall_then_client_timeout_is_recorded_as_disconnect(server: ScriptedServer) -> None:
    server.add(Reply("waiting forever", chunks=3, stall_after_bytes=6))
    received: list[str] = []
    client = client_for(server, timeout=1.0)
    with pytest.raises(openai.APITimeoutError):
        for chunk in client.chat.completions.create(model="m", messages=MESSAGES, stream=True):
            if chunk.choices and chunk.choices[0].delta.content:
                received.append(chunk.choices[0].delta.content)
    assert received == ["wai", "tin"]
    recorded = server.wait_for_disconnect(0)
    assert recorded.stalled and recorded.disconnected and not recorded.completed
    assert recorded.disconnected_at is not None
    assert recorded.disconnected_at >= recorded.received_at
    assert recorded.finished


def test_delay_longer_than_client_timeout(server: ScriptedServer) -> None:
    server.add(Reply("late", delay=60))
    with pytest.raises(openai.APITimeoutError):
        client_for(server, timeout=0.3).chat.completions.create(model="m", messages=MESSAGES)
    recorded = server.wait_for_disconnect(0)
    assert recorded.status is None and recorded.bytes_sent == 0


def test_closing_a_stream_early_is_recorded_as_disconnect(server: ScriptedServer) -> None:
    server.add(Reply("one two three four", chunks=4, chunk_delay=60))
    stream = client_for(server).chat.completions.create(model="m", messages=MESSAGES, stream=True)
    with stream:
        first = next(stream)
        assert first.choices[0].delta.role == "assistant"
        second = next(stream)
        assert second.choices[0].delta.content == "one "
    recorded = server.wait_for_disconnect(0)
    assert recorded.content_sent == "one "
    assert not recorded.completed


async def test_async_client_leaving_the_stream_is_recorded() -> None:
    async with ScriptedServer([Reply("abc", stall_after_bytes=1)]) as server:
        client = AsyncOpenAI(base_url=server.base_url, api_key="test", max_retries=0)
        stream = await client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
        received: list[str] = []
        async with stream:
            async for chunk in stream:
                if chunk.choices and chunk.choices[0].delta.content:
                    received.append(chunk.choices[0].delta.content)
                    break
        assert received == ["a"]
        recorded = server.wait_for_disconnect(0)
        assert recorded.stalled
        await client.close()


async def test_async_client_streams_and_retries() -> None:
    replies = [Reply(status=503, retry_after=0.01), Reply("async text", chunks=["as", "ync text"])]
    async with ScriptedServer(replies) as server:
        client = AsyncOpenAI(base_url=server.base_url, api_key="test", max_retries=1)
        stream = await client.chat.completions.create(
            model="m", messages=MESSAGES, stream=True, stream_options={"include_usage": True}
        )
        deltas = [
            chunk.choices[0].delta.content
            async for chunk in stream
            if chunk.choices and chunk.choices[0].delta.content
        ]
        await client.close()
        assert deltas == ["as", "ync text"]
        assert [item.status for item in server.requests] == [503, 200]


# -- recording -------------------------------------------------------------------------


def test_request_bodies_are_recorded_with_extra_body(server: ScriptedServer) -> None:
    server.add("ok")
    grammar = 'root ::= "<1>\\n" [a-z]+ "\\n</1>"'
    client_for(server).chat.completions.create(
        model="smollm2",
        messages=MESSAGES,
        temperature=0.2,
        extra_body={"grammar": grammar, "cache_prompt": True},
        extra_headers={"x-trace": "abc"},
    )
    (recorded,) = server.requests
    assert recorded.method == "POST"
    assert recorded.path == "/v1/chat/completions"
    assert recorded.headers["x-trace"] == "abc"
    assert recorded.headers["authorization"] == "Bearer test"
    assert recorded.body["grammar"] == grammar
    assert recorded.body["cache_prompt"] is True
    assert recorded.body["messages"] == MESSAGES
    assert recorded.body["temperature"] == 0.2
    assert recorded.reply == Reply("ok")


def test_match_selects_a_reply_out_of_order(server: ScriptedServer) -> None:
    server.add(
        Reply("for the grammar request", match=lambda body: "grammar" in body),
        Reply("for anyone"),
    )
    client = client_for(server)
    plain = client.chat.completions.create(model="m", messages=MESSAGES)
    assert plain.choices[0].message.content == "for anyone"
    constrained = client.chat.completions.create(
        model="m", messages=MESSAGES, extra_body={"grammar": "root ::= x"}
    )
    assert constrained.choices[0].message.content == "for the grammar request"


def test_wait_for_times_out_with_a_description(server: ScriptedServer) -> None:
    server.add("done")
    client_for(server).chat.completions.create(model="m", messages=MESSAGES)
    with pytest.raises(TimeoutError, match="#0 POST /v1/chat/completions status=200"):
        server.wait_for(lambda requests: any(item.disconnected for item in requests), 0.05)


def test_wait_for_wakes_on_a_request_from_another_thread(server: ScriptedServer) -> None:
    server.add("from a thread")
    worker = threading.Thread(
        target=lambda: client_for(server).chat.completions.create(model="m", messages=MESSAGES)
    )
    worker.start()
    requests = server.wait_for(lambda items: len(items) == 1 and items[0].completed)
    worker.join()
    assert requests[0].content_sent == "from a thread"


def test_request_lookup_by_index(server: ScriptedServer) -> None:
    server.add("a")
    client_for(server).chat.completions.create(model="m", messages=MESSAGES)
    assert isinstance(server.request(0), RecordedRequest)
    for index in (1, 5, -1):  # not received yet, or never
        with pytest.raises(IndexError, match=rf"^no recorded request #{index}$"):
            server.request(index)


def test_recording_is_bounded() -> None:
    with ScriptedServer(["a", "b", "c"], max_recorded=2) as server:
        client = client_for(server)
        for _ in range(3):
            client.chat.completions.create(model="m", messages=MESSAGES)
        assert [item.index for item in server.requests] == [1, 2]


def test_oversized_request_body_is_refused() -> None:
    with ScriptedServer(["unused"], max_request_bytes=64) as server:
        with pytest.raises(openai.APIStatusError) as caught:
            client_for(server).chat.completions.create(model="m", messages=MESSAGES)
        assert caught.value.status_code == 413
        assert server.remaining == 1
        assert len(server.requests[0].raw_body) == 64


# -- lifecycle -------------------------------------------------------------------------


def test_stop_ends_open_streams(server: ScriptedServer) -> None:
    server.add(Reply("hang", stall_after_bytes=2))
    outcome: list[BaseException] = []
    received = bytearray()
    headers_seen = threading.Event()

    def consume() -> None:
        body = {"model": "m", "messages": MESSAGES, "stream": True}
        try:
            with httpx.stream(
                "POST", f"{server.base_url}/chat/completions", json=body, timeout=60
            ) as response:
                for data in response.iter_bytes():
                    received.extend(data)
                    headers_seen.set()
        except httpx.HTTPError as exc:
            outcome.append(exc)

    worker = threading.Thread(target=consume)
    worker.start()
    assert headers_seen.wait(10)
    server.wait_for_request(0, lambda request: request.stalled)
    server.stop()
    worker.join(10)
    assert not worker.is_alive()
    assert len(outcome) == 1 and isinstance(outcome[0], httpx.RemoteProtocolError)
    assert b'"content":"ha"' in received and b"[DONE]" not in received
    recorded = server.request(0)
    assert recorded.finished and not recorded.disconnected and not recorded.completed
    assert not server.running


def test_stop_answers_503_to_a_request_still_in_its_delay(server: ScriptedServer) -> None:
    server.add(Reply("too late", delay=60))
    outcome: list[BaseException] = []

    def call() -> None:
        try:
            client_for(server, timeout=60).chat.completions.create(model="m", messages=MESSAGES)
        except openai.APIError as exc:
            outcome.append(exc)

    worker = threading.Thread(target=call)
    worker.start()
    server.wait_for(lambda requests: len(requests) == 1 and requests[0].reply is not None)
    server.stop()
    worker.join(10)
    assert not worker.is_alive()
    assert len(outcome) == 1 and isinstance(outcome[0], openai.APIStatusError)
    assert outcome[0].status_code == 503
    assert server.request(0).status == 503


def test_stop_answers_503_to_a_request_still_sending_its_body(server: ScriptedServer) -> None:
    """A client that has sent only part of its body is answered at once when the server
    stops, as one waiting in a ``delay`` is; the request consumes no reply."""
    server.add("unused")
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        sock.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nhost: test\r\n"
            b"content-type: application/json\r\ncontent-length: 100\r\n"
            b"expect: 100-continue\r\n\r\n"
        )
        # uvicorn answers 100 Continue once the application starts reading the body
        assert sock.recv(1024).startswith(b"HTTP/1.1 100 ")
        sock.sendall(b'{"model": "m", ')
        server.stop()
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 503 ")
    assert json.loads(body)["error"]["message"] == "the scripted server is stopping"
    recorded = server.request(0)
    assert recorded.status == 503 and recorded.finished and recorded.reply is None
    assert server.remaining == 1


def test_start_stop_without_context_manager() -> None:
    server = ScriptedServer(["x"])
    with pytest.raises(RuntimeError):
        _ = server.base_url
    server.start()
    try:
        assert server.running
        assert server.base_url == f"http://127.0.0.1:{server.port}/v1"
        response = httpx.get(f"{server.base_url}/models")
        assert response.status_code == 200
    finally:
        server.stop()
    assert not server.running
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{server.url}/v1/models")
    with pytest.raises(RuntimeError):
        server.start()
    server.stop()  # a second stop is harmless


def test_two_servers_get_different_ports() -> None:
    with ScriptedServer(["one"]) as first, ScriptedServer(["two"]) as second:
        assert first.port != second.port
        assert (
            client_for(second)
            .chat.completions.create(model="m", messages=MESSAGES)
            .choices[0]
            .message.content
            == "two"
        )
        assert first.remaining == 1


# -- reply validation ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"text": "abc", "chunks": ["ab", "d"]}, ValueError),
        ({"text": "abc", "chunks": 0}, ValueError),
        ({"text": "abc", "chunks": "abc"}, TypeError),
        ({"text": "abc", "chunks": True}, TypeError),
        ({"text": "abc", "delay": -1}, ValueError),
        ({"status": 200}, ValueError),
        ({"text": "abc", "drop_after_bytes": 1, "stall_after_bytes": 1}, ValueError),
        ({"text": "abc", "drop_after_bytes": -1}, ValueError),
        ({"status": 429, "retry_after": -1}, ValueError),
    ],
)
def test_invalid_replies_are_rejected(options: dict[str, Any], error: type[Exception]) -> None:
    with pytest.raises(error):
        Reply(**options)


def test_reply_chunks_without_text_define_the_text() -> None:
    reply = Reply(chunks=["a", "", "bc"])
    assert reply.text == "abc"
    assert reply.content_chunks() == ["a", "bc"]
    assert Reply("").content_chunks() == []


def test_random_chunks_rejects_bad_bounds() -> None:
    with pytest.raises(ValueError):
        RandomChunks(min_size=3, max_size=2)
    with pytest.raises(ValueError):
        RandomChunks(min_size=0)
