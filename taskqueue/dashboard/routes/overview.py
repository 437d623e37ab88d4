"""Overview: depth by queue and state, waiting by priority, oldest waiting age, throughput, invariants; rescue."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ..context import Dashboard, blocking, state
from ..render import throughput_chart

STATES = ("queued", "scheduled", "running", "failed")


def _values(dashboard: Dashboard) -> dict[str, Any]:
    summary = dashboard.summary.get()
    report, check_error, check_age = dashboard.invariants()
    oldest = summary.oldest_waiting_seconds()
    totals = {s: sum(states[s] for states in summary.depth.values()) for s in STATES}
    return {
        "summary": summary,
        "states": STATES,
        "depth": sorted(summary.depth.items()),
        "totals": totals,
        "oldest": oldest,
        "oldest_overall": max(oldest.values(), default=0.0),
        "waiting": summary.waiting_by_priority(),
        "chart": throughput_chart(summary.finished_per_minute),
        "report": report,
        "check_error": check_error,
        "check_age": check_age,
    }


async def overview(request: Request) -> Response:
    dashboard = state(request)
    values = await blocking(_values, dashboard)
    return dashboard.page(request, "overview.html", **values)


async def overview_fragment(request: Request) -> Response:
    dashboard = state(request)
    values = await blocking(_values, dashboard)
    return dashboard.page(request, "_overview.html", **values)


async def rescue(request: Request) -> Response:
    dashboard = state(request)
    refusal, _form = await dashboard.guard(request)
    if refusal is not None:
        return refusal
    rescued = await blocking(dashboard.tq.rescue_expired)
    dashboard.changed()
    values = await blocking(_values, dashboard)
    return dashboard.page(request, "_overview.html", notice=f"rescued {rescued} expired lease(s)", **values)


routes = [
    Route("/", overview, name="overview"),
    Route("/fragments/overview", overview_fragment, name="overview_fragment"),
    Route("/rescue", rescue, methods=["POST"], name="rescue"),
]
