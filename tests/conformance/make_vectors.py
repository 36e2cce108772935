"""Writes the conformance vectors in this folder from the reference implementation.

Each vector is a JSON file another implementation can run: compile ``schema``, feed
``chunks`` in order (``{"text": ...}`` or ``{"hex": ...}`` for raw bytes) to a reader of
frame syntax ``syntax``, then close (``complete`` says whether the stream ended normally).
Expected: ``events`` (every event but ``slot-delta``, in order, as ``to_json()`` with
patches), ``deltas`` (the concatenated delta text per path), ``state`` (the final state)
and ``ok``.

The vectors of every registered syntax are in ``<syntax>/``. The syntax-neutral cases
(:data:`NEUTRAL`, and :data:`END_LINE` for the syntaxes with an end line) are written by
each syntax's own writer; the cases of one syntax only (:data:`ONLY`, such as v1's nested
and mismatched tags) are text as written there.

Run ``python -m tests.conformance.make_vectors`` only when the protocol changes on
purpose; the test suite checks the files against the implementation.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from slotflight.assemble.assembler import Assembler
from slotflight.plan.compiler import compile as compile_schema
from slotflight.syntax import SYNTAXES
from tests.assembler_support import TRIAGE_SCHEMA, WIDER_PLAN, end_marker, frames

HERE = Path(__file__).parent
PLAN = compile_schema(TRIAGE_SCHEMA)

#: A case: the chunks to feed (text or bytes), and whether the stream completed.
Case = dict[str, Any]

#: The required scalar frames every case but a few starts with.
F = [("1", "Export job failed"), ("2", 3), ("3", "negative"), ("4", True)]


def _write(syntax: str, pairs: list[tuple[str, Any]], *, end: bool = True) -> str:
    return frames(pairs, syntax, PLAN) + (end_marker(syntax, PLAN) if end else "")


def _truncated(syntax: str) -> Case:
    """The stream is cut inside the last frame's value (``true``)."""
    text = _write(syntax, F, end=False)
    last = len(_write(syntax, F[:-1], end=False))
    return {"chunks": [text[: text.index("true", last) + 2]], "complete": False}


def _utf8_split(syntax: str) -> Case:
    data = _write(syntax, [*F, ("5:0", "日本")]).encode()
    cut = data.index("日".encode()) + 1
    return {"bytes": True, "chunks": [data[:cut], data[cut:]]}


def _crlf_split(syntax: str) -> Case:
    text = _write(syntax, F).replace("\n", "\r\n")
    cut = text.index("\r") + 1  # between a "\r" and its "\n"
    return {"chunks": [text[:cut], text[cut:]]}


def _invalid_utf8(syntax: str) -> Case:
    data = _write(syntax, [("1", "bad ~ byte")]).encode()
    return {"bytes": True, "chunks": [data.replace(b"~", b"\xff")]}


#: Cases every syntax has, written by its writer.
NEUTRAL: dict[str, Callable[[str], Case]] = {
    "basic": lambda s: {
        "chunks": [_write(s, [*F, ("5:0", "export"), ("6:0", "Ada"), ("7:0", "2025-01-31")])]
    },
    "split-everywhere": lambda s: {"chunks": list(_write(s, [*F, ("5:0", "über 😀")]))},
    "utf8-split-bytes": _utf8_split,
    "crlf-split": _crlf_split,
    "noise-and-fences": lambda s: {
        "chunks": ["Sure!\n```\n", _write(s, F), "```\nHope this helps.\n"]
    },
    "unknown-id": lambda s: {
        "chunks": [frames([("13:0", "who?\nme")], s, WIDER_PLAN), _write(s, F)]
    },
    "duplicate-frame": lambda s: {"chunks": [_write(s, [*F, ("2", 5)])]},
    "truncated": _truncated,
    "invalid-values": lambda s: {
        "chunks": [_write(s, [("2", "high"), ("3", "furious"), ("4", "yes")])]
    },
    "indexes-skipped-repeated": lambda s: {
        "chunks": [_write(s, [("5:0", "a"), ("5:2", "b"), ("5:2", "c")])]
    },
    "invalid-utf8": _invalid_utf8,
    # a reasoning model's thinking before its answer: frames written inside the block
    # are not read, the answer after it is (split at every character)
    "reasoning-block": lambda s: {
        "chunks": list(
            "\n<think>\n"
            + _write(s, [("1", "thinking out loud"), ("2", 5)])
            + "</think>\n\n"
            + _write(s, F)
        )
    },
    "reasoning-unclosed": lambda s: {
        "chunks": ["<thinking>\n", _write(s, F)],
        "complete": False,
    },
    # only the exact tags open a block: anything else is read as it is
    "reasoning-near-miss": lambda s: {"chunks": ["<thinker>\n", _write(s, F)]},
}

