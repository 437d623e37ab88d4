"""Retry backoff as a pure function, so tests and docs can state it exactly; and a retry loop."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

BASE_SECONDS = 1.0
CAP_SECONDS = 3600.0


def backoff_seconds(attempts: int, *, rng: random.Random | None = None) -> float:
    """Delay before the next try after ``attempts`` runs (1 after the first run).

    Exponential from about a second (1, 2, 4, ...) capped at an hour, with
    +-25 % jitter so a burst of failures does not come back as a burst.
    """
    exponent = max(0, min(attempts - 1, 30))
    base = min(CAP_SECONDS, BASE_SECONDS * (2.0**exponent))
    jitter = (rng or random).uniform(0.75, 1.25)
    return min(CAP_SECONDS, base * jitter)


def with_retries(
    call: Callable[[], T],
    *,
    retryable: Callable[[BaseException], bool],
    attempts: int,
    delay: Callable[[int], float],
) -> T:
    """``call()``, again after ``delay(attempt)`` seconds while it raises what ``retryable`` accepts.

    For writes the database may refuse for a moment (a lock timeout, a lost
    connection); the last error is raised once ``attempts`` are used up.
    """
    for attempt in range(1, attempts + 1):
        try:
            return call()
        except Exception as exc:
            if attempt == attempts or not retryable(exc):
                raise
        time.sleep(delay(attempt))
    raise AssertionError("unreachable")  # pragma: no cover
