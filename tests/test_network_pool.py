"""network_pool: the per-network pool key (a /24 for IPv4, a /48 for IPv6)."""

from __future__ import annotations

import pytest

from taskqueue import Pool, TaskQueue, network_pool
from tests.support.apis import tq  # noqa: F401  (the contract runs against both APIs)


@pytest.mark.parametrize(
    "address,kwargs,expected",
    [
        ("10.1.2.3", {}, "10.1.2.0/24"),
        ("10.1.2.255", {}, "10.1.2.0/24"),
        ("192.168.77.1", {"v4_prefix": 16}, "192.168.0.0/16"),
        ("8.8.8.8", {"v4_prefix": 32}, "8.8.8.8/32"),
        ("0.0.0.0", {"v4_prefix": 0}, "0.0.0.0/0"),
        (" 10.1.2.3 ", {}, "10.1.2.0/24"),
        ("2001:db8:abcd:12::1", {}, "2001:db8:abcd::/48"),
        ("2001:DB8:ABCD:12::1", {}, "2001:db8:abcd::/48"),
        ("2001:db8:abcd:12::1", {"v6_prefix": 64}, "2001:db8:abcd:12::/64"),
        ("::1", {}, "::/48"),
        ("::ffff:10.1.2.3", {}, "10.1.2.0/24"),
        ("10.1.2.0/28", {}, "10.1.2.0/24"),
        ("10.1.0.0/16", {}, "10.1.0.0/16"),
    ],
)
def test_network_pool_keys(address: str, kwargs: dict, expected: str) -> None:
    assert network_pool(address, **kwargs) == expected


def test_same_network_same_pool() -> None:
    assert network_pool("10.9.8.1") == network_pool("10.9.8.200") != network_pool("10.9.9.1")


def test_network_pool_limits_one_network(tq: TaskQueue) -> None:
    targets = ["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.1.1", "10.0.1.2"]
    for ip in targets:
        tq.enqueue({"target": ip}, pool=network_pool(ip))
    tq.set_pool_limit(network_pool("10.0.0.0"), 1)
    tq.set_pool_limit(network_pool("10.0.1.0"), 1)
    got = tq.claim_many(limit=10)
    assert sorted(t.payload["target"] for t in got) == ["10.0.0.1", "10.0.1.1"]
    assert tq.pools() == [Pool("10.0.0.0/24", 1, 1), Pool("10.0.1.0/24", 1, 1)]
