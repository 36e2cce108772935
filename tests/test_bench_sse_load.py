"""``benchmarks/sse_load.py`` measures real streams: every kind of stream it sends (each
load schema and a long string) ends with ``done`` through the gateway with default
options, and its time markers reach the client, through the bare proxy too.

A stream that fails early is tiny on the wire and fast; a benchmark reading such
streams reports flattering figures, so this checks the streams themselves, not a figure.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from benchmarks.sse_load import (
    HOST,
    SCHEMAS,
    Spec,
    StreamResult,
    child,
    free_port,
    read_stream,
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
