"""Workers: who holds which tasks, with capacity in use and the soonest lease expiry."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ..context import Dashboard, blocking, state


def _values(dashboard: Dashboard) -> dict[str, Any]:
    return {"workers": dashboard.read(dashboard.insights.running_by_worker)}


async def workers(request: Request) -> Response:
    dashboard = state(request)
    values = await blocking(_values, dashboard)
    return dashboard.page(request, "workers.html", **values)


routes = [Route("/workers", workers, name="workers")]
