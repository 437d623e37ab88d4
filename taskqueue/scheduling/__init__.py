"""Fair capacity scheduling (seed 003): which waiting tasks a worker starts, and what it holds back for."""

from __future__ import annotations

#: greedy: fill free capacity with whatever fits (may starve large tasks);
#: strict: start nothing past a waiting task that does not fit;
#: backfill: reserve capacity for that task and start only what cannot delay it.
POLICIES = ("greedy", "strict", "backfill")
DEFAULT_POLICY = "backfill"
