"""The shapes benchmark samples claim_many's growth in blocks, putting the claimed rows back between them.

Its p99 per task came from 20 calls a side, the slowest of 20. 100 calls
of 100 tasks would take all 10,000 of the small backlog, so the calls come
in blocks with the rows put back between them; a side that ran out would
stop sampling.
"""

from __future__ import annotations

import psycopg
import psycopg.sql
import pytest

from bench import common, shape_catalog, shapes

pytestmark = pytest.mark.slow

# Every task needs 1 and 100 are available: each claim_many(limit=100) takes 100 tasks.
ONES = shape_catalog.Shape("ones", "every task needs 1", "(g * 31) %% 10", "1", 100)


def test_blocks_put_the_rows_back_so_every_call_is_sampled(dsn: str) -> None:
    """2,500 and 5,000 tasks, 100 claimed a call: in one block the small
    side runs out after 25 calls of 40. In 4 blocks of 10 (and one untimed
    call after each put-back) both sides give 40 samples, and the rows are
    all queued again at the end."""
    small, big = "bench_test_small", "bench_test_big"
    shapes.seed(dsn, small, ONES, 2500)
    shapes.seed(dsn, big, ONES, 5000)
    try:
        one_block, _ = shapes.claim_latency(dsn, (small, big), ONES, 40, limit=100)
        shapes.seed(dsn, small, ONES, 2500)
        blocks = shapes.claim_latency(dsn, (small, big), ONES, 40, limit=100, blocks=4)
        with psycopg.connect(dsn) as conn:
            left = conn.execute(psycopg.sql.SQL("SELECT count(*) FROM {}.tasks WHERE state <> 'queued'").format(
                psycopg.sql.Identifier(small))).fetchone()
    finally:
        common.drop_schema(dsn, small)
        common.drop_schema(dsn, big)
    assert one_block["n"] == 25, one_block
    assert [side["n"] for side in blocks] == [40, 40]
    assert left == (0,)
