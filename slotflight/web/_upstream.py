"""The gateway's model-server client: ``openai.AsyncOpenAI`` with lean stream chunks.

``openai`` turns every streamed chunk into a ``ChatCompletionChunk`` model, which costs
more CPU than everything else the gateway does per chunk (profile of
``benchmarks/sse_load.py``: about 40 % of the gateway's time). The slot stream reads
only ``choices[i].index``, ``choices[i].delta.content`` and ``usage`` of a chunk, so
:class:`LeanChunkClient` builds just those as plain objects. Everything else (the
request, status errors, timeouts, dropped connections, ``error`` payloads inside the
stream, invalid JSON) stays ``openai``'s own code path, unchanged.

The seam is ``openai``'s ``_process_response_data``: should a later ``openai`` stop
calling it, chunks are simply ``openai``'s models again (slower, same behaviour).
"""

from __future__ import annotations

from typing import Any, cast

import openai
from openai.types.chat import ChatCompletionChunk

__all__ = ["LeanChunkClient"]


class _Namespace:
    """Attributes from a mapping; what is absent reads as ``None``."""

    def __init__(self, fields: dict[str, Any]) -> None:
        self.__dict__.update(fields)

    def __getattr__(self, name: str) -> None:
        return None


def _chunk(data: object) -> _Namespace:
    """The parts of a ``chat.completion.chunk`` the slot stream reads. O(size)."""
    fields = data if isinstance(data, dict) else {}
    usage = fields.get("usage")
    choices = []
    for choice in fields.get("choices") or ():
        if not isinstance(choice, dict):
            continue
        delta = choice.get("delta")
        content = delta.get("content") if isinstance(delta, dict) else None
        choices.append(
            _Namespace(
                {
                    "index": choice.get("index", 0),
                    "delta": _Namespace({"content": content if isinstance(content, str) else None}),
                    "finish_reason": choice.get("finish_reason"),
                }
            )
        )
    return _Namespace(
        {
            "choices": choices,
            "usage": _Namespace(usage) if isinstance(usage, dict) else None,
        }
    )


class LeanChunkClient(openai.AsyncOpenAI):
    """An ``openai.AsyncOpenAI`` whose streamed chat-completion chunks are plain objects
    with ``choices`` (``index``, ``delta.content``, ``finish_reason``) and ``usage``."""

    def _process_response_data(self, *, data: object, cast_to: type[Any], response: Any) -> Any:
        if cast_to is ChatCompletionChunk:
            return cast(Any, _chunk(data))
        return super()._process_response_data(data=data, cast_to=cast_to, response=response)
