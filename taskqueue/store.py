"""The only module that runs SQL.

One typed method per named statement of ``sql/queries.sql``. Callers pass a
SQLAlchemy ``Connection`` that is already inside the transaction they want;
the store never commits on its own, so a state change and its pool count move
in one transaction.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import re
import select

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
import psycopg.sql
import sqlalchemy as sa
from sqlalchemy.engine import Connection, RowMapping

from .schema import notify_channel
from .spec import TaskBatch, TaskSpec
from .sql import load_all
from .task import STATES, Pool, Task

SQL = load_all()
Q = {name: sa.text(sql) for name, sql in SQL.items()}


def _pyformat(sql: str) -> str:
    """A named statement in psycopg's own parameter style (``:name`` to ``%(name)s``).

    Textual, like SQLAlchemy's own parsing of text(): fit only for statements
    with no ``:word`` inside a string literal, which DRIVER's are checked for
    by test_store_driver_statements_have_no_literal_colons.
    """
    return re.sub(r"(?<![:\w]):([A-Za-z_]\w*)", r"%(\1)s", sql.replace("%", "%%"))


#: Statements run on the driver connection directly. A single enqueue is a few
#: hundred microseconds of server time, and SQLAlchemy's execute path adds
#: about a third to it; these skip that layer, never the pool or transaction.
DRIVER = {name: _pyformat(SQL[name]) for name in ("enqueue_task",)}


def _task_from_row(row: RowMapping) -> Task:
    token = row["lease_token"]
    return Task(
        id=row["id"],
        queue=row["queue"],
        payload=row["payload"],
        priority=row["priority"],
        required=row["required"],
        pool=row["pool"],
        state=row["state"],
        attempts=row["attempts"],
        max_attempts=row["max_attempts"],
        run_at=row["run_at"],
        created_at=row["created_at"],
        worker=row["worker"],
        lease_expires_at=row["lease_expires_at"],
        result=row["result"],
        error=row["error"],
        dedupe_key=row["dedupe_key"],
        started_at=row["started_at"],
        finished_at=row["finished_at"],
        cancel_requested=row["cancel_requested"],
        lease_seconds=row["lease_seconds"],
        estimate=row.get("estimate"),
        lease_token=None if token is None else str(token),
    )


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a complete/fail/requeue did: the new state, and whether a full pool got a free slot."""

    state: str
    freed_full_pool: bool = False
    run_at: dt.datetime | None = None


@dataclass(frozen=True, slots=True)
class Beat:
    id: int
    lease_expires_at: dt.datetime
    cancel_requested: bool


