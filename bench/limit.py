"""Target 5: the physical limit, single-row UPDATE + COMMIT per second, at 1, 2 and 8 clients.

Every other scenario also measures it at its own client count in the same
run and prints its throughputs as ratios to it.
"""

from __future__ import annotations

from typing import Any

from . import common


def run(opts: common.Options) -> dict[str, Any]:
    seconds = opts.seconds or 5.0
    return {
        "scenario": "limit",
        "by_clients": {str(c): common.physical_limit(opts.dsn, c, seconds) for c in (1, 2, 8)},
    }
