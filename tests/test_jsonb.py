"""jsonb comes back exactly as json.loads would give it, through orjson or its fallback."""

from __future__ import annotations

import json

import pytest

from taskqueue import TaskQueue
from taskqueue.jsonb import loads
from tests.support.apis import tq  # noqa: F401  (the contract runs against both APIs)

SAMPLES = [
    "null", "true", "0", "-0", "1.5", "1e400", "-1e400", str(10**30), str(-(10**40)), "123456789012345678901234567890.5",
    str(2**63 - 1), str(2**63), str(-(2**63)), str(-(2**63) - 1), str(2**64), "999999999999999999", "[1e-400, 5e-324]",
    '"\\u00e9\\ud83d\\ude00 text"', '{"a": [1, 2, {"b": null}], "c": "x"}', '{"a": 1, "a": 2}', "[" * 200 + "]" * 200,
]


@pytest.mark.parametrize("text", SAMPLES)
def test_loads_equals_the_standard_library(text: str) -> None:
    expected = json.loads(text)
    for data in (text, text.encode(), memoryview(text.encode())):
        got = loads(data)
        assert got == expected or (got != got and expected != expected)
        assert type(got) is type(expected)


def test_payloads_orjson_refuses_come_back_whole(tq: TaskQueue) -> None:
    payload = {"big": 10**30, "neg": -(10**25), "nested": [{"x": 1.25}], "text": "é😀"}
    tid = tq.enqueue(payload)
    task = tq.claim()
    assert task is not None and task.id == tid
    assert task.payload == payload and type(task.payload["big"]) is int
    tq.complete(task, result={"huge": 2**70})
    stored = tq.get(tid)
    assert stored is not None and stored.result == {"huge": 2**70}
