"""``state_mode="full"`` coalesces deltas for at least ``FULL_MODE_MIN_COALESCE_MS``.

Every full-mode message carries the whole object: with one ``slot-delta`` per upstream
chunk (``coalesce_ms=0``) a stream cost O(n²) bytes and CPU (2,000 messages and 16 MB
for an 8 KB string in 4-character chunks). A smaller ``coalesce_ms`` is raised to the
minimum in full mode only; patch mode still sends every delta."""

from __future__ import annotations

import json
from typing import Any

from slotflight.web import DEFAULT_COALESCE_MS, FULL_MODE_MIN_COALESCE_MS
from tests.web_support import stream_through, summary_body, summary_frames

VALUE = "abcd" * 2000
CHUNKS = 4  # characters per upstream chunk: about 2,000 chunks, sent unpaced


async def _stream(state_mode: str) -> list[dict[str, Any]]:
    text = summary_frames(VALUE)
    messages = await stream_through(text, summary_body(state_mode), chunks=CHUNKS, timeout=60)
    return [json.loads(message.data) for message in messages]


def test_the_minimum_is_a_documented_constant() -> None:
    assert FULL_MODE_MIN_COALESCE_MS >= DEFAULT_COALESCE_MS > 0


async def test_full_mode_without_coalescing_sends_deltas_by_time_not_per_chunk() -> None:
    data = await _stream("full")
    deltas = [d for d in data if d["type"] == "slot-delta"]
    # One per 50 ms window at most: a handful for the ~2,000 chunks (a tenth of them
    # would be 10 s of streaming), each still the whole value so far with its state.
    assert 0 < len(deltas) <= len(VALUE) // CHUNKS // 10
    assert "".join(d["delta"] for d in deltas) == VALUE
    assert all(d["value"] == d["state"]["summary"] for d in deltas)
    assert data[-1]["type"] == "done" and data[-1]["state"] == {"summary": VALUE}


async def test_patch_mode_without_coalescing_still_sends_every_delta() -> None:
    data = await _stream("patch")
    deltas = [d for d in data if d["type"] == "slot-delta"]
    assert len(deltas) >= len(VALUE) // CHUNKS - 2  # one per chunk of the value
    assert "".join(d["delta"] for d in deltas) == VALUE
