"""Hostile grammars and schemas against the local server, over real HTTP with the real model.

Each attack is the smallest request that once crashed the server (SIGSEGV) or pinned its
only generation for minutes. With the default bounds each is refused before llama.cpp
sees it. With the bounds lifted (``unguarded``), the same requests reach llama.cpp and
show what the process isolation alone holds: the process that crashes or hangs is
replaced and only the attacking request fails. In every case ``/health`` keeps
answering while the attack runs, and the next request is served.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from openai import OpenAI, Stream
from openai.types.chat import ChatCompletionChunk, ChatCompletionMessageParam

from tests.local_support import require_local_model
from tests.security.health_probe import HealthProbe

require_local_model()

from slotflight.local import (  # noqa: E402
    GenerationResult,
    GrammarLimits,
    LocalEngine,
    LocalServer,
    start_local_server,
)

pytestmark = pytest.mark.local_model

USER: list[ChatCompletionMessageParam] = [{"role": "user", "content": "Is water wet?"}]
YES_NO = 'root ::= "yes" | "no"'
LONG_GRAMMAR = "root ::= [a-z ]{400,}"

# The three requests of the report.
NESTED_GRAMMAR = "root ::= " + "(" * 100_000 + '"a"' + ")" * 100_000
DEEP_SCHEMA = {"type": "string", "maxLength": 20_000}
PINNING_GRAMMAR = (
    "root ::= "
    + " ".join(f"r{i}" for i in range(1_000))
    + "\n"
    + "\n".join(f"r{i} ::= [a]{{0,10000}}" for i in range(1_000))
)

LIFTED = GrammarLimits(
    max_bytes=10**8,
    max_rules=10**8,
    max_nesting=10**8,
    max_repetition=10**8,
    max_expansion=10**12,
)


@pytest.fixture(scope="module")
def guarded() -> Iterator[LocalServer]:
    """The default server (the same engine as the other local-model tests)."""
    with start_local_server(seed=7) as running:
        yield running


@pytest.fixture(scope="module")
def unguarded() -> Iterator[LocalServer]:
    """A server whose grammar bounds are lifted: only the process isolation protects it."""
    engine = LocalEngine(grammar_limits=LIFTED, seed=7, cancel_grace=1.0)
    try:
        with start_local_server(engine=engine) as running:
            yield running
    finally:
        engine.close()


def _client(server: LocalServer) -> OpenAI:
    return OpenAI(base_url=server.base_url, api_key="local", max_retries=0, timeout=120)


def _ask(server: LocalServer, **fields: Any) -> Any:
    return _client(server).chat.completions.create(
        model=server.model, messages=USER, max_tokens=4, **fields
    )


def _stream(server: LocalServer, grammar: str, *, max_tokens: int) -> Stream[ChatCompletionChunk]:
    return _client(server).chat.completions.create(
        model=server.model,
        messages=USER,
        max_tokens=max_tokens,
        stream=True,
        extra_body={"grammar": grammar},
    )


def _served(server: LocalServer) -> None:
    """The next ordinary request is answered."""
    reply = _ask(server, extra_body={"grammar": YES_NO})
    assert reply.choices[0].message.content in ("yes", "no")


def _refused(server: LocalServer, **fields: Any) -> openai.BadRequestError:
    with HealthProbe(f"{server.url}/health"), pytest.raises(openai.BadRequestError) as caught:
        _ask(server, **fields)
    _served(server)
    return caught.value


def _finished(server: LocalServer, generation_id: str) -> GenerationResult:
    return next(r for r in server.engine.recent if r.id == generation_id)


def _wait_until_running(engine: LocalEngine, generation_id: str | None = None) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        running = engine.running
        if running is not None and generation_id in (None, running):
            return
        time.sleep(0.05)
    raise AssertionError("the generation did not start within 60 s")


# -- refused by the bounds ------------------------------------------------------------


def test_a_grammar_nested_100000_deep_is_refused(guarded: LocalServer) -> None:
    error = _refused(guarded, extra_body={"grammar": NESTED_GRAMMAR})
    assert error.code == "invalid_grammar"
    assert error.param == "/grammar"
    assert "nests groups more than 1000 levels deep" in error.message


def test_a_schema_the_converter_nests_20000_deep_is_refused(guarded: LocalServer) -> None:
    error = _refused(
        guarded,
        response_format={
            "type": "json_schema",
            "json_schema": {"name": "s", "schema": DEEP_SCHEMA},
        },
    )
    assert error.code == "invalid_schema"
    assert error.param == "/response_format/json_schema/schema"
    assert "nests groups more than 1000 levels deep" in error.message


def test_a_grammar_that_unrolls_to_ten_million_symbols_is_refused(guarded: LocalServer) -> None:
    error = _refused(guarded, extra_body={"grammar": PINNING_GRAMMAR})
    assert error.code == "invalid_grammar"
    assert "unrolls to more than 200000 symbols" in error.message


# -- held by the process isolation, bounds lifted -------------------------------------


@pytest.mark.parametrize(
    ("fields", "code", "param"),
    [
        ({"extra_body": {"grammar": NESTED_GRAMMAR}}, "invalid_grammar", "/grammar"),
        (
            {
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": "s", "schema": DEEP_SCHEMA},
                }
            },
            "invalid_schema",
            "/response_format/json_schema/schema",
        ),
    ],
    ids=["nested-grammar", "deep-schema"],
)
def test_a_request_that_crashes_llama_cpp_fails_alone(
    unguarded: LocalServer, fields: dict[str, Any], code: str, param: str
) -> None:
    error = _refused(unguarded, **fields)
    assert error.code == code
    assert error.param == param
    assert "crashed llama.cpp (killed by SIGSEGV)" in error.message


def test_a_generation_stuck_after_its_client_left_is_killed_and_replaced(
    unguarded: LocalServer,
) -> None:
    engine = unguarded.engine
    restarts = engine.restarts
    with HealthProbe(f"{unguarded.url}/health"):
        stream = _stream(unguarded, PINNING_GRAMMAR, max_tokens=50)
        generation_id = next(iter(stream)).id  # the role chunk
        _wait_until_running(engine, generation_id)
        time.sleep(3.0)  # past the prompt: one sampling step now lasts minutes
        stream.close()
        _served(unguarded)
    stuck = _finished(unguarded, generation_id)
    assert stuck.finish_reason == "cancelled"
    assert stuck.error is not None and "did not stop within 1 s" in stuck.error
    assert engine.restarts == restarts + 1


def test_a_crashed_generation_gets_an_error_with_a_code_and_the_next_is_served(
    unguarded: LocalServer,
) -> None:
    engine = unguarded.engine
    with HealthProbe(f"{unguarded.url}/health"):
        chunks = iter(_stream(unguarded, LONG_GRAMMAR, max_tokens=400))
        next(chunks)  # the role chunk
        next(chunks)  # text: the generation runs
        worker = engine.worker_pid
        assert worker is not None
        os.kill(worker, signal.SIGSEGV)  # what llama.cpp does on a fault
        with pytest.raises(openai.APIError) as caught:
            for _chunk in chunks:
                pass
        _served(unguarded)
    assert caught.value.code == "worker_crashed"
    assert "SIGSEGV" in caught.value.message
    assert engine.worker_pid not in (None, worker)


def test_a_non_streamed_crash_is_a_json_500_with_a_code(unguarded: LocalServer) -> None:
    engine = unguarded.engine
    body = {"messages": USER, "max_tokens": 400, "grammar": LONG_GRAMMAR}
    answer: list[httpx.Response] = []
    with HealthProbe(f"{unguarded.url}/health"):
        request = threading.Thread(
            target=lambda: answer.append(
                httpx.post(f"{unguarded.base_url}/chat/completions", json=body, timeout=120)
            )
        )
        request.start()
        _wait_until_running(engine)
        worker = engine.worker_pid
        assert worker is not None
        os.kill(worker, signal.SIGSEGV)
        request.join()
        _served(unguarded)
    assert answer[0].status_code == 500
    error = answer[0].json()["error"]
    assert error["code"] == "worker_crashed"
    assert error["type"] == "server_error"
    assert "SIGSEGV" in error["message"]


# -- a client that leaves stops its generation at once ---------------------------------


def test_a_client_leaving_during_a_long_prompt_stops_its_evaluation(guarded: LocalServer) -> None:
    engine = guarded.engine
    restarts = engine.restarts
    long_prompt: list[ChatCompletionMessageParam] = [
        {"role": "user", "content": "Summarise: " + "the export keeps timing out. " * 300}
    ]
    with HealthProbe(f"{guarded.url}/health"):
        stream = _client(guarded).chat.completions.create(
            model=guarded.model,
            messages=long_prompt,
            max_tokens=8,
            stream=True,
            extra_body={"cache_prompt": False},
        )
        generation_id = next(iter(stream)).id
        _wait_until_running(engine, generation_id)
        time.sleep(0.5)  # inside the prompt's evaluation (a minute on two busy cores)
        stream.close()
        _served(guarded)
    left = _finished(guarded, generation_id)
    assert left.finish_reason == "cancelled"
    assert left.error is None  # it stopped by itself within the grace period: no kill
    assert engine.restarts == restarts