class Store:
    """Typed access to the named statements, for one queue schema."""

    def __init__(self, schema: str) -> None:
        self.schema = schema
        self.channel = notify_channel(schema)

    # -- caller-owned connections ------------------------------------------
    @contextlib.contextmanager
    def on_foreign_connection(self, conn: Connection) -> Iterator[Connection]:
        """Point a caller's connection at our schema for the duration, then restore it."""
        previous = conn.execute(Q["show_search_path"]).scalar_one()
        conn.execute(Q["set_local_search_path"], {"path": f'"{self.schema}"'})
        try:
            yield conn
        finally:
            conn.execute(Q["set_local_search_path"], {"path": previous})

    # -- enqueue ------------------------------------------------------------
    def ensure_pools(self, conn: Connection, names: Sequence[str]) -> None:
        if names:
            conn.execute(Q["ensure_pools"], {"names": sorted(set(names))})

    def enqueue_task(self, conn: Connection, spec: TaskSpec) -> tuple[int, bool]:
        """Insert one task with its pool row and wake-up signal; return (id, inserted).

        A live dedupe key returns the holder's id. One statement, so on an
        autocommit connection the whole enqueue is one round trip.
        """
        params = {
            "queue": spec.queue,
            "payload": spec.payload_json,
            "priority": spec.priority,
            "required": spec.required,
            "pool": spec.pool,
            "max_attempts": spec.max_attempts,
            "run_at": spec.run_at,
            "delay": spec.delay,
            "dedupe_key": spec.dedupe_key,
            "estimate": spec.estimate,
            "channel": self.channel,
        }
        driver = conn.connection.driver_connection
        assert driver is not None
        for _ in range(100):
            row = driver.execute(DRIVER["enqueue_task"], params, prepare=True).fetchone()
            if row is not None:
                return row[0], True
            existing = conn.execute(
                Q["find_active_dedupe"], {"queue": spec.queue, "dedupe_key": spec.dedupe_key}
            ).scalar()
            if existing is not None:
                return existing, False
            # The holder finished between the two statements: the key is free again.
        raise RuntimeError("dedupe insert did not settle after 100 tries")  # pragma: no cover

    def insert_batch(self, conn: Connection, batch: TaskBatch) -> list[int]:
        """Insert a validated batch; ids in input order. COPY unless dedupe keys need ON CONFLICT."""
        if batch.has_dedupe_keys:
            return self.insert_tasks(conn, batch.specs())
        return self.copy_tasks(conn, batch)

    def copy_tasks(self, conn: Connection, batch: TaskBatch) -> list[int]:
        """COPY a batch without dedupe keys, with ids reserved first so they can be returned."""
        row = conn.execute(Q["reserve_task_ids"], {"n": len(batch)}).one()
        now: dt.datetime = row.now
        ids: list[int] = row.ids
        columns = (ids, batch.queues, batch.payloads, batch.priorities, batch.requireds, batch.pools)
        if batch.has_times or batch.has_estimates:
            ats = [
                at if at is not None else now if delay is None else now + dt.timedelta(seconds=delay)
                for at, delay in zip(batch.run_ats, batch.delays)
            ]
            states = ["scheduled" if at > now else "queued" for at in ats]
            statement, rows = SQL["copy_tasks"], zip(*columns, states, batch.max_attempts, ats, batch.estimates)
        else:
            states = ["queued"] * len(batch)
            statement, rows = SQL["copy_tasks_now"], zip(*columns, states, batch.max_attempts)
        cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
        with cursor, cursor.copy(statement) as copy:
            write = copy.write_row
            for task_row in rows:
                write(task_row)
        return ids

    def insert_tasks(self, conn: Connection, specs: Sequence[TaskSpec]) -> list[int]:
        """Insert a batch in one statement; duplicates of an active dedupe key get the holder's id."""
        # Within the batch, the first spec with a (queue, key) stands for the others.
        first_of: dict[tuple[str, str], int] = {}
        alias: dict[int, int] = {}
        unique: list[int] = []
        for i, spec in enumerate(specs):
            if spec.dedupe_key is not None:
                key = (spec.queue, spec.dedupe_key)
                if key in first_of:
                    alias[i] = first_of[key]
                    continue
                first_of[key] = i
            unique.append(i)
        ids: dict[int, int] = {}
        pending = unique
        for _ in range(100):
            batch = [specs[i] for i in pending]
            rows = conn.execute(
                Q["insert_tasks"],
                {
                    "queues": [s.queue for s in batch],
                    "payloads": [s.payload_json for s in batch],
                    "priorities": [s.priority for s in batch],
                    "requireds": [s.required for s in batch],
                    "pools": [s.pool for s in batch],
                    "max_attempts": [s.max_attempts for s in batch],
                    "run_ats": [s.run_at for s in batch],
                    "delays": [s.delay for s in batch],
                    "dedupe_keys": [s.dedupe_key for s in batch],
                    "estimates": [s.estimate for s in batch],
                },
            ).all()
            inserted_keys = {(r.queue, r.dedupe_key) for r in rows if r.dedupe_key is not None}
            new_ids = iter(sorted(r.id for r in rows))
            skipped: list[int] = []
            for i in pending:
                spec = specs[i]
                if spec.dedupe_key is None or (spec.queue, spec.dedupe_key) in inserted_keys:
                    ids[i] = next(new_ids)
                else:
                    skipped.append(i)
            if not skipped:
                break
            found = conn.execute(
                Q["find_active_dedupes"],
                {
                    "queues": [specs[i].queue for i in skipped],
                    "dedupe_keys": [specs[i].dedupe_key for i in skipped],
                },
            ).all()
            holder = {(r.queue, r.dedupe_key): r.id for r in found}
            pending = []
            for i in skipped:
                key = (specs[i].queue, specs[i].dedupe_key)
                if key in holder:
                    ids[i] = holder[key]
                else:
                    pending.append(i)  # finished meanwhile: insert it after all
            if not pending:
                break
        for i, j in alias.items():
            ids[i] = ids[j]
        return [ids[i] for i in range(len(specs))]

    def notify(self, conn: Connection) -> None:
        conn.execute(Q["notify_wakeup"], {"channel": self.channel})

    def listen(self, pg_conn: psycopg.Connection[Any]) -> None:
        """LISTEN on the queue's wake-up channel, on a raw autocommit psycopg connection."""
        pg_conn.execute(psycopg.sql.SQL("LISTEN {}").format(psycopg.sql.Identifier(self.channel)))

    # -- claim --------------------------------------------------------------
    def claim(
        self,
        conn: Connection,
        *,
        available: int | None,
        limit: int,
        queues: list[str] | None,
        worker: str,
        lease: float,
        descending: bool,
        peek: bool = False,
    ) -> list[Task]:
        rows = conn.execute(
            Q["claim_tasks"],
            {
                "available": available,
                "limit": limit,
                "queues": queues,
                "worker": worker,
                "lease": lease,
                "descending": descending,
                "peek": peek,
            },
        ).mappings()
        return [_task_from_row(r) for r in rows]

    # -- lease holders ------------------------------------------------------
    def heartbeat(self, conn: Connection, task_id: int, token: str, lease: float | None) -> Beat | None:
        row = conn.execute(Q["heartbeat_task"], {"id": task_id, "token": token, "lease": lease}).first()
        return None if row is None else Beat(task_id, row.lease_expires_at, row.cancel_requested)

    def heartbeat_many(
        self, conn: Connection, claims: Sequence[tuple[int, str]], lease: float | None
    ) -> dict[int, Beat]:
        if not claims:
            return {}
        rows = conn.execute(
            Q["heartbeat_tasks"],
            {"ids": [c[0] for c in claims], "tokens": [c[1] for c in claims], "lease": lease},
        ).all()
        return {r.id: Beat(r.id, r.lease_expires_at, r.cancel_requested) for r in rows}

    def complete(self, conn: Connection, task_id: int, token: str, result_json: str | None) -> Outcome | None:
        row = conn.execute(Q["complete_task"], {"id": task_id, "token": token, "result": result_json}).first()
        return None if row is None else Outcome(row.state, row.freed_full_pool)

    def complete_many(
        self, conn: Connection, claims: Sequence[tuple[int, str, str | None]]
    ) -> tuple[dict[int, str], bool]:
        """Complete (id, token, result_json) claims in one statement; return ({id: state}, freed a full pool).

        Pools are released afterwards in name order, one update per pool.
        """
        if not claims:
            return {}, False
        rows = conn.execute(
            Q["complete_tasks"],
            {"ids": [c[0] for c in claims], "tokens": [c[1] for c in claims], "results": [c[2] for c in claims]},
        ).all()
        counts: dict[str, int] = {}
        for r in rows:
            if r.pool is not None:
                counts[r.pool] = counts.get(r.pool, 0) + 1
        freed = self.release_pools(conn, counts)
        return {r.id: r.state for r in rows}, freed

    def fail(
        self, conn: Connection, task_id: int, token: str, error: str, *, retry: bool, retry_in: float
    ) -> Outcome | None:
        row = conn.execute(
            Q["fail_task"],
            {"id": task_id, "token": token, "error": error, "retry": retry, "retry_in": retry_in},
        ).first()
        return None if row is None else Outcome(row.state, row.freed_full_pool, row.run_at)

    def requeue(self, conn: Connection, task_id: int, token: str, reason: str) -> Outcome | None:
        row = conn.execute(Q["requeue_task"], {"id": task_id, "token": token, "error": reason}).first()
        return None if row is None else Outcome(row.state, bool(row.released))

    # -- maintenance --------------------------------------------------------
    def rescue_expired(self, conn: Connection) -> list[tuple[int, str | None, str]]:
        """Requeue or fail every expired lease and release its pool slot; return (id, pool, state)."""
        rows = conn.execute(Q["rescue_expired_tasks"]).all()
        counts: dict[str, int] = {}
        for r in rows:
            if r.pool is not None:
                counts[r.pool] = counts.get(r.pool, 0) + 1
        self.release_pools(conn, counts)
        return [(r.id, r.pool, r.state) for r in rows]

    def release_pools(self, conn: Connection, counts: dict[str, int]) -> bool:
        """Take counts off several pools, locking them in name order first; True if a full pool got a slot."""
        if not counts:
            return False
        names = sorted(counts)
        conn.execute(Q["lock_pools"], {"names": names}).all()
        rows = conn.execute(Q["release_pools"], {"names": names, "counts": [counts[n] for n in names]}).all()
        # True when a pool that was full before this release has a free slot now.
        return any(
            r.running_limit is not None and r.running < r.running_limit <= r.running + counts[r.name] for r in rows
        )

    def prune_finished(self, conn: Connection, older_than: float, batch: int) -> int:
        return conn.execute(Q["prune_finished"], {"older_than": older_than, "batch": batch}).rowcount

    def next_run_in(self, conn: Connection) -> float | None:
        seconds = conn.execute(Q["next_run_at"]).scalar()
        return None if seconds is None else float(seconds)

    def try_advisory_lock(self, conn: Connection, key: int) -> bool:
        return bool(conn.execute(Q["try_advisory_lock"], {"key": key}).scalar())

    def advisory_unlock(self, conn: Connection, key: int) -> bool:
        return bool(conn.execute(Q["advisory_unlock"], {"key": key}).scalar())

    def holds_advisory_lock(self, conn: Connection, key: int) -> bool:
        return bool(conn.execute(Q["holds_advisory_lock"], {"key": key}).scalar())

    def set_idle_session_timeout(self, conn: Connection, milliseconds: int) -> None:
        conn.execute(Q["set_idle_session_timeout"], {"value": f"{int(milliseconds)}ms"})

    def advisory_xact_lock(self, conn: Connection, key: int) -> None:
        conn.execute(Q["advisory_xact_lock"], {"key": key})

    # -- invariants ---------------------------------------------------------
    def invariant_rows(self, conn: Connection, check: str) -> list[dict[str, Any]]:
        """The rows of one invariant view (``check`` is one of taskqueue.invariants.CHECKS)."""
        return [dict(r) for r in conn.execute(Q[f"check_{check}"]).mappings()]

    def database_now(self, conn: Connection) -> dt.datetime:
        return conn.execute(Q["database_now"]).first().now

    def read_only(self, conn: Connection) -> None:
        conn.execute(Q["set_read_only"])

    def set_local_lock_timeout(self, conn: Connection, milliseconds: int) -> None:
        conn.execute(Q["set_local_lock_timeout"], {"timeout": f"{int(milliseconds)}ms"})

    def recount_pools(self, conn: Connection) -> list[tuple[str, int, int]]:
        """Set every pool's running to its running tasks; return (pool, old, new) for the changed ones."""
        conn.execute(Q["ensure_pools_of_running_tasks"])
        conn.execute(Q["lock_all_pools"]).all()
        return [(r.name, r.stored, r.running) for r in conn.execute(Q["recount_pools"])]

    def clear_finished_leases(self, conn: Connection) -> list[tuple[int, str]]:
        return [(r.id, r.state) for r in conn.execute(Q["clear_finished_leases"])]

    def expire_leaseless_tasks(self, conn: Connection) -> list[int]:
        return [r.id for r in conn.execute(Q["expire_leaseless_tasks"])]

    def promote_overdue_scheduled(self, conn: Connection) -> list[int]:
        return [r.id for r in conn.execute(Q["promote_overdue_scheduled"])]

    def unpark_open_pool_tasks(self, conn: Connection) -> list[tuple[int, str | None]]:
        return [(r.id, r.pool) for r in conn.execute(Q["unpark_open_pool_tasks"])]

    # -- reads and admin ----------------------------------------------------
    def cancel(self, conn: Connection, task_id: int) -> str | None:
        row = conn.execute(Q["cancel_task"], {"id": task_id}).first()
        return None if row is None else row.state

    def retry(self, conn: Connection, task_id: int) -> str | None:
        """Re-enqueue a failed task with a fresh attempt budget; its queue, or None if it is not failed."""
        row = conn.execute(Q["retry_task"], {"id": task_id}).first()
        return None if row is None else row.queue

    def get(self, conn: Connection, task_id: int) -> Task | None:
        row = conn.execute(Q["get_task"], {"id": task_id}).mappings().first()
        return None if row is None else _task_from_row(row)

    def list_tasks(self, conn: Connection, *, state: str | None, queue: str | None, limit: int) -> list[Task]:
        rows = conn.execute(Q["list_tasks"], {"state": state, "queue": queue, "limit": limit}).mappings()
        return [_task_from_row(r) for r in rows]

    def set_pool_limit(self, conn: Connection, name: str, limit: int | None) -> None:
        conn.execute(Q["set_pool_limit"], {"name": name, "limit": limit})

    def pools(self, conn: Connection) -> list[Pool]:
        return [Pool(r.name, r.running_limit, r.running) for r in conn.execute(Q["list_pools"])]

    def get_pool(self, conn: Connection, name: str) -> Pool | None:
        r = conn.execute(Q["get_pool"], {"name": name}).first()
        return None if r is None else Pool(r.name, r.running_limit, r.running)

    def delete_everything(self, conn: Connection) -> None:
        """Empty the schema's tasks and pools (the demo's own schema only)."""
        conn.execute(Q["delete_all_tasks"])
        conn.execute(Q["delete_all_pools"])

    def stats(self, conn: Connection, throughput_window: float = 60.0) -> dict[str, Any]:
        by_state = {s: 0 for s in STATES}
        for r in conn.execute(Q["count_by_state"]):
            by_state[r.state] = r.n
        by_queue: dict[str, dict[str, int]] = {}
        for r in conn.execute(Q["count_by_queue_state"]):
            by_queue.setdefault(r.queue, {s: 0 for s in STATES})[r.state] = r.n
        waiting = [
            {
                "queue": r.queue,
                "priority": r.priority,
                "waiting": r.n,
                "oldest_wait_seconds": float(r.oldest_wait_seconds or 0.0),
            }
            for r in conn.execute(Q["count_waiting_by_queue_priority"])
        ]
        parked = {r.pool: r.n for r in conn.execute(Q["count_parked_by_pool"])}
        finished = conn.execute(Q["count_finished_since"], {"seconds": throughput_window}).scalar_one()
        now = conn.execute(Q["database_now"]).first()
        return {
            "by_state": by_state,
            "by_queue": by_queue,
            "waiting_by_priority": waiting,
            "oldest_waiting_seconds": max((w["oldest_wait_seconds"] for w in waiting), default=0.0),
            "pools": [
                {"name": p.name, "limit": p.limit, "running": p.running, "parked": parked.get(p.name, 0)}
                for p in self.pools(conn)
            ],
            "parked": sum(parked.values()),
            "throughput_per_second": finished / throughput_window,
            "total": sum(by_state.values()),
            "database_time": now.now.isoformat(),
        }




