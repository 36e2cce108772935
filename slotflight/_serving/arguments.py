"""Command-line values of the servers' options: each reader refuses a value out of its
bounds with :class:`argparse.ArgumentTypeError`, so a wrong value is a usage error
(exit status 2), never a traceback or a server that cannot work."""

from __future__ import annotations

import argparse
import math

__all__ = ["byte_count", "port", "positive_seconds", "redis_url", "seconds"]


def port(text: str) -> int:
    """A ``--port`` value: a TCP port number (0: a free one)."""
    try:
        number = int(text)
    except ValueError:
        number = -1
    if not 0 <= number <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port number from 0 to 65535, got {text!r}")
    return number


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return math.nan


def seconds(text: str) -> float:
    """A duration in seconds: a finite number >= 0."""
    value = _number(text)
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"expected a number of seconds >= 0, got {text!r}")
    return value


def positive_seconds(text: str) -> float:
    """A timeout in seconds: a finite number > 0."""
    value = _number(text)
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a number of seconds > 0, got {text!r}")
    return value


def byte_count(text: str) -> int:
    """A size in bytes: a whole number >= 1."""
    try:
        count = int(text)
    except ValueError:
        count = 0
    if count < 1:
        raise argparse.ArgumentTypeError(f"expected a number of bytes >= 1, got {text!r}")
    return count


def redis_url(text: str) -> str:
    """A Redis URL: ``redis://``, ``rediss://`` or ``unix://``."""
    if not text.startswith(("redis://", "rediss://", "unix://")):
        raise argparse.ArgumentTypeError(
            f"expected a redis://, rediss:// or unix:// URL, got {text!r}"
        )
    return text
