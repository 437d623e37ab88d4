"""Bad input, everywhere: one table of bad values over every public entry point.

Each case must raise ``ValidationError`` naming the culprit field, and leave
the database exactly as it was (every row of tasks and pools compared).
One database serves the whole module: a case that wrote anything would fail
its own before/after comparison.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest

from taskqueue import Task, TaskQueue, ValidationError
from taskqueue.spec import MAX_NAME_LENGTH, MAX_PAYLOAD_BYTES
from taskqueue.testing.database import Server, fresh_database
from tests.support.apis import tq  # noqa: F401  (the contract runs against both APIs)

UTC = dt.timezone.utc
LONG = "n" * (MAX_NAME_LENGTH + 1)
SURROGATE = "bad\ud800name"
LOW_SURROGATE = "\udfff"


def _payload_of_size(size: int) -> str:
    """A JSON string payload whose compact encoding is exactly ``size`` bytes."""
    return "x" * (size - 2)  # the two quotes


def _deep(levels: int) -> Any:
    value: Any = 0
    for _ in range(levels):
        value = [value]
    return value


@dataclass
class World:
    tq: TaskQueue
    dsn: str
    task: Task  # a live claim, for the calls that take one


@pytest.fixture(scope="module")
def world(taskqueue_server: Server, taskqueue_template: str) -> Iterator[World]:
    with fresh_database(taskqueue_server, taskqueue_template) as dsn, TaskQueue(dsn) as tq:
        tq.set_pool_limit("p", 2)
        tq.enqueue({"seed": 1}, pool="p", dedupe_key="seed")
        tq.enqueue({"seed": 2}, queue="other", delay=3600)
        task = tq.claim(queues=["default"])
        assert task is not None
        yield World(tq, dsn, task)


def snapshot(dsn: str) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    with psycopg.connect(dsn) as conn:
        tasks = conn.execute("SELECT * FROM taskqueue.tasks ORDER BY id").fetchall()
        pools = conn.execute("SELECT * FROM taskqueue.pools ORDER BY name").fetchall()
    return tasks, pools


Call = Callable[[World], Any]


def enqueue(**kwargs: Any) -> Call:
    kwargs.setdefault("pool", "fresh")  # would create a pool row if validation let it through
    payload = kwargs.pop("payload", {"ok": True})
    return lambda w: w.tq.enqueue(payload, **kwargs)


def enqueue_many(specs: Any) -> Call:
    return lambda w: w.tq.enqueue_many(specs)


def claim(**kwargs: Any) -> Call:
    return lambda w: w.tq.claim(**kwargs)


def claim_many(**kwargs: Any) -> Call:
    return lambda w: w.tq.claim_many(**kwargs)


def on_task(method: str, *args: Any, **kwargs: Any) -> Call:
    return lambda w: getattr(w.tq, method)(w.task, *args, **kwargs)


def call(method: str, *args: Any, **kwargs: Any) -> Call:
    return lambda w: getattr(w.tq, method)(*args, **kwargs)


# (id, call, field the error must name; a trailing '*' means "starts with")
CASES: list[tuple[str, Call, str]] = [
    # -- enqueue: payload ---------------------------------------------------
    ("payload-over-1MiB", enqueue(payload=_payload_of_size(MAX_PAYLOAD_BYTES + 1)), "payload"),
    ("payload-5MiB-list", enqueue(payload=["y" * 1024] * 5 * 1024), "payload"),
    ("payload-multibyte-over-limit", enqueue(payload="€" * (MAX_PAYLOAD_BYTES // 3 + 1)), "payload"),
    ("payload-nul", enqueue(payload="a\u0000b"), "payload"),
    ("payload-nul-key", enqueue(payload={"k\u0000": 1}), "payload"),
    ("payload-nested-nul", enqueue(payload={"a": [{"b": "\x00"}]}), "payload*"),
    ("payload-surrogate", enqueue(payload="x\ud800"), "payload"),
    ("payload-low-surrogate", enqueue(payload=[LOW_SURROGATE]), "payload*"),
    ("payload-surrogate-key", enqueue(payload={"\udc80": 1}), "payload"),
    ("payload-nan", enqueue(payload=math.nan), "payload"),
    ("payload-inf", enqueue(payload={"x": math.inf}), "payload*"),
    ("payload-set", enqueue(payload={1, 2}), "payload"),
    ("payload-bytes", enqueue(payload=b"raw"), "payload"),
    ("payload-object", enqueue(payload=object()), "payload"),
    ("payload-datetime", enqueue(payload=dt.datetime.now(UTC)), "payload"),
    ("payload-int-key", enqueue(payload={1: "a"}), "payload"),
    ("payload-too-deep", enqueue(payload=_deep(150)), "payload*"),
    # -- enqueue: names -------------------------------------------------------
    ("queue-empty", enqueue(queue=""), "queue"),
    ("queue-blank", enqueue(queue=" \t"), "queue"),
    ("queue-too-long", enqueue(queue=LONG), "queue"),
    ("queue-newline", enqueue(queue="a\nb"), "queue"),
    ("queue-nul", enqueue(queue="a\x00b"), "queue"),
    ("queue-del", enqueue(queue="a\x7f"), "queue"),
    ("queue-surrogate", enqueue(queue=SURROGATE), "queue"),
    ("queue-int", enqueue(queue=5), "queue"),
    ("queue-none", enqueue(queue=None), "queue"),
    ("queue-bytes", enqueue(queue=b"default"), "queue"),
    ("pool-empty", enqueue(pool=""), "pool"),
    ("pool-too-long", enqueue(pool=LONG), "pool"),
    ("pool-surrogate", enqueue(pool=SURROGATE), "pool"),
    ("pool-tab", enqueue(pool="a\tb"), "pool"),
    ("pool-list", enqueue(pool=["p"]), "pool"),
    ("dedupe-empty", enqueue(dedupe_key=""), "dedupe_key"),
    ("dedupe-too-long", enqueue(dedupe_key=LONG), "dedupe_key"),
    ("dedupe-surrogate", enqueue(dedupe_key=LOW_SURROGATE), "dedupe_key"),
    ("dedupe-int", enqueue(dedupe_key=7), "dedupe_key"),
    # -- enqueue: numbers and times -----------------------------------------
    ("priority-over-int32", enqueue(priority=2**31), "priority"),
    ("priority-under-int32", enqueue(priority=-(2**31) - 1), "priority"),
    ("priority-float", enqueue(priority=1.0), "priority"),
    ("priority-str", enqueue(priority="1"), "priority"),
    ("priority-bool", enqueue(priority=True), "priority"),
    ("required-negative", enqueue(required=-1), "required"),
    ("required-over-int32", enqueue(required=2**31), "required"),
    ("required-float", enqueue(required=2.5), "required"),
    ("max-attempts-zero", enqueue(max_attempts=0), "max_attempts"),
    ("max-attempts-huge", enqueue(max_attempts=10**6), "max_attempts"),
    ("max-attempts-str", enqueue(max_attempts="3"), "max_attempts"),
    ("run-at-naive", enqueue(run_at=dt.datetime(2030, 1, 1)), "run_at"),
    ("run-at-str", enqueue(run_at="2030-01-01T00:00:00Z"), "run_at"),
    ("run-at-epoch", enqueue(run_at=1_900_000_000), "run_at"),
    ("run-at-and-delay", enqueue(run_at=dt.datetime(2030, 1, 1, tzinfo=UTC), delay=5), "run_at"),
    ("delay-negative", enqueue(delay=-0.001), "delay"),
    ("delay-nan", enqueue(delay=math.nan), "delay"),
    ("delay-inf", enqueue(delay=math.inf), "delay"),
    ("delay-over-10y", enqueue(delay=11 * 365 * 24 * 3600.0), "delay"),
    ("delay-str", enqueue(delay="5"), "delay"),
    ("delay-timedelta", enqueue(delay=dt.timedelta(seconds=5)), "delay"),
    ("connection-str", enqueue(connection="postgresql://"), "connection"),
    # -- enqueue_many --------------------------------------------------------
    ("many-str", enqueue_many("payload"), "specs"),
    ("many-mapping", enqueue_many({"payload": 1}), "specs"),
    ("many-int", enqueue_many(5), "specs"),
    ("many-not-mapping", enqueue_many([{"payload": 1}, ["payload", 2]]), "specs[1]"),
    ("many-missing-payload", enqueue_many([{"payload": 1}, {"queue": "q"}]), "specs[1].payload"),
    ("many-unknown-key", enqueue_many([{"payload": 1, "prio": 1}]), "specs[0]"),
    ("many-last-bad", enqueue_many([{"payload": i, "pool": "fresh"} for i in range(50)] + [{"payload": "\ud800"}]), "specs[50].payload"),
    ("many-huge-entry", enqueue_many([{"payload": 1}, {"payload": _payload_of_size(MAX_PAYLOAD_BYTES + 1)}]), "specs[1].payload"),
    ("many-long-queue", enqueue_many([{"payload": 1, "queue": LONG}]), "specs[0].queue"),
    # -- claim / claim_many / peek ------------------------------------------
    ("claim-available-negative", claim(available=-1), "available"),
    ("claim-available-float", claim(available=1.5), "available"),
    ("claim-available-huge", claim(available=2**63), "available"),
    ("claim-queues-str", claim(queues="default"), "queues"),
    ("claim-queues-empty", claim(queues=[]), "queues"),
    ("claim-queues-int", claim(queues=5), "queues"),
    ("claim-queues-surrogate", claim(queues=["default", SURROGATE]), "queues"),
    ("claim-queues-long", claim(queues=[LONG]), "queues"),
    ("claim-worker-empty", claim(worker=""), "worker"),
    ("claim-worker-long", claim(worker=LONG), "worker"),
    ("claim-worker-nul", claim(worker="w\x00"), "worker"),
    ("claim-lease-zero", claim(lease=0), "lease"),
    ("claim-lease-nan", claim(lease=math.nan), "lease"),
    ("claim-lease-str", claim(lease="60"), "lease"),
    ("claim-lease-8-days", claim(lease=8 * 24 * 3600.0), "lease"),
    ("claim-order", claim(order="asc"), "order"),
    ("claim-many-limit-zero", claim_many(limit=0), "limit"),
    ("claim-many-limit-huge", claim_many(limit=100_001), "limit"),
    ("claim-many-limit-str", claim_many(limit="5"), "limit"),
    ("claim-many-lease-negative", claim_many(lease=-1), "lease"),
    ("peek-available", call("peek", available=-1), "available"),
    ("peek-queues", call("peek", queues=[""]), "queues"),
    # -- holders of a claim ---------------------------------------------------
    ("heartbeat-lease-zero", on_task("heartbeat", lease=0), "lease"),
    ("heartbeat-not-task", call("heartbeat", {"id": 1}), "task"),
    ("heartbeat-many-not-task", call("heartbeat_many", [1, 2]), "task"),
    ("complete-result-nan", on_task("complete", {"x": math.nan}), "result*"),
    ("complete-result-huge", on_task("complete", _payload_of_size(MAX_PAYLOAD_BYTES + 1)), "result"),
    ("complete-result-surrogate", on_task("complete", "\ud800"), "result"),
    ("complete-result-nul", on_task("complete", ["\x00"]), "result*"),
    ("complete-not-task", call("complete", 1), "task"),
    ("complete-bad-connection", on_task("complete", None, connection=42), "connection"),
    ("fail-error-int", on_task("fail", 42), "error"),
    ("fail-error-none", on_task("fail", None), "error"),
    ("fail-retry-str", on_task("fail", "boom", retry="no"), "retry"),
    ("fail-retry-in-negative", on_task("fail", "boom", retry_in=-1), "retry_in"),
    ("fail-retry-in-nan", on_task("fail", "boom", retry_in=math.nan), "retry_in"),
    ("release-reason-int", on_task("release", reason=3), "reason"),
    ("release-not-task", call("release", None), "task"),
    # -- by id, pools, maintenance ------------------------------------------
    ("cancel-zero", call("cancel", 0), "task_id"),
    ("cancel-str", call("cancel", "1"), "task_id"),
    ("cancel-huge", call("cancel", 2**63), "task_id"),
    ("get-float", call("get", 1.0), "task_id"),
    ("tasks-state", call("tasks", state="running!"), "state"),
    ("tasks-queue", call("tasks", queue=""), "queue"),
    ("tasks-limit", call("tasks", limit=0), "limit"),
    ("pool-limit-negative", call("set_pool_limit", "p", -1), "limit"),
    ("pool-limit-float", call("set_pool_limit", "p", 1.5), "limit"),
    ("pool-limit-over-int32", call("set_pool_limit", "p", 2**31), "limit"),
    ("pool-limit-str", call("set_pool_limit", "p", "3"), "limit"),
    ("pool-limit-bool", call("set_pool_limit", "p", True), "limit"),
    ("pool-limit-name-empty", call("set_pool_limit", "", 1), "pool"),
    ("pool-limit-name-long", call("set_pool_limit", LONG, 1), "pool"),
    ("pool-limit-name-surrogate", call("set_pool_limit", SURROGATE, 1), "pool"),
    ("pool-get-empty", call("pool", ""), "pool"),
    ("prune-negative", call("prune", older_than=-1), "older_than"),
    ("prune-batch-zero", call("prune", batch=0), "batch"),
    ("check-repair-str", call("check", repair="yes"), "repair"),
]


@pytest.mark.parametrize("case_id,action,field", CASES, ids=[c[0] for c in CASES])
def test_bad_input_names_the_field_and_writes_nothing(world: World, case_id: str, action: Call, field: str) -> None:
    before = snapshot(world.dsn)
    with pytest.raises(ValidationError) as info:
        action(world)
    if field.endswith("*"):
        assert info.value.field.startswith(field[:-1]), info.value.field
    else:
        assert info.value.field == field, info.value.field
    assert str(info.value).startswith(info.value.field + ": ")
    assert "\n" not in str(info.value)
    assert snapshot(world.dsn) == before


def test_the_claim_is_still_live_after_every_bad_call(world: World) -> None:
    """The bad calls on the claim above did not finish or lose it."""
    world.tq.heartbeat(world.task)
    got = world.tq.get(world.task.id)
    assert got is not None and got.state == "running"


def test_payload_exactly_at_the_limit_is_accepted(tq: TaskQueue) -> None:
    task_id = tq.enqueue(_payload_of_size(MAX_PAYLOAD_BYTES))
    got = tq.get(task_id)
    assert got is not None and len(got.payload) == MAX_PAYLOAD_BYTES - 2


def test_odd_but_valid_unicode_round_trips(tq: TaskQueue) -> None:
    odd = {"emoji": "\U0001f600", "rtl": "\u202eabc", "zwj": "a\u200db", "bom": "\ufeff", "cjk": "\u6f22"}
    task_id = tq.enqueue(odd, queue="q\u00e9\U0001f600", dedupe_key="\u00e9" * 200)
    got = tq.get(task_id)
    assert got is not None and got.payload == odd and got.queue == "q\u00e9\U0001f600"


def test_error_text_with_surrogates_and_nul_is_escaped_not_rejected(tq: TaskQueue) -> None:
    tq.enqueue({})
    task = tq.claim()
    assert task is not None
    tq.fail(task, "bad \ud800 and \x00 here", retry=False)
    got = tq.get(task.id)
    assert got is not None and got.state == "failed"
    assert got.error == "bad \\ud800 and \\u0000 here"


def bad_input_case_count() -> int:
    return len(CASES)


# -- the CLI and the JSONL loader ------------------------------------------------------
# Run in-process through the CLI's own entry point (fast); two cases below go
# through a real `python -m taskqueue` subprocess as well.
HUGE_JSON = '"' + "x" * MAX_PAYLOAD_BYTES + '"'
CLI_CASES: list[tuple[str, list[str], str | None, str]] = [
    # (id, argv after `enqueue`, JSONL file content or None, text the error must contain)
    ("cli-bad-json", ["{not json"], None, "PAYLOAD_JSON"),
    ("cli-huge-payload", [HUGE_JSON], None, "payload"),
    ("cli-nul-payload", ['"a\\u0000b"'], None, "payload"),
    ("cli-surrogate-payload", ['"\\ud800"'], None, "payload"),
    ("cli-nan-payload", ["NaN"], None, "payload"),
    ("cli-empty-queue", ["{}", "--queue", ""], None, "queue"),
    ("cli-long-queue", ["{}", "--queue", LONG], None, "queue"),
    ("cli-long-pool", ["{}", "--pool", LONG], None, "pool"),
    ("cli-priority-word", ["{}", "--priority", "high"], None, "priority"),
    ("cli-priority-over-int32", ["{}", "--priority", str(2**31)], None, "priority"),
    ("cli-required-negative", ["{}", "--required", "-1"], None, "required"),
    ("cli-max-attempts-zero", ["{}", "--max-attempts", "0"], None, "max_attempts"),
    ("cli-delay-negative", ["{}", "--delay", "-5"], None, "delay"),
    ("cli-delay-nan", ["{}", "--delay", "nan"], None, "delay"),
    ("cli-missing-payload", [], None, "PAYLOAD_JSON"),
    ("jsonl-malformed-line", [], '{"payload": 1}\n{"payload": \n{"payload": 3}\n', "2"),
    ("jsonl-not-object", [], '{"payload": 1}\n[1, 2]\n', "2"),
    ("jsonl-missing-payload", [], '{"payload": 1}\n{"queue": "q"}\n', "payload"),
    ("jsonl-unknown-key", [], '{"payload": 1, "colour": "red"}\n', "colour"),
    ("jsonl-bad-priority", [], '{"payload": 1}\n{"payload": 2, "priority": "x"}\n', "priority"),
    ("jsonl-long-queue", [], '{"payload": 1, "queue": "' + LONG + '"}\n', "queue"),
    ("jsonl-nul", [], '{"payload": "\\u0000"}\n', "payload"),
    ("jsonl-surrogate", [], '{"payload": "\\udfff"}\n', "payload"),
    ("jsonl-huge-line", [], '{"payload": 1}\n{"payload": ' + HUGE_JSON + "}\n", "payload"),
    ("jsonl-bad-run-at", [], '{"payload": 1, "run_at": "tomorrow"}\n', "run_at"),
    ("jsonl-last-of-many-bad", [], '{"payload": 1}\n' * 50 + '{"payload": NaN}\n', "51"),
    ("jsonl-not-utf8", [], None, "UTF-8"),
    ("jsonl-empty", [], "", "no tasks"),
]


@pytest.mark.parametrize("case_id,argv,content,needle", CLI_CASES, ids=[c[0] for c in CLI_CASES])
def test_cli_bad_input_is_one_line_and_writes_nothing(
    world: World, tmp_path: Any, capsys: pytest.CaptureFixture[str], case_id: str, argv: list[str],
    content: str | None, needle: str
) -> None:
    from taskqueue.cli.app import main

    args = ["enqueue", *argv, "--dsn", world.dsn]
    if case_id.startswith("jsonl"):
        path = tmp_path / "tasks.jsonl"
        if content is None:
            path.write_bytes(b'{"payload": "\xff\xfe"}\n')
        else:
            path.write_text(content, encoding="utf-8", errors="surrogatepass")
        args += ["--file", str(path)]
    before = snapshot(world.dsn)
    with pytest.raises(SystemExit) as info:
        main(args)
    assert info.value.code not in (0, None)
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines and all(line.startswith("error: ") for line in lines), err
    if case_id.startswith("jsonl") and len(lines) > 1:
        # The loader names each bad line, then sums up on one last line.
        assert "nothing was written" in lines[-1], err
    else:
        assert len(lines) == 1, err
    assert needle in err, err
    assert snapshot(world.dsn) == before


@pytest.mark.parametrize(
    "argv",
    [["enqueue", "{}", "--priority", str(2**40)], ["enqueue", '{"a": "\\ud800"}', "--queue", "q"]],
    ids=["subprocess-priority", "subprocess-surrogate"],
)
def test_cli_subprocess_bad_input(world: World, argv: list[str]) -> None:
    import os
    import subprocess
    import sys

    before = snapshot(world.dsn)
    env = {**os.environ, "TASKQUEUE_DSN": world.dsn}
    done = subprocess.run([sys.executable, "-m", "taskqueue", *argv], env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode != 0
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert snapshot(world.dsn) == before


def test_bad_input_figure() -> None:
    """How many bad inputs the suite tries (reported with the fault figures)."""
    from tests.chaos.harness import FIGURES

    FIGURES["bad inputs tried (API, CLI, JSONL)"] = len(CASES) + len(CLI_CASES) + 2
    assert len(CASES) >= 100 and len(CLI_CASES) >= 20
