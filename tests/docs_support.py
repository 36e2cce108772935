"""The code blocks of README.md and docs/*.md, and what their HTML comments say.

A block is a fenced block with its language. The HTML comments right before it (only
blank lines between) tell the test how to run it, visibly in the Markdown source:

- ``<!-- not run: REASON -->``: the block is not run, for the reason given;
- ``<!-- model answers: TEXT -->``: the scripted model server answers every chat
  completion of the block with TEXT (slot frames);
- ``<!-- continues the block above -->``: the previous Python block of the file runs
  first, in the same program;
- ``<!-- request: METHOD PATH JSON -->``: the block defines an ASGI ``app``, which is
  served and sent this request.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from slotflight.testing import AppServer, Reply, ScriptedServer

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

PYTHON = frozenset({"python", "py"})
SHELL = frozenset({"bash", "sh", "shell", "console"})
#: Blocks other tests check (the JavaScript client's tests type-check these).
CHECKED_ELSEWHERE = frozenset({"js", "jsx", "ts", "tsx", "javascript", "typescript"})

#: A block's programs are small; the bound only stops a hang (the embedded model's
#: blocks load it first).
TIMEOUT_S = 300
#: Replies queued per block: every request of a block (regenerations, continued blocks)
#: gets the same answer.
REPLIES = 50

_FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})(?P<lang>[\w+-]*)\s*$")
_COMMENT = re.compile(r"<!--(.*?)-->", re.S)


@dataclass
class Block:
    """One fenced code block."""

    path: Path
    line: int  # of the opening fence, from 1
    lang: str
    code: str
    comments: list[str] = field(default_factory=list)
    previous: Block | None = None  # the previous Python block of the same file

    @property
    def name(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"

    def directive(self, key: str) -> str | None:
        """The text after ``key:`` in one of the comments, or ``""`` for a bare ``key``."""
        for comment in self.comments:
            head, colon, rest = comment.partition(":")
            if head.strip() == key:
                return rest.strip("\n ") if colon else ""
            if comment.strip() == key:
                return ""
        return None

    @property
    def not_run(self) -> str | None:
        return self.directive("not run")

    @property
    def answer(self) -> str | None:
        text = self.directive("model answers")
        return None if text is None else text + "\n"

    @property
    def continues(self) -> bool:
        return self.directive("continues the block above") is not None

    def program(self) -> str:
        """The block's source, after the blocks it continues."""
        if not self.continues:
            return self.code
        assert self.previous is not None, f"{self.name}: no Python block above to continue"
        return self.previous.program() + "\n" + self.code

    def answers(self) -> str | None:
        """The model's answer for this block or, for a continuation, the nearest one."""
        if self.answer is not None or not self.continues or self.previous is None:
            return self.answer
        return self.previous.answers()


def _comments_before(lines: list[str], index: int) -> list[str]:
    """The HTML comments right before line ``index`` (blank lines may separate them)."""
    text: list[str] = []
    i = index - 1
    while i >= 0:
        if not lines[i].strip():
            i -= 1
            continue
        if not lines[i].rstrip().endswith("-->"):
            break
        end = i
        while i >= 0 and "<!--" not in lines[i]:
            i -= 1
        if i < 0:
            break
        text.insert(0, "\n".join(lines[i : end + 1]))
        i -= 1
    return [m.group(1).strip("\n ") for t in text for m in _COMMENT.finditer(t)]


def blocks(path: Path) -> list[Block]:
    """Every fenced block of ``path``, in order."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    last_python: Block | None = None
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        indent, fence = opening["indent"], opening["fence"]
        body: list[str] = []
        j = i + 1
        while j < len(lines) and lines[j].strip() != fence:
            body.append(lines[j][len(indent) :] if lines[j].startswith(indent) else lines[j])
            j += 1
        block = Block(
            path=path,
            line=i + 1,
            lang=opening["lang"].lower(),
            code="\n".join(body) + "\n",
            comments=_comments_before(lines, i),
            previous=last_python,
        )
        if block.lang in PYTHON:
            last_python = block
        found.append(block)
        i = j + 1
    return found


def all_blocks() -> list[Block]:
    return [block for path in DOCUMENTS for block in blocks(path)]


#: Runs one Python block: top-level ``await`` is allowed (as in ``python -m asyncio``);
#: a block defining an ASGI ``app`` is served and sent the request in
#: ``SLOTFLIGHT_DOC_REQUEST`` (``METHOD PATH JSON``), its answer printed.
RUNNER = """
import ast, asyncio, inspect, json, os, sys

