"""SIGTERM/SIGINT for a running worker, with no locking work in the signal handler.

A Python signal handler runs on the main thread between two bytecodes, even
inside ``threading.Event.set()`` while it holds the event's lock. A handler
that sets an event can therefore wait on a lock its own thread holds: two
signals close together deadlocked the worker that way. Here the C-level
handler writes the signal number to a pipe (``signal.set_wakeup_fd``), the
Python handler does nothing, and a watcher thread reads the pipe and calls
back from an ordinary thread, where taking locks is safe.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def _ignore(signum: int, frame: FrameType | None) -> None:
    """The Python-level handler: nothing to do, the wakeup fd carries the signal."""


class SignalWatcher:
    """Counts SIGTERM/SIGINT and calls ``on_signal(count)`` on its own thread, once per signal."""

    def __init__(self, on_signal: Callable[[int], None]) -> None:
        self.on_signal = on_signal
        self.count = 0
        self._previous: dict[int, Any] = {}
        self._previous_fd = -1
        self._read_fd: int | None = None
        self._write_fd: int | None = None
        self._thread: threading.Thread | None = None

    def install(self) -> bool:
        """Take over the stop signals; False (and nothing done) off the main thread."""
        if threading.current_thread() is not threading.main_thread():
            return False
        self._read_fd, self._write_fd = os.pipe()
        os.set_blocking(self._write_fd, False)
        self._thread = threading.Thread(target=self._watch, name="taskqueue-signals", daemon=True)
        self._thread.start()
        self._previous_fd = signal.set_wakeup_fd(self._write_fd, warn_on_full_buffer=False)
        for sig in STOP_SIGNALS:
            self._previous[sig] = signal.signal(sig, _ignore)
        return True

    def restore(self) -> None:
        """Give the signals and the wakeup fd back to whoever had them before ``install``."""
        if self._write_fd is None:
            return
        for sig, handler in self._previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
        self._previous.clear()
        signal.set_wakeup_fd(self._previous_fd)
        os.close(self._write_fd)  # the watcher reads end-of-file and returns
        self._write_fd = None
        if self._thread is not None:
            self._thread.join(5.0)
        if self._read_fd is not None:
            os.close(self._read_fd)
            self._read_fd = None

    def _watch(self) -> None:
        assert self._read_fd is not None
        while True:
            try:
                data = os.read(self._read_fd, 64)
            except OSError:
                return
            if not data:
                return
            for signum in data:
                if signum in STOP_SIGNALS:
                    self.count += 1
                    self.on_signal(self.count)
