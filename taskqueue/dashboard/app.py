"""``create_app``: the dashboard as one Starlette application.

Mount it in your own ASGI app (``app.mount("/queue", create_app(tq))``) or
serve it with ``taskqueue dashboard``. Give it a ``TaskQueue`` you own, or a
DSN and schema and it opens (and on shutdown closes) one of its own.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import Mount
from starlette.staticfiles import StaticFiles

from ..queue import TaskQueue
from ..schema import SCHEMA_DEFAULT
from .context import Dashboard
from .routes import failures, metrics, overview, pools, tasks, workers
from .security import BasicAuth, Credentials


def create_app(
    queue: TaskQueue | None = None,
    *,
    dsn: str | None = None,
    schema: str = SCHEMA_DEFAULT,
    read_only: bool = False,
    credentials: Credentials | None = None,
    cache_seconds: float = 5.0,
    check_seconds: float = 30.0,
    poll_seconds: float = 2.0,
) -> Starlette:
    """The dashboard over ``queue`` (or over a queue opened from ``dsn``/``schema``).

    ``read_only`` refuses every action; ``credentials`` puts every request
    behind basic auth. Counts and metrics are read at most once per
    ``cache_seconds``, the invariant check at most once per ``check_seconds``;
    pages refresh every ``poll_seconds``.
    """
    owns_queue = queue is None
    tq = TaskQueue(dsn, schema=schema) if queue is None else queue
    dashboard = Dashboard(tq, read_only=read_only, cache_seconds=cache_seconds, check_seconds=check_seconds,
                          poll_seconds=poll_seconds, owns_queue=owns_queue)

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            if dashboard.owns_queue:
                tq.close()

    routes = [
        *overview.routes,
        *tasks.routes,
        *pools.routes,
        *workers.routes,
        *failures.routes,
        *metrics.routes,
        Mount("/static", app=StaticFiles(packages=[("taskqueue.dashboard", "static")]), name="static"),
    ]
    middleware = [Middleware(BasicAuth, credentials=credentials)] if credentials is not None else []
    app = Starlette(routes=routes, middleware=middleware, lifespan=lifespan)
    app.state.dashboard = dashboard
    return app
