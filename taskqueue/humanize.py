"""Durations for people, shared by the CLI tables and the dashboard pages."""

from __future__ import annotations


def seconds(value: float | None) -> str:
    """850 ms, 12.5 s, 3.2 min, 5.1 h, 2.0 d; "-" for None."""
    if value is None:
        return "-"
    if value < 1:
        return f"{value * 1000:.0f} ms"
    if value < 120:
        return f"{value:.1f} s"
    if value < 7200:
        return f"{value / 60:.1f} min"
    if value < 172800:
        return f"{value / 3600:.1f} h"
    return f"{value / 86400:.1f} d"
