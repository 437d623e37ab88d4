"""Retry backoff as a pure function, so tests and docs can state it exactly."""

from __future__ import annotations

import random

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
