"""Workers: the registry's live (and recently dead) workers, with what each one holds now.

The registry (TaskQueue.workers) gives queues, capacity, capacity in use and
the last heartbeat; the running tasks give the ids each worker holds and its
soonest lease expiry. A lease holder missing from the registry (a program
that claims through the API without a Worker) is listed too.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ...store import insights as insight_ops
from ..context import Dashboard, blocking, state


def _values(dashboard: Dashboard) -> dict[str, Any]:
    holding = {row["worker"]: row for row in dashboard.read(insight_ops.running_by_worker())}
    registered = dashboard.tq.workers(include_dead=True)
    names = {w.name for w in registered}
    return {
        "workers": [(w, holding.get(w.name)) for w in registered],
        "unregistered": [row for name, row in sorted(holding.items()) if name not in names],
    }


async def workers(request: Request) -> Response:
    dashboard = state(request)
    values = await blocking(_values, dashboard)
    return dashboard.page(request, "workers.html", **values)


routes = [Route("/workers", workers, name="workers")]
