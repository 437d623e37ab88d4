"""The handler threads' inbox: claim order, blocking gets, and every item out exactly once under threads.

It replaced queue.PriorityQueue, whose lock a switched-out thread could hold
while every other handler thread waited on it (docs/performance.md, Drain).
No database: the inbox is the worker's in-process hand-off between its
claimer and its handler threads.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from taskqueue.worker.inbox import Inbox, Item


def _item(priority: int, task_id: int, seq: int, payload: Any = None) -> Item:
    return (0, priority, task_id, seq, payload)


def test_items_come_out_in_claim_order_whatever_order_they_went_in() -> None:
    inbox = Inbox()
    for seq, (priority, task_id) in enumerate([(5, 3), (1, 9), (5, 1), (0, 20), (1, 2)]):
        inbox.put(_item(priority, task_id, seq))
    inbox.put((1, 0, 0, 99, "stop"))  # a stop sorts after every task, whatever their priority
    inbox.put(_item(7, 4, 100))
    out = [inbox.get()[1:3] for _ in range(7)]
    assert out == [(0, 20), (1, 2), (1, 9), (5, 1), (5, 3), (7, 4), (0, 0)]
    assert len(inbox) == 0


def test_payloads_are_never_compared() -> None:
    """Equal priority and id (a task claimed again after a lost lease) fall back to the unique sequence."""

    class Opaque:
        def __lt__(self, other: object) -> bool:
            raise AssertionError("compared a payload")

    inbox = Inbox()
    for seq in range(5):
        inbox.put(_item(1, 1, 10 - seq, Opaque()))
    assert [inbox.get()[3] for _ in range(5)] == [6, 7, 8, 9, 10]


def test_get_waits_for_a_put() -> None:
    inbox = Inbox()
    got: list[Item] = []
    taker = threading.Thread(target=lambda: got.append(inbox.get()))
    taker.start()
    time.sleep(0.05)
    assert not got and taker.is_alive()  # nothing to take yet
    inbox.put(_item(3, 1, 0, "task"))
    taker.join(timeout=10)
    assert got == [_item(3, 1, 0, "task")]


def test_every_item_comes_out_exactly_once_under_many_threads() -> None:
    """4 putting threads and 8 taking threads, 20,000 items: none lost, none twice."""
    inbox = Inbox()
    per_producer, producers, consumers = 5_000, 4, 8
    taken: list[list[int]] = [[] for _ in range(consumers)]

    def produce(k: int) -> None:
        for i in range(per_producer):
            seq = k * per_producer + i
            inbox.put(_item(i % 7, seq, seq))

    def consume(k: int) -> None:
        while True:
            item = inbox.get()
            if item[0] == 1:
                return
            taken[k].append(item[3])

    takers = [threading.Thread(target=consume, args=(k,)) for k in range(consumers)]
    putters = [threading.Thread(target=produce, args=(k,)) for k in range(producers)]
    for t in takers + putters:
        t.start()
    for t in putters:
        t.join(timeout=30)
    for k in range(consumers):
        inbox.put((1, 0, 0, 10**9 + k, None))
    for t in takers:
        t.join(timeout=30)
        assert not t.is_alive()
    everything = sorted(seq for part in taken for seq in part)
    assert everything == list(range(producers * per_producer))
    assert len(inbox) == 0
