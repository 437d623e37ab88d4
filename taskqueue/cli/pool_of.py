"""``pool-of ADDRESS...``: the pool name of a network target, as ``network_pool`` computes it.

Scripts that enqueue from the shell need the same pool names as the Python
API, or limits set on ``10.1.2.0/24`` would not apply to their tasks; with
one name per line the output also feeds ``xargs`` and ``pools set``.
"""

from __future__ import annotations

from typing import Annotated

import typer

from ..network import network_pool
from .common import RUN

V4PrefixOption = Annotated[int, typer.Option("--v4-prefix", min=0, max=32, help="IPv4 network size.")]
V6PrefixOption = Annotated[int, typer.Option("--v6-prefix", min=0, max=128, help="IPv6 network size.")]


def pool_of(
    addresses: Annotated[list[str], typer.Argument(metavar="ADDRESS", help="IPv4/IPv6 addresses or networks.")],
    v4_prefix: V4PrefixOption = 24,
    v6_prefix: V6PrefixOption = 48,
) -> None:
    """Print the pool name of each address: its /24 (IPv4) or /48 (IPv6) network, one per line."""
    names = [network_pool(a, v4_prefix=v4_prefix, v6_prefix=v6_prefix) for a in addresses]
    typer.echo("\n".join(names))


def register(app: typer.Typer) -> None:
    app.command("pool-of", rich_help_panel=RUN)(pool_of)
