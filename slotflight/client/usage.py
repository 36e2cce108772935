"""Token usage reported by a model server: per request (:class:`TokenUsage`) and per stream.

:class:`TokenUsage` is the one token-count type of slotflight: the SDK reads it from
responses, and the servers in :mod:`slotflight.local` and :mod:`slotflight.testing`
report it (``slotflight.local.Usage`` and ``slotflight.testing.Usage`` are this class).
:class:`Usage` is the usage of a whole stream: one :class:`TokenUsage` per request made.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["TokenUsage", "Usage"]


@dataclass(frozen=True, init=False)
class TokenUsage:
    """Token counts of one request (or a sum of requests).

    ``total_tokens`` defaults to ``prompt_tokens + completion_tokens``.
    ``cached_tokens``: prompt tokens the server took from its cache instead of
    evaluating them (OpenAI's ``usage.prompt_tokens_details.cached_tokens``); ``None``
    when the server did not say. Counts are integers >= 0 (``ValueError`` otherwise).
    """

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    cached_tokens: int | None

    def __init__(
        self,
        prompt_tokens: int = 0,
        completion_tokens: int = 0,
        total_tokens: int | None = None,
        cached_tokens: int | None = None,
    ) -> None:
        total = prompt_tokens + completion_tokens if total_tokens is None else total_tokens
        counts = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": total,
            "cached_tokens": cached_tokens,
        }
        for name, value in counts.items():
            unknown = value is None and name == "cached_tokens"
            if not unknown and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise ValueError(f"TokenUsage.{name} must be an integer >= 0, got {value!r}")
            object.__setattr__(self, name, value)

    def __add__(self, other: TokenUsage) -> TokenUsage:
        cached = (
            None
            if self.cached_tokens is None and other.cached_tokens is None
            else (self.cached_tokens or 0) + (other.cached_tokens or 0)
        )
        return TokenUsage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.total_tokens + other.total_tokens,
            cached,
        )

    @classmethod
    def from_openai(cls, usage: Any) -> TokenUsage:
        """Read an ``openai`` ``CompletionUsage`` (missing or invalid counts read as 0)."""
        prompt = _count(getattr(usage, "prompt_tokens", 0))
        completion = _count(getattr(usage, "completion_tokens", 0))
        total = getattr(usage, "total_tokens", None)
        details = getattr(usage, "prompt_tokens_details", None)
        cached = getattr(details, "cached_tokens", None)
        return cls(
            prompt,
            completion,
            _count(total) if total is not None else prompt + completion,
            _count(cached) if cached is not None else None,
        )

    def to_json(self) -> dict[str, Any]:
        """OpenAI's ``usage`` object; ``prompt_tokens_details`` only when cached is known."""
        data: dict[str, Any] = {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.total_tokens,
        }
        if self.cached_tokens is not None:
            data["prompt_tokens_details"] = {"cached_tokens": self.cached_tokens}
        return data


@dataclass(frozen=True)
class Usage:
    """Usage of a whole stream: one entry per request made, and their sum.

    ``requests[i]`` is the last usage the server reported for request ``i``, ``None``
    when it reported none (it does not support ``stream_options.include_usage``, or the
    request was cut off before its last chunk: early exit, a drop, a timeout). A server
    that sends the usage so far with every chunk leaves a request cut off with the
    figures of the last chunk read. ``total`` sums the reported entries; ``reported``
    says whether every request reported one.
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
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0
