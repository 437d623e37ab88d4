"""Tasks: the filtered list (keyset paging, search by id) and the task page with cancel and retry."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from ...errors import DatabaseError, TaskQueueError, ValidationError
from ...spec import check_int, check_optional_name, check_state, check_task_id
from ...store import insights as insight_ops
from ...task import STATES
from ..context import Dashboard, blocking, state

PAGE = 50
QUERY_CANCELED = "57014"  # PostgreSQL's sqlstate for a statement stopped by statement_timeout
#: A filter that matches almost nothing may walk the whole primary key; past
#: this the list gives up and asks for a narrower filter.
BROWSE_TIMEOUT_MS = 3000
NOTICES = {
    "cancelled": "Cancelled.",
    "cancel-requested": "Cancellation requested: the worker running it stops it on its next heartbeat.",
    "not-cancelled": "Nothing to cancel: the task had already finished.",
    "retried": "Queued again with a fresh attempt budget.",
    "not-retried": "Only a failed task can be retried.",
}


def parse_filters(params: Any) -> dict[str, Any]:
    """The list's filters from the query string; a bad value is a ValidationError (400)."""
    return {
        "state": check_state(params.get("state") or None),
        "queue": check_optional_name(params.get("queue") or None, "queue"),
        "pool": check_optional_name(params.get("pool") or None, "pool"),
        "priority_min": _optional_int(params.get("priority_min"), "priority_min"),
        "priority_max": _optional_int(params.get("priority_max"), "priority_max"),
    }


def _optional_int(value: str | None, name: str) -> int | None:
    if value is None or value.strip() == "":
        return None
    try:
        number = int(value)
    except ValueError:
        raise ValidationError(name, f"must be an integer, got {value!r}") from None
    return check_int(number, name, minimum=-(2**31), maximum=2**31 - 1)


def _list_values(dashboard: Dashboard, params: Any) -> dict[str, Any]:
    filters = parse_filters(params)
    before = params.get("before_id")
    before_id = check_task_id(_optional_int(before, "before_id")) if before else None
    error = None
    try:
        rows = dashboard.read(insight_ops.browse(filters, before_id, PAGE, BROWSE_TIMEOUT_MS))
    except DatabaseError as exc:
        if exc.sqlstate != QUERY_CANCELED:
            raise
        rows, error = [], "This filter matches too few tasks to list quickly; narrow it (state, queue) or search by id."
    query = {k: ("" if v is None else v) for k, v in filters.items()}
    return {
        "rows": rows,
        "filters": query,
        "query": [(k, v) for k, v in filters.items() if v is not None],
        "states": STATES,
        "before_id": before_id,
        "next_before": rows[-1]["id"] if len(rows) == PAGE else None,
        "live": before_id is None,
        "list_error": error,
    }


async def task_list(request: Request) -> Response:
    dashboard = state(request)
    search = request.query_params.get("id", "").strip()
    if search:
        try:
            task_id = check_task_id(_optional_int(search.lstrip("#"), "id"))
        except ValidationError as exc:
            return dashboard.error(request, str(exc), 400)
        return RedirectResponse(request.url_for("task", task_id=task_id), status_code=303)
    return await _render_list(request, "tasks.html")


async def task_list_fragment(request: Request) -> Response:
    return await _render_list(request, "_tasks.html")


async def _render_list(request: Request, template: str) -> Response:
    dashboard = state(request)
    try:
        values = await blocking(_list_values, dashboard, request.query_params)
    except ValidationError as exc:
        return dashboard.error(request, str(exc), 400)
    return dashboard.page(request, template, **values)


def _task_values(dashboard: Dashboard, task_id: int) -> dict[str, Any] | None:
    task = dashboard.tq.get(task_id)
    if task is None:
        return None
    pool = dashboard.tq.pool(task.pool) if task.pool is not None else None
    return {"task": task, "pool": pool}


async def task_page(request: Request) -> Response:
    dashboard = state(request)
    try:
        task_id = check_task_id(_optional_int(request.path_params["task_id"], "task_id"))
    except ValidationError as exc:
        return dashboard.error(request, str(exc), 400)
    values = await blocking(_task_values, dashboard, task_id)
    if values is None:
        return dashboard.error(request, f"No task {task_id}.", 404)
    notice = NOTICES.get(request.query_params.get("done", ""))
    return dashboard.page(request, "task.html", notice=notice, **values)


def _cancel(dashboard: Dashboard, task_id: int) -> str:
    if not dashboard.tq.cancel(task_id):
        return "not-cancelled"
    after = dashboard.tq.get(task_id)
    return "cancel-requested" if after is not None and after.state == "running" else "cancelled"


def _retry(dashboard: Dashboard, task_id: int) -> str:
    return "retried" if dashboard.tq.retry(task_id) else "not-retried"


async def _act(request: Request, action: Any) -> Response:
    dashboard = state(request)
    refusal, _form = await dashboard.guard(request)
    if refusal is not None:
        return refusal
    try:
        task_id = check_task_id(_optional_int(request.path_params["task_id"], "task_id"))
        outcome = await blocking(action, dashboard, task_id)
    except TaskQueueError as exc:
        return dashboard.error(request, str(exc), 409)
    dashboard.changed()
    target = request.url_for("task", task_id=task_id).include_query_params(done=outcome)
    return RedirectResponse(target, status_code=303)


async def cancel(request: Request) -> Response:
    return await _act(request, _cancel)


async def retry(request: Request) -> Response:
    return await _act(request, _retry)


routes = [
    Route("/tasks", task_list, name="tasks"),
    Route("/fragments/tasks", task_list_fragment, name="tasks_fragment"),
    Route("/tasks/{task_id}", task_page, name="task"),
    Route("/tasks/{task_id}/cancel", cancel, methods=["POST"], name="cancel"),
    Route("/tasks/{task_id}/retry", retry, methods=["POST"], name="retry"),
]
