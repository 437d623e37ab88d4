"""Every bad input raises ValidationError naming the field, and writes nothing."""

from __future__ import annotations

import datetime as dt
import math
from typing import Any

import psycopg
import pytest

from taskqueue import TaskQueue, TaskQueueError, ValidationError, network_pool


def snapshot(dsn: str) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """The full contents of both tables, to prove that nothing was written."""
    with psycopg.connect(dsn) as conn:
        tasks = conn.execute("SELECT * FROM taskqueue.tasks ORDER BY id").fetchall()
        pools = conn.execute("SELECT * FROM taskqueue.pools ORDER BY name").fetchall()
    return tasks, pools


@pytest.fixture
def seeded(tq: TaskQueue, dsn: str) -> TaskQueue:
    tq.enqueue({"seed": 1}, pool="p", priority=1)
    tq.set_pool_limit("p", 2)
    return tq


def test_validation_error_is_both_library_error_and_value_error() -> None:
    assert issubclass(ValidationError, TaskQueueError)
    assert issubclass(ValidationError, ValueError)
    err = ValidationError("queue", "bad")
    assert err.field == "queue" and "queue" in str(err)


class _Custom:
    pass


BAD_PAYLOADS = [
    ({1: "int key"}, "payload"),
    ({(1, 2): "tuple key"}, "payload"),
    ({1, 2}, "payload"),
    (b"bytes", "payload"),
    (_Custom(), "payload"),
    (dt.datetime.now(dt.timezone.utc), "payload"),
    (float("nan"), "payload"),
    (float("inf"), "payload"),
    (-math.inf, "payload"),
    ({"a": [1, float("nan")]}, "payload"),
    ("nul\u0000byte", "payload"),
    ({"k\u0000": 1}, "payload"),
    ({"nested": {"deep": "x\x00"}}, "payload"),
]


@pytest.mark.parametrize("payload,field", BAD_PAYLOADS)
def test_bad_payload_rejected_and_nothing_written(seeded: TaskQueue, dsn: str, payload: Any, field: str) -> None:
    before = snapshot(dsn)
    with pytest.raises(ValidationError) as exc:
        seeded.enqueue(payload, pool="newpool")
    assert exc.value.field.startswith(field)
    assert "payload" in str(exc.value)
    assert snapshot(dsn) == before


def test_good_payloads_round_trip(tq: TaskQueue) -> None:
    payloads = [
        {"a": [1, 2.5, True, None, "x"]},
        [1, "two", {"three": 3}],
        "text",
        42,
        1.25,
        True,
        None,
        {"unicode": "žluťoučký kůň ✓"},
    ]
    for p in payloads:
        got = tq.get(tq.enqueue(p))
        assert got is not None and got.payload == p
    got = tq.get(tq.enqueue((1, (2, 3))))
    assert got is not None and got.payload == [1, [2, 3]]  # tuples are stored as lists


BAD_ENQUEUE_KWARGS = [
    ({"priority": True}, "priority"),
    ({"priority": False}, "priority"),
    ({"priority": 1.0}, "priority"),
    ({"priority": "1"}, "priority"),
    ({"priority": 2**31}, "priority"),
    ({"priority": -(2**31) - 1}, "priority"),
    ({"priority": None}, "priority"),
    ({"required": -1}, "required"),
    ({"required": 1.5}, "required"),
    ({"required": "2"}, "required"),
    ({"required": True}, "required"),
    ({"queue": ""}, "queue"),
    ({"queue": "   "}, "queue"),
    ({"queue": 5}, "queue"),
    ({"queue": None}, "queue"),
    ({"queue": "q" * 201}, "queue"),
    ({"pool": ""}, "pool"),
    ({"pool": 7}, "pool"),
    ({"pool": "p" * 201}, "pool"),
    ({"max_attempts": 0}, "max_attempts"),
    ({"max_attempts": -3}, "max_attempts"),
    ({"max_attempts": 1.0}, "max_attempts"),
    ({"run_at": dt.datetime(2030, 1, 1)}, "run_at"),  # naive
    ({"run_at": "2030-01-01T00:00:00Z"}, "run_at"),
    ({"delay": -0.5}, "delay"),
    ({"delay": 1, "run_at": dt.datetime(2030, 1, 1, tzinfo=dt.timezone.utc)}, "run_at"),
    ({"delay": float("nan")}, "delay"),
    ({"delay": "5"}, "delay"),
    ({"dedupe_key": ""}, "dedupe_key"),
    ({"dedupe_key": 3}, "dedupe_key"),
]


@pytest.mark.parametrize("kwargs,field", BAD_ENQUEUE_KWARGS)
def test_bad_enqueue_argument_names_field_and_writes_nothing(
    seeded: TaskQueue, dsn: str, kwargs: dict[str, Any], field: str
) -> None:
    before = snapshot(dsn)
    with pytest.raises(ValidationError) as exc:
        seeded.enqueue({"x": 1}, **{"pool": "fresh-pool", **kwargs})
    assert exc.value.field == field
    assert field in str(exc.value)
    assert snapshot(dsn) == before