def _has_pending_input(fd: int) -> bool:
    """Whether the server sent anything to an idle connection, without waiting."""
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(fd, select.POLLIN | select.POLLERR | select.POLLHUP)
        return bool(poller.poll(0))
    readable, _, _ = select.select([fd], [], [], 0)  # pragma: no cover - platforms without poll
    return bool(readable)


def configure_engine(engine: sa.Engine, schema: str) -> None:
    """Every pooled connection starts with search_path = the queue schema, and is checked on checkout.

    The checkout check is a pre-ping without the round trip. An idle pooled
    connection has nothing to read: it does not LISTEN, and runs nothing. A
    server that ended the session (pg_terminate_backend, restart, shutdown,
    idle_session_timeout) sends its error and closes the socket, which makes
    it readable, so such a connection is replaced before use. A single enqueue
    is one round trip; a ping per checkout added about a sixth to its time.
    """
    path = f'"{schema}"'

    @sa.event.listens_for(engine, "checkout")
    def _check_alive(dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
        if dbapi_connection.closed or dbapi_connection.broken:
            raise sa.exc.DisconnectionError("connection closed")
        try:
            pending = _has_pending_input(dbapi_connection.fileno())
        except (OSError, ValueError, psycopg.Error) as exc:
            raise sa.exc.DisconnectionError(f"connection unusable: {exc}") from exc
        if pending:
            raise sa.exc.DisconnectionError("the server sent data to an idle connection (session ended?)")

    @sa.event.listens_for(engine, "connect")
    def _set_search_path(dbapi_connection: Any, _record: Any) -> None:
        with dbapi_connection.cursor() as cur:
            cur.execute("SELECT set_config('search_path', %s, false)", (path,))
        dbapi_connection.commit()
