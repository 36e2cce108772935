"""TokenUsage: the one token-count type the SDK reads and the servers report."""

from __future__ import annotations

import pytest
from openai.types import CompletionUsage
from openai.types.completion_usage import PromptTokensDetails

import slotflight
import slotflight.testing
from slotflight import TokenUsage


def test_the_servers_report_the_sdks_type() -> None:
    assert slotflight.testing.Usage is TokenUsage
    assert pytest.importorskip("slotflight.local").Usage is TokenUsage
    assert slotflight.testing.TokenUsage is slotflight.TokenUsage


def test_total_defaults_to_the_sum_and_cached_is_unknown_until_given() -> None:
    usage = TokenUsage(3, 4)
    assert (usage.total_tokens, usage.cached_tokens) == (7, None)
    assert usage.to_json() == {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}
    assert TokenUsage(3, 4, 9, cached_tokens=2).to_json() == {
        "prompt_tokens": 3,
        "completion_tokens": 4,
        "total_tokens": 9,
        "prompt_tokens_details": {"cached_tokens": 2},
    }


@pytest.mark.parametrize(
    "bad", [{"prompt_tokens": -1}, {"total_tokens": True}, {"cached_tokens": 1.5}]
)
def test_counts_are_non_negative_integers(bad: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        TokenUsage(**bad)  # type: ignore[arg-type]


def test_sums_keep_cached_tokens_when_any_request_reported_them() -> None:
    assert (TokenUsage(1, 1) + TokenUsage(2, 2)).cached_tokens is None
    assert (TokenUsage(1, 1) + TokenUsage(5, 2, cached_tokens=4)) == TokenUsage(6, 3, 9, 4)


def test_openai_usage_is_read_with_its_cached_tokens() -> None:
    reported = CompletionUsage(
        prompt_tokens=10,
        completion_tokens=2,
        total_tokens=12,
        prompt_tokens_details=PromptTokensDetails(cached_tokens=8),
    )
    assert TokenUsage.from_openai(reported) == TokenUsage(10, 2, 12, 8)
    plain = CompletionUsage(prompt_tokens=10, completion_tokens=2, total_tokens=12)
    assert TokenUsage.from_openai(plain).cached_tokens is None
