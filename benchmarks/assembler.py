"""Assembler throughput against the peers, side by side in one process.

The same document (a long multi-line string, many array items, nested objects in array
items) is streamed in 4-character chunks to:

- ``slotflight``: :class:`slotflight.Assembler` on the frames of every registered syntax
  (v3, the default, first);
- ``jiter``: the JSON text re-parsed after every chunk with
  ``pydantic_core.from_json(buf, allow_partial=True)`` (what the OpenAI SDK does);
- ``partial-json-parser``: ``partial_json_parser.loads(buf)`` after every chunk;
- ``slot-flight``: slot-flight 0.2.1's engine on the same v1 frames.

Peers run up to the largest size they finish within the time budget. Run with
``python -m benchmarks.assembler`` (``--sizes 10000,100000`` to choose sizes).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import platform
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from slotflight.assemble.assembler import Assembler
from slotflight.plan.compiler import compile as compile_schema
from slotflight.syntax import DEFAULT_SYNTAX, SYNTAXES, render_frames

CHUNK = 4
RESULTS = Path(__file__).parent / "results" / "assembler.json"
WORDS = [
    "export",
    "job",
    "failed",
    "for",
    "large",
    "workspaces",
    "while",
    "the",
    "queue",
    "kept",
    "retrying",
    "élan",
    "日本",
]


class Author(BaseModel):
    name: str
    email: str


class Section(BaseModel):
    heading: str
    body: str
    words: int
    author: Author


class Document(BaseModel):
    title: str
    abstract: str
    tags: list[str]
    sections: list[Section]


def make_document(size: int) -> dict[str, Any]:
    """A document whose JSON is about ``size`` characters."""

    def text(n: int, *, lines: bool = False) -> str:
        out, i = [], 0
        while sum(len(w) + 1 for w in out) < n:
            out.append(WORDS[i % len(WORDS)] + ("\n" if lines and i % 12 == 11 else ""))
            i += 1
        return " ".join(out).replace("\n ", "\n").strip()

    n_tags = max(1, size // 4 // 12)
    n_sections = max(1, size // 2 // 260)
    return {
        "title": "Quarterly reliability review",
        "abstract": text(size // 4, lines=True),
        "tags": [f"tag-{i:05d}" for i in range(n_tags)],
        "sections": [
            {
                "heading": f"Section {i}",
                "body": text(160),
                "words": 160 + i,
                "author": {"name": f"Author {i}", "email": f"a{i}@example.com"},
            }
            for i in range(n_sections)
        ],
    }


def chunks(text: str) -> list[str]:
    return [text[i : i + CHUNK] for i in range(0, len(text), CHUNK)]


def run_slotflight(plan: Any, syntax: str) -> Callable[[list[str]], Any]:
    def run(pieces: list[str]) -> Any:
        asm = Assembler(plan, syntax=syntax)
        for piece in pieces:
            asm.feed(piece)
        asm.close()
        assert asm.outcome.ok, asm.outcome.errors[:3]
        return asm.state

    return run


def run_jiter(pieces: list[str]) -> Any:
    from pydantic_core import from_json

    buf = ""
    value = None
    for piece in pieces:
        buf += piece
        value = from_json(buf, allow_partial=True)
    return value


def run_partial_json_parser(pieces: list[str]) -> Any:
    import partial_json_parser

    buf = ""
    value = None
    for piece in pieces:
        buf += piece
        value = partial_json_parser.loads(buf)
    return value


def run_slot_flight(pieces: list[str]) -> Any:
    from slot_flight import SlotDefinition, SlotFlight

    paths = [
        "title",
        "abstract",
        "tags[]",
        "sections[].heading",
        "sections[].body",
        "sections[].words",
        "sections[].author.name",
        "sections[].author.email",
    ]

    async def generate(_request: Any) -> AsyncIterator[str]:
        for piece in pieces:
            yield piece

    async def main() -> Any:
        flight = SlotFlight(slots=[SlotDefinition(path=p) for p in paths], generate=generate)
        state = None
        async for event in flight.run():
            state = event.get("state", state)
        return state

    return asyncio.run(main())


def measure(fn: Callable[[list[str]], Any], pieces: list[str], repeat: int = 3) -> float:
    """Best of ``repeat`` runs (one run when it takes over two seconds), for every engine."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn(pieces)
        best = min(best, time.perf_counter() - start)
        if best > 2.0:
            break
    return best


