"""Stream a ticket triage with the synchronous client, showing the state as it grows.

Uses the server named by ``OPENAI_BASE_URL`` (with ``OPENAI_API_KEY`` and
``SLOTFLIGHT_MODEL``); without it, starts the embedded local model
(``slotflight.local``, needs the ``local`` extra) and constrains it with the plan's
grammar::

    python examples/stream_sync.py
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Iterator
from typing import Any, Literal

from openai import OpenAI
from pydantic import BaseModel, Field

import slotflight

TICKET = (
    "Since Monday the nightly CSV export fails for every file over 2 GB with "
    "'worker killed'. Finance needs the numbers by Friday. Very frustrating!"
)


class Triage(BaseModel):
    summary: str = Field(description="One-line summary of the problem")
    priority: int = Field(ge=1, le=5, description="1 is lowest, 5 is most urgent")
    sentiment: Literal["positive", "neutral", "negative"]
    tags: list[str] = Field(default_factory=list, max_length=4, description="Short topic tags")


@contextlib.contextmanager
def model_server() -> Iterator[dict[str, Any]]:
    """The server to use: from the environment, else the embedded local model."""
    base_url = os.environ.get("OPENAI_BASE_URL")
    if base_url:
        yield {
            "base_url": base_url,
            "api_key": os.environ.get("OPENAI_API_KEY", "none"),
            "model": os.environ.get("SLOTFLIGHT_MODEL", "gpt-4o-mini"),
            "grammar": False,
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


def main() -> int:
    with model_server() as server:
        client = OpenAI(base_url=server["base_url"], api_key=server["api_key"])
        with slotflight.stream(
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
                for event in s:
                    if event.type in ("slot-complete", "slot-failed", "retry", "done"):
                        # the state is valid JSON after every event
                        print(f"{event.type:14} {json.dumps(s.state, ensure_ascii=False)}")
                triage = s.final()
            except slotflight.SlotflightError as exc:
                print(f"failed: {exc}", file=sys.stderr)
                return 1
        print(repr(triage))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
