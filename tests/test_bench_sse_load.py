"""``benchmarks/sse_load.py`` measures real streams: every kind of stream it sends (each
load schema and a long string) ends with ``done`` through the gateway with default
options, and its time markers reach the client, through the bare proxy too.

A stream that fails early is tiny on the wire and fast; a benchmark reading such
streams reports flattering figures, so this checks the streams themselves, not a figure.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from benchmarks.sse_load import (
    HOST,
    LAYERS,
    SCHEMAS,
    Spec,
    StreamResult,
    build_parser,
    child,
    configure,
    free_port,
    layer_clients,
    layer_stream,
    read_stream,
    redis_workers,
    request_body,
    start_target,
)


@pytest.fixture(scope="module")
def upstream() -> Iterator[str]:
    port = free_port()
    with child("upstream", "--port", str(port), port=port):
        yield f"http://{HOST}:{port}/v1"


SPECS = [Spec(schema, chunks=120, rate=0) for schema in SCHEMAS] + [Spec(size=2_000, rate=0)]


@pytest.mark.parametrize("target", ["gateway", "proxy"])
def test_every_stream_the_benchmark_sends_ends_with_done(upstream: str, target: str) -> None:
    async def read_all() -> list[StreamResult]:
        with start_target(target, upstream) as served:
            return [await read_stream(served.ports[0], request_body(s)) for s in SPECS]

    for spec, result in zip(SPECS, asyncio.run(read_all()), strict=True):
        assert result.ok, (spec, result.error)
        assert result.wire_bytes > spec.output_bytes()
        if not spec.size:
            assert result.latencies, spec


def test_every_layer_of_the_layers_part_reads_a_whole_stream(upstream: str) -> None:
    """Each layer of ``--parts layers`` reads its stream to the end: the bytes up to
    ``[DONE]``, the last chunk, the ``done`` event, message, stored message."""

    async def last_of_each() -> dict[str, Any]:
        clients = layer_clients(upstream)
        spec = Spec("triage", chunks=120, rate=0)
        return {layer: await layer_stream(layer, upstream, spec, clients) for layer in LAYERS}

    last = asyncio.run(last_of_each())
    assert isinstance(last["http"], bytes) and b"[DONE]" in last["http"]
    assert last["openai"].choices[0].finish_reason == "stop"
    assert last["slots"].type == "done"
    assert last["messages"].event == "done"
    assert last["store"].event == "done"


def _configured(*argv: str) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(list(argv))
    configure(args, parser)
    return args


def test_the_scale_out_comparison_is_one_command_with_a_bounded_time() -> None:
    args = _configured("--workers", "1,2,4", "--redis", "--duration", "15")
    assert args.targets.split(",") == [
        "proxy",
        "gateway",
        "gateway-1-redis",
        "gateway-2-redis",
        "gateway-4-redis",
    ]
    assert [redis_workers(name) for name in args.targets.split(",")] == [0, 0, 1, 2, 4]
    assert args.parts == "load"
    assert args.output.endswith("sse_load_workers.json")
    # short streams (at most 20 s at the slowest rate, 20 chunks/s): a level ends soon
    # after its window, and the whole run within a bound printed first
    assert args.chunk_range[1] / 20 <= 20


def test_several_workers_need_redis() -> None:
    with pytest.raises(SystemExit):
        _configured("--workers", "1,2")
