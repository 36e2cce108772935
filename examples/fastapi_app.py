"""A FastAPI route that streams a triage object as server-sent events.

Run against any OpenAI-compatible server (a local llama.cpp, vLLM, or
``slotflight serve-local``)::

    OPENAI_BASE_URL=http://127.0.0.1:8080/v1 uvicorn examples.fastapi_app:app

then ``curl -N -X POST localhost:8000/triage -H 'content-type: application/json'
-d '{"ticket": "The export fails every night."}'``.
"""

from __future__ import annotations

import datetime
import os
from typing import Literal

import openai
from fastapi import FastAPI
from pydantic import BaseModel, Field
from sse_starlette import EventSourceResponse

import slotflight
from slotflight.web import slot_event_response


class ActionItem(BaseModel):
    task: str
    owner: str
    due: datetime.date


class Triage(BaseModel):
    summary: str = Field(description="One sentence: what the customer needs")
    sentiment: Literal["positive", "neutral", "negative"]
    priority: int = Field(ge=1, le=4, description="1 urgent … 4 low")
    tags: list[str] = Field(max_length=5)
    action_items: list[ActionItem] = Field(max_length=5)


class Ticket(BaseModel):
    ticket: str = Field(max_length=20_000)


app = FastAPI()
client = openai.AsyncOpenAI(
    base_url=os.environ.get("OPENAI_BASE_URL", "http://127.0.0.1:8080/v1"),
    api_key=os.environ.get("OPENAI_API_KEY", "unused"),
)


@app.post("/triage")
async def triage(body: Ticket) -> EventSourceResponse:
    stream = slotflight.astream(
        client,
        model=os.environ.get("MODEL", "default"),
        messages=[{"role": "user", "content": body.ticket}],
        output=Triage,
    )
    return slot_event_response(stream, state_mode="patch", coalesce_ms=50)
