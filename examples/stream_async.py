"""Stream a ticket triage and print every slot the moment it validates (asyncio).

Uses the server named by ``OPENAI_BASE_URL`` (with ``OPENAI_API_KEY`` and
``SLOTFLIGHT_MODEL``); without it, starts the embedded local model
(``slotflight.local``, needs the ``local`` extra) and constrains it with the plan's
grammar::

    python examples/stream_async.py
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import Iterator
from typing import Any, Literal

from openai import AsyncOpenAI
from pydantic import BaseModel, Field

import slotflight

TICKET = (
    "Hi, this is Dana Whitfield from Harbor Freight Logistics. Since Monday the nightly "
    "CSV export fails for every file over 2 GB with 'worker killed'. Finance needs the "
    "numbers by Friday. Very frustrating!"
)


class Triage(BaseModel):
    # Bounded strings keep a small model from running on: with a grammar, each one is
    # a single line of at most that many characters.
    customer: str = Field(max_length=80, description="Full name of the person writing")
    company: str = Field(max_length=80, description="The customer's company")
    summary: str = Field(max_length=160, description="What fails, in one sentence")
    area: Literal["export", "billing", "login", "api"] = Field(description="Where the problem is")
    sentiment: Literal["negative", "neutral", "positive"] = Field(
        description="How the customer feels"
    )
    deadline: str | None = Field(
        default=None, max_length=40, description="When the customer needs a fix, as written"
    )


@contextlib.contextmanager
def model_server() -> Iterator[dict[str, Any]]:
    """The server to use: from the environment, else the embedded local model."""
    base_url = os.environ.get("OPENAI_BASE_URL")
    if base_url:
        yield {
            "base_url": base_url,
            "api_key": os.environ.get("OPENAI_API_KEY", "none"),
            "model": os.environ.get("SLOTFLIGHT_MODEL", "gpt-4o-mini"),
            # llama.cpp or vllm: send the plan's grammar to a server that takes one
            "grammar": os.environ.get("SLOTFLIGHT_GRAMMAR") or False,
        }
        return
    from slotflight.local import start_local_server

    with start_local_server() as server:
        yield {
            "base_url": server.base_url,
            "api_key": "local",
            "model": server.model,
            "grammar": "llama.cpp",
        }


async def main() -> int:
    with model_server() as server:
        client = AsyncOpenAI(base_url=server["base_url"], api_key=server["api_key"])
        async with slotflight.astream(
            client,
            model=server["model"],
            messages=[{"role": "user", "content": f"Triage this support ticket:\n{TICKET}"}],
            output=Triage,
            grammar=server["grammar"],
            temperature=0,
            max_tokens=400,
            timeout=120,
        ) as s:
            try:
                async for event in s:
                    if event.type == "slot-complete":
                        data = event.to_json()
                        print(f"  ✓ {data['slot']} = {data['value']!r}")
                    elif event.type == "slot-failed":
                        data = event.to_json()
                        print(f"  ✗ {data['slot']}: {data['error']['message']}")
                    elif event.type == "retry":
                        print(f"  ↻ attempt {event.to_json()['attempt']}: asking again")
                triage = await s.final()
            except slotflight.SlotflightError as exc:
                print(f"failed: {exc}", file=sys.stderr)
                return 1
        print(f"tokens: {s.usage.total.total_tokens} over {len(s.usage.requests)} request(s)")
        print(triage.model_dump_json())  # the last line: the object as JSON
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
