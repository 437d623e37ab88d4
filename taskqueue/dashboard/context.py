"""What every route shares: the queue handle, the cached reads, the CSRF token, page rendering.

Reads are the read-only operations of :mod:`taskqueue.store.insights`, run
by the queue's own runner, and :class:`taskqueue.TaskQueue`'s reads; every action goes through ``TaskQueue``'s
public methods, so the dashboard keeps the same invariants as any caller.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, Response

from ..errors import ValidationError
from ..insights import CachedSummary, read_summary
from ..invariants import CheckReport
from ..metrics import make_registry
from ..queue import TaskQueue
from ..store.requests import Op
from .render import environment
from .security import CSRF_FIELD, check_post, new_token

T = TypeVar("T")

NAV = (("/", "Overview"), ("/tasks", "Tasks"), ("/pools", "Pools"), ("/workers", "Workers"), ("/failures", "Failures"))


class Dashboard:
    """The state of one dashboard app (kept on ``app.state.dashboard``)."""

    def __init__(self, tq: TaskQueue, *, read_only: bool, cache_seconds: float, check_seconds: float,
                 poll_seconds: float, owns_queue: bool) -> None:
        self.tq = tq
        self.read_only = read_only
        self.poll_seconds = poll_seconds
        self.owns_queue = owns_queue
        self.summary = CachedSummary(lambda: read_summary(tq), cache_seconds)
        self.token = new_token()
        self.env = environment()
        self.registry = make_registry(summary=self.summary.get, counters=tq.counters)
        self._check_lock = threading.Lock()
        self._check: tuple[float, CheckReport | None, str | None] | None = None
        self._checking = False
        self.check_seconds = check_seconds

    def read(self, op: Op[T]) -> T:
        """Run one read-only operation of taskqueue.store.insights in a transaction of its own."""
        return self.tq.db.run(op)

    def invariants(self) -> tuple[CheckReport | None, str | None, float]:
        """The latest invariant check: (report, error, its age in seconds).

        The check reads whole tables (about a second at 1M tasks), so only the
        very first page waits for it; after that a stale result is shown while
        one background thread runs the next check, at most every ``check_seconds``.
        """
        with self._check_lock:
            now = time.monotonic()
            if self._check is None:
                self._check = self._run_check()
            elif now - self._check[0] >= self.check_seconds and not self._checking:
                self._checking = True
                threading.Thread(target=self._refresh_check, name="taskqueue-dashboard-check", daemon=True).start()
            at, report, error = self._check
        return report, error, max(0.0, now - at)

    def _run_check(self) -> tuple[float, CheckReport | None, str | None]:
        try:
            return time.monotonic(), self.tq.check(), None
        except Exception as exc:  # shown on the overview, which still renders
            return time.monotonic(), None, f"{type(exc).__name__}: {exc}"

    def _refresh_check(self) -> None:
        result = self._run_check()
        with self._check_lock:
            self._check = result
            self._checking = False

    def changed(self) -> None:
        """After an action: the next page shows fresh counts rather than the cached ones."""
        self.summary.invalidate()

    # -- rendering ------------------------------------------------------------
    def page(self, request: Request, template: str, status_code: int = 200, **values: Any) -> HTMLResponse:
        html = self.env.get_template(template).render(
            request=request,
            base=request.scope.get("root_path", ""),
            nav=NAV,
            path=request.url.path,
            read_only=self.read_only,
            csrf_token=self.token,
            csrf_field=CSRF_FIELD,
            poll=self.poll_seconds,
            schema=self.tq.schema,
            **values,
        )
        return HTMLResponse(html, status_code=status_code, headers=SECURITY_HEADERS)

    def error(self, request: Request, message: str, status_code: int = 400) -> HTMLResponse:
        return self.page(request, "error.html", status_code=status_code, message=message)

    async def submitted(self, request: Request, parse: Callable[[Any], T]) -> Response | T:
        """For a POST: its form parsed by ``parse``, or the response that refuses it (see guard; bad input: 400)."""
        refusal, form = await self.guard(request)
        if refusal is not None:
            return refusal
        try:
            return parse(form)
        except ValidationError as exc:
            return self.error(request, str(exc))

    async def guard(self, request: Request) -> tuple[Response | None, Any]:
        """For a POST: (a refusal, None) or (None, the form). Read-only apps refuse every action."""
        if self.read_only:
            return PlainTextResponse("this dashboard is read-only", status_code=403), None
        form = await request.form()
        token = form.get(CSRF_FIELD)
        reason = check_post(request, self.token, token if isinstance(token, str) else None)
        if reason is not None:
            return PlainTextResponse(reason, status_code=403), None
        return None, form


#: No framing by other sites (clickjacking of the action buttons), no MIME
#: sniffing, no referrer sent away, and scripts only from our own static files.
SECURITY_HEADERS = {
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "frame-ancestors 'none'; form-action 'self'; base-uri 'none'"
    ),
}


def state(request: Request) -> Dashboard:
    dashboard: Dashboard = request.app.state.dashboard
    return dashboard


async def blocking(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Database work off the event loop."""
    return await run_in_threadpool(fn, *args, **kwargs)