def slope(points: list[tuple[int, float]]) -> float | None:
    """Least-squares slope of log(time) against log(size)."""
    if len(points) < 2:
        return None
    xs = [math.log(s) for s, _ in points]
    ys = [math.log(t) for _, t in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    num = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    den = sum((x - mx) ** 2 for x in xs)
    return num / den


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,40000,100000,200000,1000000")
    parser.add_argument("--budget", type=float, default=60.0, help="seconds a peer may take")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]

    plan = compile_schema(Document)
    syntaxes = [DEFAULT_SYNTAX, *(name for name in SYNTAXES if name != DEFAULT_SYNTAX)]
    runners: dict[str, tuple[str, Callable[[list[str]], Any]]] = {
        **{f"slotflight {name}": (name, run_slotflight(plan, name)) for name in syntaxes},
        "jiter re-parse": ("json", run_jiter),
        "partial-json-parser": ("json", run_partial_json_parser),
        "slot-flight 0.2.1": ("v1", run_slot_flight),
    }
    rows: list[dict[str, Any]] = []
    last: dict[str, tuple[int, float]] = {}
    for size in sizes:
        doc = make_document(size)
        texts = {"json": json.dumps(doc, ensure_ascii=False)}
        for syntax in syntaxes:
            try:
                texts[syntax] = render_frames(plan, doc, syntax=syntax)
            except (ValueError, NotImplementedError):
                continue
        for name, (fmt, fn) in runners.items():
            if fmt not in texts:
                continue
            if name in last:  # predict quadratic peers; skip what would blow the budget
                prev_size, prev_t = last[name]
                if prev_t * (size / prev_size) ** 2 > args.budget and not name.startswith(
                    "slotflight"
                ):
                    continue
            pieces = chunks(texts[fmt])
            seconds = measure(fn, pieces)
            last[name] = (size, seconds)
            rows.append(
                {
                    "engine": name,
                    "size_chars": len(texts[fmt]),
                    "target_size": size,
                    "chunks": len(pieces),
                    "seconds": seconds,
                    "us_per_chunk": seconds / len(pieces) * 1e6,
                }
            )
            print(
                f"{name:22s} {size:>9,d}  {seconds:9.3f} s  {seconds / len(pieces) * 1e6:9.1f} µs/chunk",
                flush=True,
            )

    slopes = {
        name: slope([(r["size_chars"], r["seconds"]) for r in rows if r["engine"] == name])
        for name in runners
    }
    ratios: dict[str, Any] = {}
    for size in sizes:
        for base in dict.fromkeys((DEFAULT_SYNTAX, "v1")):  # the default; slot-flight's frames
            ours = next(
                (
                    r
                    for r in rows
                    if r["engine"] == f"slotflight {base}" and r["target_size"] == size
                ),
                None,
            )
            if ours is None:
                continue
            for r in rows:
                if r["target_size"] == size and not r["engine"].startswith("slotflight"):
                    key = f"{r['engine']} / slotflight {base} @ {size}"
                    ratios[key] = r["seconds"] / ours["seconds"]
    result = {
        "chunk_chars": CHUNK,
        "machine": {
            "python": platform.python_version(),
            "processor": platform.processor() or platform.machine(),
            "system": platform.platform(),
        },
        "rows": rows,
        "loglog_slope": slopes,
        "speedup": ratios,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    print("log-log slope:", {k: round(v, 3) for k, v in slopes.items() if v is not None})
    for key, value in ratios.items():
        print(f"{key}: {value:,.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
