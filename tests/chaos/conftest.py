"""Fixtures of the fault-injection suite; its figures are printed at the end of the run."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.chaos.harness import FIGURES, Fleet, install_ledger


@pytest.fixture
def ledger(dsn: str) -> str:
    """The test database, with the execution ledger and the audit trigger installed."""
    install_ledger(dsn)
    return dsn


@pytest.fixture
def fleet(ledger: str, tmp_path: Path) -> Iterator[Fleet]:
    logdir = tmp_path / "logs"
    logdir.mkdir()
    workers = Fleet(ledger, logdir)
    try:
        yield workers
    finally:
        workers.stop()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not FIGURES:
        return
    terminalreporter.section("fault-injection figures")
    for name in sorted(FIGURES):
        value = FIGURES[name]
        shown = f"{value:.3f}" if isinstance(value, float) and not value.is_integer() else f"{int(value)}"
        terminalreporter.write_line(f"{name}: {shown}")