def test_boundary_values_are_accepted(tq: TaskQueue) -> None:
    lo = tq.enqueue({}, priority=-(2**31))
    hi = tq.enqueue({}, priority=2**31 - 1, queue="q" * 200, pool="p" * 200, max_attempts=1, delay=0)
    assert tq.get(lo).priority == -(2**31)  # type: ignore[union-attr]
    got = tq.get(hi)
    assert got is not None and got.priority == 2**31 - 1 and got.queue == "q" * 200 and got.state == "queued"


def test_enqueue_many_bad_spec_rejects_whole_batch(seeded: TaskQueue, dsn: str) -> None:
    before = snapshot(dsn)
    specs = [{"payload": {"ok": 1}, "pool": "a"}, {"payload": {"ok": 2}}, {"payload": {"bad": float("nan")}}]
    with pytest.raises(ValidationError) as exc:
        seeded.enqueue_many(specs)
    assert exc.value.field.startswith("specs[2]")
    assert snapshot(dsn) == before


@pytest.mark.parametrize(
    "bad,field",
    [
        ({"payload": 1, "colour": "red"}, "specs[1]"),
        ({"payload": 1, "connection": None}, "specs[1]"),
        ({"priority": 1}, "specs[1].payload"),
        ({"payload": 1, "priority": "high"}, "specs[1].priority"),
        ({"payload": 1, "run_at": dt.datetime(2031, 1, 1)}, "specs[1].run_at"),
        ("not a mapping", "specs[1]"),
    ],
)
def test_enqueue_many_bad_entries(seeded: TaskQueue, dsn: str, bad: Any, field: str) -> None:
    before = snapshot(dsn)
    with pytest.raises(ValidationError) as exc:
        seeded.enqueue_many([{"payload": 0}, bad, {"payload": 2}])
    assert exc.value.field == field
    assert snapshot(dsn) == before


def test_enqueue_many_unknown_key_is_named(tq: TaskQueue) -> None:
    with pytest.raises(ValidationError, match="colour"):
        tq.enqueue_many([{"payload": 1, "colour": "red"}])


def test_enqueue_many_not_a_list(tq: TaskQueue) -> None:
    with pytest.raises(ValidationError):
        tq.enqueue_many({"payload": 1})  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        tq.enqueue_many(5)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "kwargs,field",
    [
        ({"available": -1}, "available"),
        ({"available": 1.5}, "available"),
        ({"available": True}, "available"),
        ({"order": "desc"}, "order"),
        ({"order": None}, "order"),
        ({"lease": 0}, "lease"),
        ({"lease": -1.0}, "lease"),
        ({"lease": float("inf")}, "lease"),
        ({"lease": "60"}, "lease"),
        ({"queues": []}, "queues"),
        ({"queues": "default"}, "queues"),
        ({"queues": ["ok", ""]}, "queues"),
        ({"worker": ""}, "worker"),
    ],
)
def test_bad_claim_arguments_claim_nothing(seeded: TaskQueue, dsn: str, kwargs: dict[str, Any], field: str) -> None:
    before = snapshot(dsn)
    with pytest.raises(ValidationError) as exc:
        seeded.claim(**kwargs)
    assert exc.value.field == field
    with pytest.raises(ValidationError):
        seeded.claim_many(**kwargs)
    assert snapshot(dsn) == before


@pytest.mark.parametrize(
    "kwargs,field",
    [({"available": -5}, "available"), ({"order": "biggest"}, "order"), ({"queues": 3}, "queues")],
)
def test_bad_peek_arguments(seeded: TaskQueue, kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as exc:
        seeded.peek(**kwargs)
    assert exc.value.field == field


def test_claim_many_bad_limit(seeded: TaskQueue, dsn: str) -> None:
    before = snapshot(dsn)
    for limit in (0, -1, 1.5, "3"):
        with pytest.raises(ValidationError, match="limit"):
            seeded.claim_many(limit=limit)  # type: ignore[arg-type]
    assert snapshot(dsn) == before


@pytest.mark.parametrize(
    "pool,limit,field",
    [
        ("p", -1, "limit"),
        ("p", 1.5, "limit"),
        ("p", True, "limit"),
        ("p", "3", "limit"),
        ("", 1, "pool"),
        ("x" * 201, 1, "pool"),
        (None, 1, "pool"),
    ],
)
def test_bad_pool_limit(seeded: TaskQueue, dsn: str, pool: Any, limit: Any, field: str) -> None:
    before = snapshot(dsn)
    with pytest.raises(ValidationError) as exc:
        seeded.set_pool_limit(pool, limit)
    assert exc.value.field == field
    assert snapshot(dsn) == before


def test_bad_heartbeat_lease_and_retry_in(seeded: TaskQueue, dsn: str) -> None:
    task = seeded.claim()
    assert task is not None
    before = snapshot(dsn)
    for lease in (0, -1, "5"):
        with pytest.raises(ValidationError, match="lease"):
            seeded.heartbeat(task, lease=lease)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="retry_in"):
        seeded.fail(task, "boom", retry_in=-1)
    with pytest.raises(ValidationError, match="error"):
        seeded.fail(task, 42)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="result"):
        seeded.complete(task, {"bad": float("nan")})
    with pytest.raises(ValidationError, match="task"):
        seeded.complete("not a task")  # type: ignore[arg-type]
    assert snapshot(dsn) == before


