"""A FastAPI route that streams a triage object as server-sent events.

Run against any OpenAI-compatible server (a local llama.cpp, vLLM, or
``slotflight local-server``; set ``SLOTFLIGHT_GRAMMAR=llama.cpp`` for a
llama.cpp server to send the plan's grammar along), with FastAPI installed beside
slotflight (``pip install fastapi``)::

    OPENAI_BASE_URL=http://127.0.0.1:8080/v1 uvicorn examples.fastapi_app:app

then ``curl -N -X POST localhost:8000/triage -H 'content-type: application/json'
-d '{"ticket": "The export fails every night."}'``.
"""

from __future__ import annotations

import os
from typing import Literal

import openai
from fastapi import FastAPI
from pydantic import BaseModel, Field
from sse_starlette import EventSourceResponse

import slotflight
from examples.triage import Triage
from slotflight.web import slot_event_response


class Ticket(BaseModel):
    ticket: str = Field(max_length=20_000)


# SLOTFLIGHT_GRAMMAR=llama.cpp, vllm or vllm-guided: send the plan's grammar to a server
# that takes one
_GRAMMARS: dict[str | None, Literal["llama.cpp", "vllm", "vllm-guided", False]] = {
    None: False,
    "llama.cpp": "llama.cpp",
    "vllm": "vllm",
    "vllm-guided": "vllm-guided",
}
_GRAMMAR_ENV = os.environ.get("SLOTFLIGHT_GRAMMAR") or None
if _GRAMMAR_ENV not in _GRAMMARS:
    raise SystemExit("SLOTFLIGHT_GRAMMAR must be llama.cpp, vllm or vllm-guided")
GRAMMAR = _GRAMMARS[_GRAMMAR_ENV]

app = FastAPI()
client = openai.AsyncOpenAI(
    base_url=os.environ.get("OPENAI_BASE_URL", "http://127.0.0.1:8080/v1"),
    api_key=os.environ.get("OPENAI_API_KEY", "unused"),
)


@app.post("/triage")
async def triage(body: Ticket) -> EventSourceResponse:
    stream = slotflight.astream(
        client,
        model=os.environ.get("SLOTFLIGHT_MODEL", "default"),
        messages=[{"role": "user", "content": f"Triage this support ticket:\n{body.ticket}"}],
        output=Triage,
        grammar=GRAMMAR,
        temperature=0,
        max_tokens=400,
    )
    return slot_event_response(stream, state_mode="patch", coalesce_ms=50)
