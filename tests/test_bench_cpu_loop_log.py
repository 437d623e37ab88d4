"""The drain benchmark's CPU cells time each job's loop: the log the worker writes and the figure read from it."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import drain_app


def test_cpu_job_logs_every_nth_job_with_cumulative_loop_time(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "loops"
    monkeypatch.setattr(drain_app, "CPU_LOG", str(log))
    monkeypatch.setattr(drain_app, "CPU_LOG_EVERY", 3)
    monkeypatch.setattr(drain_app, "_cpu_log", {"jobs": 0, "loop": 0.0})
    for _ in range(7):
        drain_app.cpu_job(2_000)
    lines = [line.split() for line in log.read_text().splitlines()]
    assert [int(jobs) for _, jobs, _ in lines] == [3, 6]
    first, second = float(lines[0][2]), float(lines[1][2])
    assert 0 < first < second  # cumulative thread time of the loops alone
    assert drain_app.job_loop_us(str(log)) == round((second - first) / 3 * 1e6, 1)


def test_job_loop_us_sums_each_process_from_its_first_line_to_its_last(tmp_path: Path) -> None:
    log = tmp_path / "loops"
    log.write_text("10 250 0.25\n11 250 0.5\n10 500 0.5\n11 500 1.0\n10 750 0.75\n12 250 0.1\n")
    # pid 10: 500 jobs in 0.5 s; pid 11: 250 jobs in 0.5 s; pid 12 has one line and says nothing yet.
    assert drain_app.job_loop_us(str(log)) == round(1.0 / 750 * 1e6, 1)


def test_job_loop_us_is_none_without_two_lines_from_any_process(tmp_path: Path) -> None:
    log = tmp_path / "loops"
    log.write_text("10 250 0.25\n")
    assert drain_app.job_loop_us(str(log)) is None
