"""Pool keys for network targets (Sner's per-network rate limit)."""

from __future__ import annotations

import ipaddress

from .errors import ValidationError


def network_pool(address: str, *, v4_prefix: int = 24, v6_prefix: int = 48) -> str:
    """Return the network that contains ``address``, as a pool name.

    ``"10.1.2.3"`` gives ``"10.1.2.0/24"``; an IPv6 address gives its /48. A
    network in CIDR form is accepted and widened to the prefix. Scanners pass
    the result as ``pool=`` so one network never sees too many probes at once.
    """
    if not isinstance(address, str):
        raise ValidationError("address", f"must be a string, got {type(address).__name__}")
    for name, value, top in (("v4_prefix", v4_prefix, 32), ("v6_prefix", v6_prefix, 128)):
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= top:
            raise ValidationError(name, f"must be an integer in [0, {top}], got {value!r}")
    text = address.strip()
    try:
        if "/" in text:
            net = ipaddress.ip_network(text, strict=False)
        else:
            ip = ipaddress.ip_address(text)
            net = ipaddress.ip_network(f"{ip}/{ip.max_prefixlen}")
    except ValueError:
        raise ValidationError("address", f"{address!r} is not an IPv4 or IPv6 address") from None
    if isinstance(net, ipaddress.IPv6Network) and net.network_address.ipv4_mapped is not None:
        mapped = net.network_address.ipv4_mapped
        net = ipaddress.ip_network(f"{mapped}/32")
    prefix = v4_prefix if net.version == 4 else v6_prefix
    if net.prefixlen < prefix:
        prefix = net.prefixlen
    return str(net.supernet(new_prefix=prefix))
