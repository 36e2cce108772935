"""Stream a ticket triage and print every slot the moment it validates (asyncio).

Uses the server named by ``OPENAI_BASE_URL`` (with ``OPENAI_API_KEY`` and
``SLOTFLIGHT_MODEL``); without it, starts the embedded local model
(``slotflight.local``, needs the ``local`` extra) and constrains it with the plan's
grammar::

    python -m examples.stream_async
"""

from __future__ import annotations

import asyncio
import sys

from openai import AsyncOpenAI

import slotflight
from examples.triage import TICKET, Triage, model_server


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
