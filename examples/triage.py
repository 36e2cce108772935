"""What the streaming examples share: a support ticket, the model of the facts it
states, and the model server to ask (the one ``OPENAI_BASE_URL`` names, else the
embedded local model)."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import Any, Literal

from pydantic import BaseModel, Field

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
        # llama.cpp, vllm or vllm-guided: send the plan's grammar to a server that takes one
        grammar = os.environ.get("SLOTFLIGHT_GRAMMAR") or False
        if grammar not in (False, "llama.cpp", "vllm", "vllm-guided"):
            print("SLOTFLIGHT_GRAMMAR must be llama.cpp, vllm or vllm-guided", file=sys.stderr)
            raise SystemExit(2)
        yield {
            "base_url": base_url,
            "api_key": os.environ.get("OPENAI_API_KEY", "none"),
            "model": os.environ.get("SLOTFLIGHT_MODEL", "gpt-4o-mini"),
            "grammar": grammar,
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
