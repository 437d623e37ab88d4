"""The handler threads' inbox: best claim order first, and no lock a switched-out thread can hold.

``queue.PriorityQueue`` guards its heap with a ``threading.Condition``. When
the interpreter switches a thread out while it holds that lock (the claimer
putting a batch, a handler taking its next task), every handler thread that
finishes a task blocks on the lock until the holder gets the GIL back, and
the process can sit with nobody running. Here the heap changes only inside
``heapq``'s C functions, which run whole under the GIL (the items compare by
their integers alone: the sequence number is unique), and a C ``SimpleQueue``
of tokens, one per item, does the waiting. An interpreter without the GIL gets
a lock around the heap.
"""

from __future__ import annotations

import heapq
import queue
import sys
import threading
from typing import Any

Item = tuple[int, int, int, int, Any]


def _gil_enabled() -> bool:
    check = getattr(sys, "_is_gil_enabled", None)  # Python 3.13+; earlier builds always have the GIL
    return True if check is None else bool(check())


class Inbox:
    """Items out smallest first; ``get`` blocks until there is one. Thread-safe."""

    def __init__(self) -> None:
        self._heap: list[Item] = []
        self._tokens: queue.SimpleQueue[None] = queue.SimpleQueue()
        self._lock = None if _gil_enabled() else threading.Lock()

    def put(self, item: Item) -> None:
        if self._lock is None:
            heapq.heappush(self._heap, item)
        else:
            with self._lock:
                heapq.heappush(self._heap, item)
        self._tokens.put(None)  # after the push: a token always has its item

    def get(self) -> Item:
        self._tokens.get()
        if self._lock is None:
            return heapq.heappop(self._heap)
        with self._lock:
            return heapq.heappop(self._heap)

    def __len__(self) -> int:
        return len(self._heap)
