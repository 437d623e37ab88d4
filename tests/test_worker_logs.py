"""What the worker says about a failing handler: the real retry delay, and the whole traceback.

A ``Retry(in_=30)`` used to be logged as "retry in 0.000 s" (the handler's run
time), and a raising handler's traceback was neither logged nor stored.
"""

from __future__ import annotations

import json
import logging

import pytest

from taskqueue import Retry, Task, TaskQueue
from taskqueue.spec import MAX_ERROR_LENGTH
from taskqueue.worker.tracebacks import error_text
from tests.support.polling import wait_for
from tests.test_worker import new_worker, running


def _deep(n: int) -> None:
    if n == 0:
        raise RuntimeError("bottom of the stack")
    _deep(n - 1)


def test_a_retry_logs_the_delay_it_asked_for(tq: TaskQueue, caplog: pytest.LogCaptureFixture) -> None:
    w = new_worker(queues=["later"])

    @w.handler("later")
    def later(task: Task) -> None:
        raise Retry(in_=30, reason="not yet")

    task_id = tq.enqueue({}, queue="later")
    with caplog.at_level(logging.INFO, logger="taskqueue.worker"):
        with running(w, tq):
            assert wait_for(lambda: any(getattr(r, "outcome", None) == "retry" for r in caplog.records))
    record = next(r for r in caplog.records if getattr(r, "outcome", None) == "retry")
    assert record.retry_in == 30 and "retry in 30 s" in record.getMessage(), record.getMessage()
    assert tq.get(task_id).state == "scheduled"


def test_the_default_backoff_is_logged_as_the_delay_it_chose(tq: TaskQueue, caplog: pytest.LogCaptureFixture) -> None:
    w = new_worker(queues=["flaky"])
    w.handler("flaky")(lambda task: _deep(0))
    task_id = tq.enqueue({}, queue="flaky")
    with caplog.at_level(logging.INFO, logger="taskqueue.worker"):
        with running(w, tq):
            assert wait_for(lambda: any(getattr(r, "outcome", None) == "retry" for r in caplog.records))
    record = next(r for r in caplog.records if getattr(r, "outcome", None) == "retry")
    # attempt 1: backoff of 1 s with +-25 % jitter; the database's run_at agrees with the logged delay
    assert 0.75 <= record.retry_in <= 1.25
    got = tq.get(task_id)
    assert got.run_at is not None and got.finished_at is None


def test_a_raising_handler_logs_and_stores_its_traceback(tq: TaskQueue, caplog: pytest.LogCaptureFixture) -> None:
    w = new_worker(queues=["boom"])
    w.handler("boom")(lambda task: _deep(3))
    task_id = tq.enqueue({}, queue="boom", max_attempts=1)
    with caplog.at_level(logging.WARNING, logger="taskqueue.worker"):
        with running(w, tq):
            assert wait_for(lambda: tq.get(task_id).state == "failed")
    raised = [r for r in caplog.records if getattr(r, "outcome", None) == "raised"]
    assert len(raised) == 1 and raised[0].levelno == logging.WARNING
    assert raised[0].exc_info is not None and raised[0].exc_info[0] is RuntimeError
    error = tq.get(task_id).error
    assert error.splitlines()[0] == "RuntimeError: bottom of the stack"
    assert "Traceback (most recent call last)" in error and error.count("in _deep") == 4


def _chain(n: int) -> None:
    """``n`` exceptions, each raised while handling the one before: a long traceback Python cannot fold."""
    try:
        if n == 0:
            raise ValueError("first cause")
        _chain(n - 1)
    except Exception as exc:
        raise RuntimeError(f"level {n} failed") from exc


def test_a_long_traceback_is_cut_in_the_middle_to_the_documented_size() -> None:
    try:
        _chain(120)
    except RuntimeError as exc:
        text = error_text(exc)
    assert len(text) <= MAX_ERROR_LENGTH
    lines = text.splitlines()
    assert lines[0] == "RuntimeError: level 120 failed"
    assert "characters of the traceback cut" in text
    assert "ValueError: first cause" in text  # the first cause (outermost in the text) stays
    assert lines[-1] == "RuntimeError: level 120 failed"  # and so does the exception that reached the worker


def test_the_cli_log_format_prints_the_whole_traceback() -> None:
    from taskqueue.cli.worker import FieldsFormatter

    try:
        _deep(2)
    except RuntimeError:
        import sys

        exc_info = sys.exc_info()
    record = logging.LogRecord("taskqueue.worker.executor", logging.WARNING, __file__, 1, "task %s raised", (7,),
                               exc_info)
    record.task_id = 7
    text = FieldsFormatter().format(record)
    assert text.splitlines()[0].endswith("task 7 raised  task_id=7")
    assert "Traceback (most recent call last)" in text and text.count("in _deep") == 3
    doc = json.loads(FieldsFormatter(as_json=True).format(record))
    assert doc["task_id"] == 7 and doc["exception"].startswith("Traceback (most recent call last)")