#: Cases of every syntax with an end line, written by its writer.
END_LINE: dict[str, Callable[[str], Case]] = {
    # the end line with the most trailing blanks it may have, in one chunk: what
    # follows it is ignored (a lexer holds the line start that far, however it is split)
    "end-trailing-blanks": lambda s: {
        "chunks": [_write(s, F, end=False) + "end" + " " * 32 + "\n" + _write(s, [("5:0", "late")])]
    },
}

#: Text written as JSON strings, and raw, in either block syntax (v4 reads a text value
#: that starts with a quote as a JSON string; v4-quoted also asks for one per list item).
_BLOCK_QUOTES: dict[str, Case] = {
    "quoted-and-raw-text": {
        "chunks": [
            'summary: "Export \\"job\\" fai',
            'led"\npriority: 3\nsentiment: negative\nurgent: true\ntags:\n- "export"\n',
            '- bug\n- "ui" (added later)\n- "null"\n- "cut\\u00',
            'e9"\nend\n',
        ]
    },
    # a scalar list's name waits, blanks and all, for its line to show an item (v3's
    # one-line form) or nothing (a block): the quote then opens the item's string
    "quoted-after-held-blanks": {
        "chunks": [
            "summary: s\npriority: 3\nsentiment: neutral\nurgent: false\ntags:",
            "   ",
            '"inline"\ntags:\n- "block"\nend\n',
        ]
    },
}

#: Cases of one syntax only, as text written in that syntax.
ONLY: dict[str, dict[str, Case]] = {
    "v1": {
        "inline-frames": {"chunks": ["<1>Ada</1>\n<2>3</2>\n<3>neutral</3>\n<4>false</4>\n"]},
        "nested-open": {"chunks": ["<1>\nnot closed\n<2>\n3\n</2>\n"]},
        "mismatched-close": {"chunks": ["<1>\nsummary\n</2>\n"]},
        "tag-text-in-values": {"chunks": ["<1>\nuse </1> and <b>bold</b>\n</1>\n"]},
        # a line of at most 32 blanks between frames is a blank line, a longer one noise
        "blank-lines-between-frames": {
            "chunks": [
                "<1>\nExport job failed\n</1>\n" + " " * 32 + "\n<2>\n3\n</2>\n",
                " " * 40 + "\n<3>\nnegative\n</3>\n<4>\ntrue\n</4>\n",
            ]
        },
    },
    "v4": _BLOCK_QUOTES,
    "v4-quoted": _BLOCK_QUOTES,
}


def cases_for(syntax: str) -> dict[str, Case]:
    """Every case of ``syntax``: the neutral ones written by its writer (and those of a
    syntax with an end line, where it has one), and its own."""
    out = {name: make(syntax) for name, make in NEUTRAL.items()}
    if end_marker(syntax, PLAN):
        out.update({name: make(syntax) for name, make in END_LINE.items()})
    out.update(ONLY.get(syntax, {}))
    return out


def run_vector(
    schema: dict[str, Any], chunks: list[dict[str, str]], complete: bool, syntax: str
) -> dict[str, Any]:
    asm = Assembler(compile_schema(schema), syntax=syntax)
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
    for syntax in SYNTAXES:
        folder = HERE / syntax
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir()
        for name, case in cases_for(syntax).items():
            if case.get("bytes"):
                chunks = [{"hex": c.hex()} for c in case["chunks"]]
            else:
                chunks = [{"text": c} for c in case["chunks"]]
            complete = case.get("complete", True)
            vector = {
                "name": name,
                "syntax": syntax,
                "schema": TRIAGE_SCHEMA,
                "chunks": chunks,
                "complete": complete,
            }
            vector["expected"] = run_vector(TRIAGE_SCHEMA, chunks, complete, syntax)
            text = json.dumps(vector, indent=1, ensure_ascii=False) + "\n"
            (folder / f"{name}.json").write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
