"""Pools: limit, running, parked and waiting per pool; edit a limit through TaskQueue.set_pool_limit."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from ...errors import ValidationError
from ...spec import check_name, check_pool_limit
from ...store import insights as insight_ops
from ..context import Dashboard, blocking, state


def _values(dashboard: Dashboard) -> dict[str, Any]:
    waiting = dashboard.read(insight_ops.pool_waiting())
    return {"pools": dashboard.summary.get().pool_use(waiting)}


async def pools(request: Request) -> Response:
    dashboard = state(request)
    values = await blocking(_values, dashboard)
    changed = request.query_params.get("changed")
    return dashboard.page(request, "pools.html", changed=changed, **values)


def parse_limit(form: Any) -> tuple[str, int | None]:
    name = check_name(form.get("pool"), "pool")
    raw = str(form.get("limit", "")).strip()
    if raw == "" or raw.lower() == "none":
        return name, None
    try:
        number = int(raw)
    except ValueError:
        raise ValidationError("limit", f"must be a whole number or empty for no limit, got {raw!r}") from None
    return name, check_pool_limit(number)


async def set_limit(request: Request) -> Response:
    dashboard = state(request)
    parsed = await dashboard.submitted(request, parse_limit)
    if isinstance(parsed, Response):
        return parsed
    name, limit = parsed
    await blocking(dashboard.tq.set_pool_limit, name, limit)
    dashboard.changed()
    return RedirectResponse(request.url_for("pools").include_query_params(changed=name), status_code=303)


routes = [
    Route("/pools", pools, name="pools"),
    Route("/pools/limit", set_limit, methods=["POST"], name="set_limit"),
]
