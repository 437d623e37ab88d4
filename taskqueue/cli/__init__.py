"""The ``taskqueue`` command (also ``python -m taskqueue``).

Importing this package is cheap on purpose: ``main`` puts the Ctrl-C policy in
place before the command modules (and whatever they import) are loaded.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from . import interrupts


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of ``taskqueue`` and ``python -m taskqueue``; always ends in SystemExit."""
    interrupts.install()
    try:
        from .app import main as run_command
    except KeyboardInterrupt:  # Ctrl-C while the commands load: nothing started, nothing to wind down
        interrupts.before_start()
    run_command(argv)


def __getattr__(name: str) -> Any:
    if name == "app":
        from .app import app

        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["app", "main"]
