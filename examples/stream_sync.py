"""Stream a ticket triage with the synchronous client, showing the state as it grows.

Uses the server named by ``OPENAI_BASE_URL`` (with ``OPENAI_API_KEY`` and
``SLOTFLIGHT_MODEL``); without it, starts the embedded local model
(``slotflight.local``, needs the ``local`` extra) and constrains it with the plan's
grammar::

    python -m examples.stream_sync
"""

from __future__ import annotations

import json
import sys

from openai import OpenAI

import slotflight
from examples.triage import TICKET, Triage, model_server


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
        print(triage.model_dump_json())  # the last line: the object as JSON
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
