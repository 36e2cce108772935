"""Writes the conformance vectors in this folder from the reference implementation.

Each vector is a JSON file another implementation can run: compile ``schema``, feed
``chunks`` in order (``{"text": ...}`` or ``{"hex": ...}`` for raw bytes), then close
(``complete`` says whether the stream ended normally). Expected: ``events`` (every
event but ``slot-delta``, in order, as ``to_json()`` with patches), ``deltas`` (the
concatenated delta text per path), ``state`` (the final state) and ``ok``.

Run ``python -m tests.conformance.make_vectors`` only when the protocol changes on
purpose; the test suite checks the files against the implementation.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from slotflight.assemble.assembler import Assembler
from slotflight.plan.compiler import compile as compile_schema
from tests.assembler_support import TRIAGE_SCHEMA

HERE = Path(__file__).parent

F = "<1>\nExport job failed\n</1>\n<2>\n3\n</2>\n<3>\nnegative\n</3>\n<4>\ntrue\n</4>\n"
CASES: dict[str, dict[str, Any]] = {
    "basic": {
        "chunks": [F + "<5:0>\nexport\n</5:0>\n<6:0>\nAda\n</6:0>\n<7:0>\n2025-01-31\n</7:0>\n"]
    },
    "split-everywhere": {"chunks": list(F + "<5:0>\nüber 😀\n</5:0>\n")},
    "utf8-split-bytes": {
        "bytes": True,
        "chunks": [
            F.encode() + "<5:0>\n日本\n</5:0>\n".encode()[:9],
            "<5:0>\n日本\n</5:0>\n".encode()[9:],
        ],
    },
    "crlf-split": {"chunks": [F.replace("\n", "\r\n")[:5], F.replace("\n", "\r\n")[5:]]},
    "inline-frames": {"chunks": ["<1>Ada</1>\n<2>3</2>\n<3>neutral</3>\n<4>false</4>\n"]},
    "noise-and-fences": {"chunks": ["Sure!\n```\n", F, "```\nHope this helps.\n"]},
    "unknown-id": {"chunks": ["<42>\nwho?\n</42>\n", F]},
    "duplicate-frame": {"chunks": [F, "<2>\n5\n</2>\n"]},
    "nested-open": {"chunks": ["<1>\nnot closed\n<2>\n3\n</2>\n"]},
    "mismatched-close": {"chunks": ["<1>\nsummary\n</2>\n"]},
    "truncated": {"chunks": [F[:-12]], "complete": False},
    "invalid-values": {"chunks": ["<2>\nhigh\n</2>\n<3>\nfurious\n</3>\n<4>\nyes\n</4>\n"]},
    "indexes-skipped-repeated": {
        "chunks": ["<5:0>\na\n</5:0>\n<5:2>\nb\n</5:2>\n<5:2>\nc\n</5:2>\n"]
    },
    "invalid-utf8": {"bytes": True, "chunks": [b"<1>\nbad \xff byte\n</1>\n"]},
    "tag-text-in-values": {"chunks": ["<1>\nuse </1> and <b>bold</b>\n</1>\n"]},
}


def run_vector(
    schema: dict[str, Any], chunks: list[dict[str, str]], complete: bool
) -> dict[str, Any]:
    asm = Assembler(compile_schema(schema))
    events = []
    for chunk in chunks:
        data: str | bytes = bytes.fromhex(chunk["hex"]) if "hex" in chunk else chunk["text"]
        events += asm.feed(data)
    events += asm.close(complete=complete)
    deltas: dict[str, str] = {}
    for e in events:
        if e.type == "slot-delta":
            deltas[e.path] = deltas.get(e.path, "") + e.to_json()["delta"]
    return {
        "events": [e.to_json() for e in events if e.type != "slot-delta"],
        "deltas": deltas,
        "state": asm.state,
        "ok": asm.outcome.ok,
    }


def main() -> None:
    for name, case in CASES.items():
        if case.get("bytes"):
            chunks = [{"hex": c.hex()} for c in case["chunks"]]
        else:
            chunks = [{"text": c} for c in case["chunks"]]
        complete = case.get("complete", True)
        vector = {
            "name": name,
            "syntax": "v1",
            "schema": TRIAGE_SCHEMA,
            "chunks": chunks,
            "complete": complete,
        }
        vector["expected"] = run_vector(TRIAGE_SCHEMA, chunks, complete)
        (HERE / f"{name}.json").write_text(json.dumps(vector, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
