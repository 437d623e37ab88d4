"""Ctrl-C in the ``taskqueue`` command: one line and exit status 130, never a traceback.

The first SIGINT raises ``KeyboardInterrupt`` as usual, so the command winds
down (closes connections, leaves a watch view) and prints ``error:
interrupted``. A second SIGINT while it winds down, or any SIGINT once the
command has returned, ends the process at once with ``os._exit``: there is no
bookkeeping left that an exit could tear (the embedded server's only state is
PostgreSQL's own and an ``flock`` the kernel drops), and nothing left that
could print an "Exception ignored in atexit callback" traceback. Once the
interpreter shuts down (the exit handlers run), a SIGINT is ignored: Python
puts the default action back as it finishes, and a signal that landed then
killed the process by SIGINT instead of letting it exit with its status.

While a worker runs it takes the signals over and gives them back after.
"""

from __future__ import annotations

import atexit
import os
import signal
from types import FrameType
from typing import NoReturn

INTERRUPTED = 130
MESSAGE = b"error: interrupted\n"

_seen = 0
_told = False
_finished = False


def install() -> None:
    """Put the policy in place; call first thing in ``main``, before the heavy imports."""
    global _seen, _told, _finished
    _seen, _told, _finished = 0, False, False
    signal.signal(signal.SIGINT, _on_sigint)


def told() -> None:
    """The command printed ``error: interrupted`` itself; the exit path must not repeat it."""
    global _told
    _told = True


def finished() -> None:
    """The command is done: from now on a SIGINT ends the process quietly, and is ignored once it exits."""
    global _finished
    if not _finished:
        atexit.register(_ignore_from_now_on)  # the last registered: the first exit handler to run
    _finished = True


def _ignore_from_now_on() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def before_start() -> NoReturn:
    """Interrupted before any command began (while the modules load): the one line, status 130, no traceback."""
    os.write(2, MESSAGE)
    os._exit(INTERRUPTED)


def _on_sigint(signum: int, frame: FrameType | None) -> None:
    global _seen
    _seen += 1
    if _seen == 1 and not _finished:
        raise KeyboardInterrupt
    if not _told and not _finished:
        os.write(2, MESSAGE)
    os._exit(INTERRUPTED)
