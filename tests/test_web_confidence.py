"""``options.confidence`` through the gateway: each ``slot-complete`` carries the figure
the SDK computes from the same tokens (the gateway's lean chunk reader keeps them)."""

from __future__ import annotations

import asyncio
import json
import math

import httpx
import openai

import slotflight
from slotflight.testing import AppServer, Reply, ScriptedServer
from slotflight.web import create_app
from tests.web_support import SUMMARY_SCHEMA, summary_frames

TEXT = summary_frames("The export fails")
TOKENS = [(TEXT[i : i + 3], -0.1 * (i % 4)) for i in range(0, len(TEXT), 3)]
MESSAGES = [{"role": "user", "content": "The export fails"}]


def gateway_completes(confidence: bool) -> list[dict]:
    with ScriptedServer([Reply(logprobs=TOKENS)]) as up, AppServer(create_app(up.base_url)) as gw:
        body = {
            "model": "m",
            "messages": MESSAGES,
            "schema": SUMMARY_SCHEMA,
            "options": {"confidence": confidence, "max_attempts": 1},
        }
        answer = httpx.post(gw.url + "/v1/slot-streams", json=body, timeout=30)
        assert up.requests[0].body.get("logprobs", False) is confidence
    events = [
        json.loads(line[6:]) for line in answer.text.splitlines() if line.startswith("data: ")
    ]
    return [e for e in events if e["type"] == "slot-complete"]


def sdk_confidence() -> float | None:
    async def run() -> float | None:
        with ScriptedServer([Reply(logprobs=TOKENS)]) as up:
            client = openai.AsyncOpenAI(base_url=up.base_url, api_key="x", max_retries=0)
            stream = slotflight.astream(
                client, model="m", messages=MESSAGES, output=SUMMARY_SCHEMA, confidence=True
            )
            async with stream as s:
                await s.final()
                return s.confidence().get("/summary")

    return asyncio.run(run())


def test_each_completed_field_carries_the_sdks_confidence() -> None:
    expected = sdk_confidence()
    assert expected is not None and 0 < expected < 1
    (complete,) = gateway_completes(True)
    assert math.isclose(complete["confidence"], expected)


def test_without_the_option_no_figure_is_sent() -> None:
    (complete,) = gateway_completes(False)
    assert "confidence" not in complete
