"""Every code block of README.md and docs/*.md runs, as a user would run it.

Python blocks run as programs in a fresh interpreter; shell blocks run in bash with
this virtualenv's commands first on ``PATH``. Model calls go over real HTTP to a
scripted OpenAI-compatible server answering what the block's ``model answers`` comment
says (``OPENAI_BASE_URL`` and ``OPENAI_API_KEY`` point at it); blocks that start the
embedded model run it. The addresses the docs use stand for servers the test starts:
``127.0.0.1:8080`` for the model server, ``127.0.0.1:8000`` for a gateway in front of it.
A block that cannot run says why in a ``not run`` comment right before it; other
languages (text, JSON, HTML) are not programs, and the JavaScript blocks are checked by
the JavaScript client's own tests. See ``tests/docs_support.py`` for the comments.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.docs_support import CHECKED_ELSEWHERE, PYTHON, SHELL, Block, all_blocks, run_block
from tests.local_support import require_local_model

BLOCKS = all_blocks()
RUNNABLE = [b for b in BLOCKS if b.lang in PYTHON | SHELL and b.not_run is None]


def test_every_block_is_run_or_says_why_not() -> None:
    for block in BLOCKS:
        reason = block.not_run
        if reason is not None:
            assert reason, f"{block.name}: a `not run` comment needs its reason"
            assert block.lang not in CHECKED_ELSEWHERE, f"{block.name}: checked elsewhere"
    skipped = [b for b in BLOCKS if b.not_run is not None]
    assert len(skipped) <= len(RUNNABLE) // 2, "most blocks run; keep the exceptions few"
    assert any(b.path.name == "README.md" and b.lang in PYTHON for b in RUNNABLE)


@pytest.mark.parametrize("block", RUNNABLE, ids=[b.name for b in RUNNABLE])
def test_block_runs(block: Block, tmp_path: Path) -> None:
    if "start_local_server" in block.program() or "slotflight.local" in block.program():
        require_local_model()
    run_block(block, Path(sys.executable), tmp_path)
