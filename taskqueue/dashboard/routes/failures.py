"""Failures: failed and retrying tasks grouped by error; retry or cancel one, some, or a whole group.

Every action runs through TaskQueue.retry / TaskQueue.cancel task by task,
each in its own transaction, so a bulk action keeps exactly the invariants a
single one keeps; a bulk action takes at most BULK tasks per request.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from ...errors import TaskQueueError, ValidationError
from ...spec import check_task_id
from ...store import insights as insight_ops
from ...store.requests import Row
from ..context import Dashboard, blocking, state
from .tasks import PAGE, _optional_int

GROUPS = 100
BULK = 500
KINDS = ("failed", "retrying")
ACTIONS = ("retry", "cancel")


async def failures(request: Request) -> Response:
    dashboard = state(request)
    groups = await blocking(dashboard.read, insight_ops.failure_groups(GROUPS))
    return dashboard.page(request, "failures.html", groups=groups, bulk=BULK)


def _group_key(params: Any) -> tuple[str, str]:
    kind = params.get("kind", "")
    if kind not in KINDS:
        raise ValidationError("kind", f"must be one of {', '.join(KINDS)}")
    fingerprint = params.get("fingerprint")
    if not isinstance(fingerprint, str) or len(fingerprint) > 200:
        raise ValidationError("fingerprint", "must be a failure group's error text (at most 200 characters)")
    return kind, fingerprint


def _members(dashboard: Dashboard, kind: str, fingerprint: str, before_id: int | None, limit: int) -> list[Row]:
    return dashboard.read(insight_ops.failure_members(kind, fingerprint, before_id, limit))


async def group(request: Request) -> Response:
    dashboard = state(request)
    try:
        kind, fingerprint = _group_key(request.query_params)
        before = request.query_params.get("before_id")
        before_id = check_task_id(_optional_int(before, "before_id")) if before else None
    except ValidationError as exc:
        return dashboard.error(request, str(exc), 400)
    rows = await blocking(_members, dashboard, kind, fingerprint, before_id, PAGE)
    return dashboard.page(
        request, "failure_group.html", kind=kind, fingerprint=fingerprint, rows=rows, bulk=BULK,
        next_before=rows[-1]["id"] if len(rows) == PAGE else None, done=_done(request.query_params),
    )


def _done(params: Any) -> dict[str, int] | None:
    if "acted" not in params:
        return None
    try:
        return {"acted": int(params.get("acted", 0)), "skipped": int(params.get("skipped", 0))}
    except ValueError:
        return None


def _apply(dashboard: Dashboard, action: str, ids: list[int]) -> tuple[int, int]:
    act = dashboard.tq.retry if action == "retry" else dashboard.tq.cancel
    acted = skipped = 0
    for task_id in ids:
        try:
            changed = act(task_id)
        except TaskQueueError:  # e.g. DuplicateTask: that one stays failed, the rest go on
            changed = False
        acted += changed
        skipped += not changed
    return acted, skipped


def parse_bulk(form: Any) -> tuple[str, str, str, list[int] | None]:
    """(action, kind, fingerprint, ids); ids None means the whole group (up to BULK)."""
    kind, fingerprint = _group_key(form)
    # A group's own action unless the form names one: failed tasks retry, retrying ones cancel.
    action = form.get("action") or ("retry" if kind == "failed" else "cancel")
    if action not in ACTIONS:
        raise ValidationError("action", f"must be one of {', '.join(ACTIONS)}")
    if form.get("one"):
        return action, kind, fingerprint, [check_task_id(_optional_int(str(form.get("one")), "one"))]
    if form.get("scope") == "group":
        return action, kind, fingerprint, None
    ids = [check_task_id(_optional_int(str(v), "ids")) for v in form.getlist("ids")][:BULK]
    if not ids:
        raise ValidationError("ids", "select at least one task")
    return action, kind, fingerprint, ids


async def bulk(request: Request) -> Response:
    dashboard = state(request)
    parsed = await dashboard.submitted(request, parse_bulk)
    if isinstance(parsed, Response):
        return parsed
    action, kind, fingerprint, ids = parsed
    if ids is None:
        ids = [row["id"] for row in await blocking(_members, dashboard, kind, fingerprint, None, BULK)]
    acted, skipped = await blocking(_apply, dashboard, action, ids)
    dashboard.changed()
    target = request.url_for("failure_group").include_query_params(
        kind=kind, fingerprint=fingerprint, acted=acted, skipped=skipped
    )
    return RedirectResponse(target, status_code=303)


routes = [
    Route("/failures", failures, name="failures"),
    Route("/failures/group", group, name="failure_group"),
    Route("/failures/bulk", bulk, methods=["POST"], name="failures_bulk"),
]
