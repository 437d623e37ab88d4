"""What a ``/metrics`` scrape and the dashboard's pages cost with 1M tasks in the table.

``python -m bench.dashboard_cost --dsn URL [--rows 1000000]`` fills a fresh
schema with a realistic mix (mostly finished history, a backlog, retries,
failures, a few running), then times each page and the scrape through the
ASGI app in-process, so the numbers are server time without a network.

The rows go in with one INSERT ... SELECT from generate_series: the point is
the read side, and the enqueue path has its own benchmarks.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time

import sqlalchemy as sa

from taskqueue import TaskQueue

SCHEMA = "bench_dashboard"

# One statement, run by this benchmark only, to make a large table quickly;
# the mix is stated in docs/operations.md next to the numbers.
FILL = """
INSERT INTO tasks (queue, payload, priority, required, pool, state, attempts, max_attempts,
                   run_at, created_at, started_at, finished_at, worker, lease_token,
                   lease_seconds, lease_expires_at, result, error)
SELECT 'q' || (i % 4),
       jsonb_build_object('n', i),
       (i % 10) - 2,
       i % 3,
       CASE WHEN i % 7 = 0 THEN 'net-' || (i % 20) END,
       s.state,
       CASE WHEN s.state IN ('failed') THEN 3 WHEN s.state IN ('done', 'running') THEN 1
            WHEN s.state = 'scheduled' AND i % 2 = 0 THEN 1 ELSE 0 END,
       3,
       CASE WHEN s.state = 'scheduled' THEN now() + make_interval(secs => i % 3600 + 60)
            ELSE now() - make_interval(secs => (i % 7200) + 1) END,
       now() - make_interval(secs => (i % 7200) + 5),
       CASE WHEN s.state IN ('done', 'failed', 'running') THEN now() - make_interval(secs => (i % 7200)) END,
       CASE WHEN s.state IN ('done', 'failed', 'cancelled')
            THEN now() - make_interval(secs => (i % 7200) + :finished_before) END,
       CASE WHEN s.state IN ('done', 'failed', 'running') THEN 'bench-worker-' || (i % 8) END,
       CASE WHEN s.state = 'running' THEN gen_random_uuid() END,
       CASE WHEN s.state = 'running' THEN 600 END,
       CASE WHEN s.state = 'running' THEN now() + interval '10 minutes' END,
       CASE WHEN s.state = 'done' THEN jsonb_build_object('ok', true) END,
       CASE WHEN s.state = 'failed' OR (s.state = 'scheduled' AND i % 2 = 0)
            THEN (ARRAY['TimeoutError: host 10.0.' || (i % 250) || '.' || (i % 200) || ' did not answer',
                        'ValueError: bad record ' || i,
                        'ConnectionResetError: peer reset'])[1 + i % 3] END
  FROM generate_series(1, :rows) AS i,
       LATERAL (SELECT CASE
                  WHEN i % 1000 < :done THEN 'done'
                  WHEN i % 1000 < :done + 30 THEN 'failed'
                  WHEN i % 1000 < :done + 50 THEN 'cancelled'
                  WHEN i % 1000 < :done + 50 + :scheduled THEN 'scheduled'
                  WHEN i % 1000 = 999 THEN 'running'
                  ELSE 'queued' END AS state) AS s
"""


#: Two mixes per 1000 tasks: "backlog" keeps a quarter of the table live and
#: finishes 350 per 1000 within the last hour; "history" is a table of old
#: finished tasks with 1.5% live, the usual shape of a queue that keeps up.
MIXES = {
    "backlog": {"done": 700, "scheduled": 40, "finished_before": 0},
    "history": {"done": 935, "scheduled": 5, "finished_before": 7200},
}


def fill(tq: TaskQueue, rows: int, mix: str = "backlog") -> None:
    with tq.engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM tasks"))
        conn.execute(sa.text("DELETE FROM pools"))
        conn.execute(sa.text(FILL), {"rows": rows, **MIXES[mix]})
        conn.execute(sa.text("INSERT INTO pools (name, running_limit) SELECT 'net-' || n, 150 FROM generate_series(0, 19) n"))
        conn.execute(
            sa.text(
                "UPDATE pools p SET running = c.n FROM (SELECT pool, count(*) AS n FROM tasks "
                "WHERE state = 'running' AND pool IS NOT NULL GROUP BY pool) c WHERE p.name = c.pool"
            )
        )
    with tq.db.connection(None, "autocommit") as conn:
        conn.execute(sa.text("VACUUM ANALYZE tasks"))
        conn.execute(sa.text("VACUUM ANALYZE pools"))


async def time_paths(tq: TaskQueue, paths: list[str], repeats: int, **options: float) -> dict[str, dict[str, float]]:
    import httpx

    from taskqueue.dashboard import create_app

    app = create_app(tq, **options)
    transport = httpx.ASGITransport(app=app)
    results: dict[str, dict[str, float]] = {}
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        for path in paths:
            (await client.get(path)).raise_for_status()  # warm the plan cache and the pages
            samples = []
            for _ in range(repeats):
                started = time.perf_counter()
                response = await client.get(path)
                samples.append((time.perf_counter() - started) * 1000)
                response.raise_for_status()
            results[path] = {"median_ms": statistics.median(samples), "max_ms": max(samples)}
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", required=True)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--mix", choices=sorted(MIXES), default="backlog")
    parser.add_argument("--no-fill", action="store_true", help="Reuse the rows of a previous run.")
    args = parser.parse_args()
    with TaskQueue(args.dsn, schema=SCHEMA) as tq:
        tq.migrate()
        if not args.no_fill:
            fill(tq, args.rows, args.mix)
        with tq.engine.begin() as conn:
            count = conn.execute(sa.text("SELECT count(*) FROM tasks")).scalar_one()
        # state=failed&queue=q1 matches nothing in this mix: the worst case,
        # a walk of the whole primary key.
        paths = ["/metrics", "/", "/fragments/overview", "/tasks", "/tasks?state=failed&queue=q0",
                 "/tasks?state=failed&queue=q1",
                 "/tasks?priority_min=5&priority_max=5&pool=net-7", "/failures", "/pools", "/workers"]
        first = tq.tasks(limit=1)
        if first:
            paths.append(f"/tasks/{first[0].id}")
        # Uncached: every request reads the database, so these are the costs
        # of one read. The invariant check (timed apart below) runs once, for
        # the warm-up page: the overview shows its verdict and refreshes it in
        # the background, which would otherwise run back to back here.
        cold = asyncio.run(time_paths(tq, paths, args.repeats, cache_seconds=0.0, check_seconds=3600.0))
        # The defaults: the summary at most every 5 s, the check every 30 s.
        warm = asyncio.run(time_paths(tq, paths, args.repeats))
        # The overview shows the invariant checker's latest result; the check
        # itself runs in the background (see Dashboard.invariants). Its cost:
        checks = []
        for _ in range(3):
            started = time.perf_counter()
            tq.check()
            checks.append((time.perf_counter() - started) * 1000)
        with tq.engine.begin() as conn:
            states = dict(conn.execute(sa.text("SELECT state, count(*) FROM tasks GROUP BY state")).all())
    print(json.dumps({"rows": count, "mix": args.mix, "states": states, "repeats": args.repeats,
                      "uncached": cold, "cached_defaults": warm,
                      "invariant_check_ms": {"median": statistics.median(checks), "max": max(checks)}}, indent=2))


if __name__ == "__main__":
    main()