source = open(sys.argv[1], encoding="utf-8").read()
code = compile(source, sys.argv[1], "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
namespace = {"__name__": "__main__"}
if code.co_flags & inspect.CO_COROUTINE:
    asyncio.run(eval(code, namespace))
else:
    exec(code, namespace)
request = os.environ.get("SLOTFLIGHT_DOC_REQUEST")
if request:
    import httpx
    from slotflight.testing import AppServer

    method, path, body = request.split(" ", 2)
    with AppServer(namespace["app"], lifespan="off") as served:
        answer = httpx.request(method, served.url + path, json=json.loads(body), timeout=60)
    print(answer.status_code)
    print(answer.text)
    answer.raise_for_status()
"""


@contextlib.contextmanager
def _servers(block: Block) -> Iterator[dict[str, str]]:
    """The model server (and the gateway the block talks to, if any), as addresses."""
    answer = block.answers()
    with contextlib.ExitStack() as stack:
        addresses: dict[str, str] = {}
        if answer is not None:
            server = stack.enter_context(ScriptedServer([Reply(answer)] * REPLIES))
            addresses["127.0.0.1:8080"] = f"127.0.0.1:{server.port}"
            addresses["OPENAI_BASE_URL"] = server.base_url
            if "127.0.0.1:8000" in block.code:
                from slotflight.web import create_app

                gateway = stack.enter_context(AppServer(create_app(server.base_url)))
                addresses["127.0.0.1:8000"] = f"127.0.0.1:{gateway.port}"
            yield addresses
            assert server.requests, f"{block.name}: the model was never asked"
        else:
            yield addresses


def _workspace(tmp_path: Path) -> Path:
    """An empty folder to run in, where ``benchmarks/`` and ``examples/`` are at hand
    as in a checkout."""
    for name in ("benchmarks", "examples"):
        (tmp_path / name).symlink_to(ROOT / name)
    return tmp_path


def run_block(block: Block, python: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """Run ``block`` with the interpreter ``python`` (and its virtualenv's commands first
    on ``PATH``) in an empty folder, against the servers it needs; fail the calling test
    unless it succeeds."""
    program = block.program()
    cwd = _workspace(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "SLOTFLIGHT_"))}
    env["PATH"] = f"{python.parent}{os.pathsep}{env.get('PATH', '')}"
    if os.environ.get("SLOTFLIGHT_CACHE_DIR"):  # converted weights: this session's cache
        env["SLOTFLIGHT_CACHE_DIR"] = os.environ["SLOTFLIGHT_CACHE_DIR"]
    with _servers(block) as addresses:
        for placeholder, address in addresses.items():
            if placeholder.startswith("127.0.0.1:"):
                program = program.replace(placeholder, address)
        if "OPENAI_BASE_URL" in addresses:
            env["OPENAI_BASE_URL"] = addresses["OPENAI_BASE_URL"]
            env["OPENAI_API_KEY"] = "test-key"
        request = block.directive("request")
        if request:
            env["SLOTFLIGHT_DOC_REQUEST"] = request
        command = _command(block, program, cwd, python)
        done = subprocess.run(
            command, cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT_S
        )
    shown = f"{block.name}\n--- stdout\n{done.stdout[-4000:]}\n--- stderr\n{done.stderr[-4000:]}"
    assert done.returncode == 0, shown
    if "slot-streams" in program or request:  # an SSE stream: it must end with `done`
        assert "event: done" in done.stdout, shown
        assert "event: error" not in done.stdout, shown
    return done


def _command(block: Block, program: str, cwd: Path, python: Path) -> list[str]:
    if block.lang in SHELL:
        lines = program.splitlines()
        if block.lang == "console":  # commands are the lines after a prompt
            lines = [line[2:] for line in lines if line.startswith("$ ")]
        script = cwd / "block.sh"
        script.write_text("set -euo pipefail\n" + "\n".join(lines) + "\n", encoding="utf-8")
        return ["bash", str(script)]
    source = cwd / "block.py"
    source.write_text(program, encoding="utf-8")
    if "def test_" in program:  # a test module: pytest runs it
        test_file = cwd / "test_block.py"
        source.rename(test_file)
        return [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", str(test_file)]
    runner = cwd / "run_block.py"
    runner.write_text(RUNNER, encoding="utf-8")
    return [str(python), str(runner), str(source)]
