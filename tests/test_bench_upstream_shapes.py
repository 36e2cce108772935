"""``slotflight bench`` against the stream shapes that OpenAI-compatible servers and
proxies send, over real HTTP on 127.0.0.1: blank ``data:`` keep-alives, a JSON answer to
a streamed request, an error object answered with status 200, a body over the bound,
and events the decoder cannot read. Every mode reads them as the SDK does; what a run
cannot read becomes its ``error`` and the benchmark goes on. The upstream is a small
ASGI app that sends raw bytes."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from slotflight._serving.thread import AppServer
from slotflight.bench.models import SupportTriage
from slotflight.bench.runner import (
    BenchConfig,
    RunRecord,
    Target,
    plan_runs,
    read_tasks,
    run_benchmark,
)
from slotflight.plan.compiler import compile as compile_schema
from slotflight.syntax import DEFAULT_SYNTAX, render_frames
from tests.test_bench_runner import TRIAGE
from tests.test_client_upstream_shapes_sse import (
    COMPLETION,
    DONE,
    Answer,
    Upstream,
    chunk,
    event,
)

GOLD: dict[str, Any] = {**TRIAGE, "action_items": []}
#: What a well-behaved model answers in each mode.
ANSWERS = {
    "slots": render_frames(compile_schema(SupportTriage), GOLD, DEFAULT_SYNTAX),
    "json_schema": json.dumps(GOLD),
    "json_prompt": json.dumps(GOLD),
}
MODES = pytest.mark.parametrize("mode", sorted(ANSWERS))
JSON_MODES = pytest.mark.parametrize("mode", ["json_prompt", "json_schema"])
USAGE = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
SSE = b"text/event-stream"
JSON = b"application/json"
#: The bound a test run reads a JSON answer, or one event, to.
LIMIT = 64 * 1024
OVERLOADED = {"error": {"message": "the model is overloaded", "code": 400}}


def completion(text: str) -> dict[str, Any]:
    """A ``chat.completion`` holding all of ``text``, with usage."""
    (choice,) = COMPLETION["choices"]
    message = {"role": "assistant", "content": text}
    return {**COMPLETION, "choices": [{**choice, "message": message}], "usage": USAGE}


#: A response: its content type and the body in the parts sent, made from the answer.
Shape = Callable[[str], tuple[bytes, list[bytes]]]


def bench(tmp_path: Path, mode: str, shape: Shape) -> tuple[RunRecord, Upstream]:
    """One run of the triage task in ``mode`` against an upstream answering ``shape``
    of the mode's answer to every request (it keeps the request bodies)."""
    folder = tmp_path / "tasks"
    folder.mkdir()
    row = {"id": "t", "schema": "triage", "input": "x", "instructions": "Triage.", "gold": GOLD}
    (folder / "t.jsonl").write_text(json.dumps(row) + "\n", encoding="utf-8")
    content_type, parts = shape(ANSWERS[mode])
    upstream = Upstream([Answer(parts, content_type)])
    with AppServer(upstream, lifespan="off") as server:
        url = f"{server.url}/v1"
        config = BenchConfig(
            tasks=folder,
            runs=1,
            modes=(mode,),  # type: ignore[arg-type]
            base_url=url,
            model="m",
            max_body_bytes=LIMIT,
        )
        target = Target(base_url=url, model="m", kind="remote")
        (record,) = run_benchmark(config, target, plan_runs(config, read_tasks(folder)))
    return record, upstream


def right(record: RunRecord) -> None:
    """The run read the whole answer: valid, every field right, no error."""
    assert record.error is None
    assert record.metrics.final_valid
    assert record.scores is not None and {f.score for f in record.scores} == {1.0}


@MODES
def test_blank_data_keepalives_are_skipped(tmp_path: Path, mode: str) -> None:
    def keepalives(text: str) -> tuple[bytes, list[bytes]]:
        first, rest = event(chunk(text[:20])), event(chunk(text[20:], "stop"))
        return SSE, [b"data:\n\n", first, b"data: \n\n", b"data:\r\n\r\n", rest, DONE]

    record, upstream = bench(tmp_path, mode, keepalives)
    right(record)
    assert len(upstream.bodies) == 1
    # the two chunks with text, and nothing for the keep-alives
    assert [text for _, text in record.chunks] == [ANSWERS[mode][:20], ANSWERS[mode][20:]]


@MODES
@pytest.mark.parametrize("content_type", [JSON, SSE])
def test_a_json_answer_to_a_streamed_request_is_read_as_one_chunk(
    tmp_path: Path, mode: str, content_type: bytes
) -> None:
    def whole(text: str) -> tuple[bytes, list[bytes]]:
        body = json.dumps(completion(text)).encode()
        return content_type, [body[:40], body[40:]]  # two network writes

    record, upstream = bench(tmp_path, mode, whole)
    right(record)
    assert len(upstream.bodies) == 1
    assert [text for _, text in record.chunks] == [ANSWERS[mode]]
    assert record.usage_reported and record.usage[0] is not None
    assert record.usage[0].completion_tokens == USAGE["completion_tokens"]


@MODES
@pytest.mark.parametrize("content_type", [JSON, SSE])
def test_an_error_object_answered_with_status_200_is_the_runs_error(
    tmp_path: Path, mode: str, content_type: bytes
) -> None:
    record, upstream = bench(
        tmp_path, mode, lambda _: (content_type, [json.dumps(OVERLOADED).encode()])
    )
    assert record.error is not None and "the model is overloaded" in record.error
    assert len(upstream.bodies) == 1  # a 400: not asked again
    assert record.chunks == () and not record.metrics.final_valid


OVER_LONG: dict[str, Shape] = {
    # a JSON answer larger than the bound
    "json-answer": lambda text: (
        JSON,
        [json.dumps(completion(text + " " * LIMIT)).encode()],
    ),
    # one event that never ends, sent in parts
    "endless-event": lambda text: (
        SSE,
        [event(chunk(text[:20])), b'data: {"choices": [{"delta": {"content": "']
        + [b"x" * 4096] * (LIMIT // 4096 + 1),
    ),
}


@MODES
@pytest.mark.parametrize("name", sorted(OVER_LONG))
def test_a_body_over_the_bound_ends_the_run_with_a_transport_error(
    tmp_path: Path, mode: str, name: str
) -> None:
    record, upstream = bench(tmp_path, mode, OVER_LONG[name])
    assert record.error is not None
    assert record.error.startswith(("TransportError: ", "transport_error: "))
    assert str(LIMIT) in record.error
    assert len(upstream.bodies) == 1
    assert not record.metrics.final_valid


UNREADABLE: dict[str, list[bytes]] = {
    "nested-too-deeply": [b"data: " + b"[" * 10_000 + b"\n\n"],
    "not-utf-8": [b'data: {"choices": [], "x": "\xff\xfe"}\n\n'],
}


@JSON_MODES
@pytest.mark.parametrize("name", sorted(UNREADABLE))
def test_an_event_the_decoder_cannot_read_is_the_runs_error(
    tmp_path: Path, mode: str, name: str
) -> None:
    def cut(text: str) -> tuple[bytes, list[bytes]]:
        return SSE, [event(chunk(text[:20])), *UNREADABLE[name]]

    record, upstream = bench(tmp_path, mode, cut)
    assert record.error is not None
    assert record.error.startswith(("RecursionError: ", "UnicodeDecodeError: "))
    assert [text for _, text in record.chunks] == [ANSWERS[mode][:20]]
    assert len(upstream.bodies) == 1
