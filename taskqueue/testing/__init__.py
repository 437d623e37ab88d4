"""Helpers for testing code that uses taskqueue: drain queues in-process, assert what is enqueued.

The fixtures (``tq``, ``taskqueue_database``, ...) come from the pytest plugin,
:mod:`taskqueue.testing.plugin`; docs/testing.md shows them together. Like the
package itself, this module loads SQLAlchemy and psycopg only when a helper is
first used, so the plugin's import stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import lazy_exports

if TYPE_CHECKING:
    from .assertions import aassert_enqueued, aassert_not_enqueued, assert_enqueued, assert_not_enqueued
    from .draining import DrainLimitExceeded, DrainResult, DrainRun, adrain, drain

_LAZY = {
    "DrainLimitExceeded": ".draining",
    "DrainResult": ".draining",
    "DrainRun": ".draining",
    "aassert_enqueued": ".assertions",
    "aassert_not_enqueued": ".assertions",
    "adrain": ".draining",
    "assert_enqueued": ".assertions",
    "assert_not_enqueued": ".assertions",
    "drain": ".draining",
}

__all__ = [
    "DrainLimitExceeded",
    "DrainResult",
    "DrainRun",
    "aassert_enqueued",
    "aassert_not_enqueued",
    "adrain",
    "assert_enqueued",
    "assert_not_enqueued",
    "drain",
]


__getattr__, __dir__ = lazy_exports(__name__, _LAZY)