@pytest.mark.parametrize("bad_id", [0, -1, "1", 1.0, True])
def test_bad_task_ids(tq: TaskQueue, bad_id: Any) -> None:
    with pytest.raises(ValidationError, match="task_id"):
        tq.get(bad_id)
    with pytest.raises(ValidationError, match="task_id"):
        tq.cancel(bad_id)


@pytest.mark.parametrize("address", ["", "10.1.2", "300.1.2.3", "example.org", "10.0.0.1/33", "::g", "1.2.3.4.5"])
def test_network_pool_rejects_unparseable_addresses(address: str) -> None:
    with pytest.raises(ValidationError) as exc:
        network_pool(address)
    assert exc.value.field == "address"


def test_network_pool_rejects_non_strings_and_bad_prefixes() -> None:
    with pytest.raises(ValidationError, match="address"):
        network_pool(167772161)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="v4_prefix"):
        network_pool("10.0.0.1", v4_prefix=33)
    with pytest.raises(ValidationError, match="v6_prefix"):
        network_pool("::1", v6_prefix=-1)


def test_bad_transactional_connection_writes_nothing(seeded: TaskQueue, dsn: str) -> None:
    before = snapshot(dsn)
    with pytest.raises(ValidationError, match="connection"):
        seeded.enqueue({"x": 1}, connection="not a connection")  # type: ignore[arg-type]
    assert snapshot(dsn) == before


def test_bad_schema_name() -> None:
    for schema in ("", "Has-Caps", "1abc", "a;drop", "public", "pg_catalog"):
        with pytest.raises(ValidationError, match="schema"):
            TaskQueue("postgresql://localhost/none", schema=schema)


# -- enqueue_many's inline checks agree with the careful path -------------------

_NOW = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
DEEP: Any = []
for _ in range(101):
    DEEP = [DEEP]
BATCH_ENTRIES: list[Any] = [
    {"payload": None},
    {"payload": {"ip": "10.0.0.1", "ports": [22, 80], "deep": {"a": [1.5, True, None]}}},
    {"payload": "tab\tnew\nline back\\slash ünï 🚀", "queue": "q", "priority": -(2**31), "required": 2**31 - 1},
    {"payload": ("tuple", 1), "pool": "10.0.0.0/24", "max_attempts": 1000, "dedupe_key": "k"},
    {"payload": "a\\u0000b"},  # a backslash before u0000: text, not a NUL; the fast check must not reject it
    {"payload": 1, "run_at": _NOW},
    {"payload": 1, "delay": 2.5},
    {"payload": {1: "int key"}},
    {"payload": {"x": math.nan}},
    {"payload": "nul\x00"},
    {"payload": "lone \ud800"},
    {"payload": DEEP},
    {"payload": _Custom()},
    {"payload": 1, "queue": ""},
    {"payload": 1, "queue": "   "},
    {"payload": 1, "queue": "x" * 201},
    {"payload": 1, "queue": "bell\x07"},
    {"payload": 1, "pool": "lone \udfff"},
    {"payload": 1, "priority": True},
    {"payload": 1, "priority": 2**31},
    {"payload": 1, "priority": 1.0},
    {"payload": 1, "required": -1},
    {"payload": 1, "max_attempts": 0},
    {"payload": 1, "max_attempts": 1001},
    {"payload": 1, "dedupe_key": 5},
    {"payload": 1, "delay": -1},
    {"payload": 1, "run_at": dt.datetime(2026, 1, 1)},
    {"payload": 1, "bogus": 1},
    {"queue": "no payload"},
    ["not", "a", "mapping"],
]


@pytest.mark.parametrize("entry", BATCH_ENTRIES, ids=range(len(BATCH_ENTRIES)))
def test_batch_fast_checks_match_the_careful_path(entry: Any) -> None:
    from taskqueue.batch import build_batch
    from taskqueue.spec import build_spec_from_mapping

    try:
        expected: Any = build_spec_from_mapping(entry, 3)
    except ValidationError as exc:
        expected = ("error", exc.field, str(exc))
    try:
        batch = build_batch([{"payload": 0}, {"payload": 0}, {"payload": 0}, entry])
        got: Any = batch.specs()[3]
    except ValidationError as exc:
        got = ("error", exc.field, str(exc))
    assert got == expected
