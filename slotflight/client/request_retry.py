"""When a failed request is sent again, and after how long: the ``openai`` client's rule.

With ``timeout`` or ``idle_timeout`` set, a stream sends its requests with the
client's own retries turned off (they would wait past both limits) and retries them
itself, as often as the client's ``max_retries`` allows, and only while the wait fits
the limits (:meth:`~.core.StreamCore.request_retry_wait`). Which failures are retried
and how long to wait follow the ``openai`` client: a connection that could not be made
or broke before the answer, and HTTP 408, 409, 429 and 5xx, unless the server says
``x-should-retry: false`` (``true`` retries any status); the server's ``retry-after-ms``
or ``retry-after`` (seconds or an HTTP date) when it is over 0 and at most 60 s, else
0.5 s doubled per retry up to 8 s, less up to a quarter at random. A read timeout is
not retried: it is the idle or total timeout the caller set.
"""

from __future__ import annotations

import datetime
import email.utils
import math
import random
import time
from collections.abc import Callable, Mapping
from typing import Final

import openai

__all__ = ["retry_delay"]

#: Longest server-directed wait honoured; a longer ``retry-after`` is not retried.
MAX_RETRY_AFTER: Final = 60.0
_FIRST_BACKOFF: Final = 0.5
_MAX_BACKOFF: Final = 8.0
_RETRIED_STATUSES: Final = frozenset({408, 409, 429})


def retry_delay(
    exc: BaseException,
    retries_done: int,
    *,
    jitter: Callable[[], float] = random.random,
    now: Callable[[], float] = time.time,
) -> float | None:
    """Seconds to wait before sending the request that failed with ``exc`` again, the
    ``retries_done``-th retry of it; ``None`` when such a failure is not retried."""
    if isinstance(exc, openai.APITimeoutError):
        return None
    if isinstance(exc, openai.APIStatusError):
        headers = exc.response.headers
        server = _retry_after(headers, now)
        if server is not None and server > MAX_RETRY_AFTER:
            return None
        advice = headers.get("x-should-retry")
        if advice == "false" or (advice != "true" and not _retried_status(exc.status_code)):
            return None
        if server is not None and server > 0:
            return server
    elif not isinstance(exc, openai.APIConnectionError):
        return None
    backoff = min(_FIRST_BACKOFF * 2.0 ** min(retries_done, 64), _MAX_BACKOFF)
    return backoff * (1.0 - 0.25 * jitter())


def _retried_status(status: int) -> bool:
    return status in _RETRIED_STATUSES or status >= 500


def _retry_after(headers: Mapping[str, str], now: Callable[[], float]) -> float | None:
    """The server's wait in seconds (``retry-after-ms``, ``retry-after`` as seconds or
    as an HTTP date), ``None`` when it gives none that can be read. A number too large
    for a float reads as longer than any wait honoured."""
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            seconds = float(value) / scale
        except ValueError:
            continue
        if math.isnan(seconds):
            continue
        return seconds if math.isfinite(seconds) else MAX_RETRY_AFTER + 1
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:  # "-0000": a time in UTC, its zone not said
        when = when.replace(tzinfo=datetime.UTC)
    return when.timestamp() - now()
