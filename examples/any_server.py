"""Extract an incident from a note with any OpenAI-compatible server (OpenAI, vLLM,
llama.cpp, Ollama, ``slotflight local-server``).

Configure it with environment variables::

    OPENAI_BASE_URL=http://127.0.0.1:8080/v1   # the server's /v1 root
    OPENAI_API_KEY=...                          # any string for servers without keys
    SLOTFLIGHT_MODEL=my-model                   # the model name the server expects
    SLOTFLIGHT_GRAMMAR=llama.cpp                # optional: llama.cpp or vllm, to send
                                                # the plan's GBNF grammar along

    python -m examples.any_server
"""

from __future__ import annotations

import os
import sys

from openai import OpenAI
from pydantic import BaseModel, Field

import slotflight

NOTE = (
    "Incident INC-4127, severity 2: the data disk of database host db-07 is 97% full. "
    "On call: Priya Raman. Plan: first rotate the PostgreSQL logs, then delete backups "
    "older than 30 days, then grow the volume by 200 GB."
)


class Step(BaseModel):
    action: str = Field(max_length=120, description="What to do, in imperative form")


class Incident(BaseModel):
    incident_id: str = Field(max_length=20, description="The incident's id")
    host: str = Field(max_length=60, description="The affected host")
    severity: int = Field(ge=1, le=4, description="The severity the note states")
    on_call: str = Field(max_length=60, description="Who is on call")
    steps: list[Step] = Field(min_length=1, max_length=5, description="The planned steps, in order")


def main() -> int:
    base_url = os.environ.get("OPENAI_BASE_URL")
    model = os.environ.get("SLOTFLIGHT_MODEL")
    if not base_url or not model:
        print("set OPENAI_BASE_URL and SLOTFLIGHT_MODEL (and OPENAI_API_KEY)", file=sys.stderr)
        return 2
    grammar = os.environ.get("SLOTFLIGHT_GRAMMAR") or False
    if grammar not in (False, "llama.cpp", "vllm", "vllm-guided"):
        print("SLOTFLIGHT_GRAMMAR must be llama.cpp, vllm or vllm-guided", file=sys.stderr)
        return 2
    client = OpenAI(base_url=base_url, api_key=os.environ.get("OPENAI_API_KEY", "none"))
    try:
        incident = slotflight.complete(
            client,
            model=model,
            messages=[{"role": "user", "content": f"Extract the incident from this note:\n{NOTE}"}],
            output=Incident,
            grammar=grammar,
            max_attempts=3,
            timeout=180,
            idle_timeout=60,
            temperature=0,
            max_tokens=400,
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
    print(incident.model_dump_json())  # the last line: the object as JSON
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
