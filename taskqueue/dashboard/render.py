"""Templates and the small formatting helpers they use; the throughput chart as SVG.

Autoescaping is on for every template, so a payload, error or queue name
holding markup is shown as text. Values never go into a ``<script>`` or an
unquoted attribute; URLs are built with ``urlencode``.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from typing import Any

import jinja2

from .. import humanize


def age(seconds: float | None) -> str:
    return humanize.seconds(seconds)


def when(value: dt.datetime | None) -> str:
    return "-" if value is None else value.astimezone(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str)


@dataclass(frozen=True)
class Bar:
    x: float
    y: float
    height: float
    count: int
    minute_ago: int


@dataclass(frozen=True)
class Chart:
    """Finished tasks per minute over the last hour, oldest minute on the left."""

    bars: list[Bar]
    width: int
    height: int
    peak: int
    total: int


def throughput_chart(per_minute: list[int], width: int = 600, height: int = 120) -> Chart:
    peak = max(per_minute, default=0)
    slot = width / max(len(per_minute), 1)
    bars = []
    for i, n in enumerate(reversed(per_minute)):
        h = 0.0 if peak == 0 else (height - 14) * n / peak
        bars.append(Bar(x=round(i * slot + 1, 2), y=round(height - h, 2), height=round(h, 2), count=n,
                        minute_ago=len(per_minute) - 1 - i))
    return Chart(bars, width, height, peak, sum(per_minute))


def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("taskqueue.dashboard", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(age=age, when=when, pretty_json=pretty_json)
    return env
