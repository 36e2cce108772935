"""Token usage reported by the model server, per request and in total."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["TokenUsage", "Usage"]


@dataclass(frozen=True)
class TokenUsage:
    """Token counts of one request (or a sum of requests)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0

    def __add__(self, other: TokenUsage) -> TokenUsage:
        return TokenUsage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.total_tokens + other.total_tokens,
        )

    @classmethod
    def from_openai(cls, usage: Any) -> TokenUsage:
        """Read an ``openai`` ``CompletionUsage`` (missing counts read as 0)."""
        prompt = _count(getattr(usage, "prompt_tokens", 0))
        completion = _count(getattr(usage, "completion_tokens", 0))
        total = getattr(usage, "total_tokens", None)
        return cls(prompt, completion, _count(total) if total is not None else prompt + completion)

    def to_json(self) -> dict[str, int]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.total_tokens,
        }


@dataclass(frozen=True)
class Usage:
    """Usage of a whole stream: one entry per request made, and their sum.

    ``requests[i]`` is ``None`` when the server reported no usage for request ``i``
    (it does not support ``stream_options.include_usage``, or the request was cut off
    before its last chunk: early exit, a drop, a timeout). ``total`` sums the reported
    entries; ``reported`` says whether every request reported one.
    """

    requests: tuple[TokenUsage | None, ...] = ()

    @property
    def total(self) -> TokenUsage:
        total = TokenUsage()
        for usage in self.requests:
            if usage is not None:
                total = total + usage
        return total

    @property
    def reported(self) -> bool:
        return bool(self.requests) and all(u is not None for u in self.requests)

    def to_json(self) -> dict[str, Any]:
        return {
            "requests": [None if u is None else u.to_json() for u in self.requests],
            "total": self.total.to_json(),
        }


def _count(value: Any) -> int:
    return value if isinstance(value, int) and value >= 0 else 0
