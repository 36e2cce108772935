"""Structured output from any OpenAI-compatible server (OpenAI, vLLM, llama.cpp, Ollama…).

Configure it with environment variables::

    OPENAI_BASE_URL=http://127.0.0.1:8080/v1   # the server's /v1 root
    OPENAI_API_KEY=...                          # any string for servers without keys
    SLOTFLIGHT_MODEL=my-model                   # the model name the server expects
    SLOTFLIGHT_GRAMMAR=llama.cpp                # optional: llama.cpp or vllm, to send
                                                # the plan's GBNF grammar along

    python examples/any_server.py
"""

from __future__ import annotations

import os
import sys

from openai import OpenAI
from pydantic import BaseModel, Field

import slotflight


class Step(BaseModel):
    action: str = Field(description="What to do, in imperative form")
    owner: str = Field(description="Who does it")


class Runbook(BaseModel):
    title: str
    severity: int = Field(ge=1, le=4, description="1 is the most severe")
    steps: list[Step] = Field(min_length=1, max_length=5)
    notes: str | None = None


def main() -> int:
    base_url = os.environ.get("OPENAI_BASE_URL")
    model = os.environ.get("SLOTFLIGHT_MODEL")
    if not base_url or not model:
        print("set OPENAI_BASE_URL and SLOTFLIGHT_MODEL (and OPENAI_API_KEY)", file=sys.stderr)
        return 2
    grammar = os.environ.get("SLOTFLIGHT_GRAMMAR") or False
    if grammar not in (False, "llama.cpp", "vllm"):
        print("SLOTFLIGHT_GRAMMAR must be llama.cpp or vllm", file=sys.stderr)
        return 2
    client = OpenAI(base_url=base_url, api_key=os.environ.get("OPENAI_API_KEY", "none"))
    try:
        runbook = slotflight.complete(
            client,
            model=model,
            messages=[
                {"role": "user", "content": "Write a runbook for a full disk on a database host."}
            ],
            output=Runbook,
            grammar=grammar,
            max_attempts=3,
            timeout=180,
            idle_timeout=60,
            temperature=0.2,
        )
    except slotflight.OutputValidationError as exc:
        print(f"still invalid after {exc.attempts} attempts:", file=sys.stderr)
        for error in exc.errors:
            print(f"  {error.slot or error.location}: {error.message}", file=sys.stderr)
        print(f"partial: {exc.partial}", file=sys.stderr)
        return 1
    except slotflight.TransportError as exc:
        print(f"server problem: {exc}", file=sys.stderr)
        return 1
    print(runbook.model_dump_json(indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
