"""Helpers for the dashboard tests: a real uvicorn server on a free port, an httpx client, browser-like POSTs."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import uvicorn

from taskqueue import TaskQueue
from taskqueue.dashboard import create_app


@contextmanager
def serve(app: Any) -> Iterator[str]:
    """Serve an ASGI app with uvicorn on 127.0.0.1 and a free port, in a thread; yields its base URL."""
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", access_log=False)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="dashboard-test-server", daemon=True)
    thread.start()
    try:
        while not server.started:
            if not thread.is_alive():
                raise RuntimeError("the test server did not start")
            threading.Event().wait(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


@contextmanager
def dashboard_client(tq: TaskQueue, **options: Any) -> Iterator[httpx.Client]:
    """An httpx client on a served dashboard over ``tq``; nothing cached between reads by default."""
    options.setdefault("cache_seconds", 0.0)
    options.setdefault("check_seconds", 0.0)
    app = create_app(tq, **options)
    with serve(app) as base, httpx.Client(base_url=base, follow_redirects=False, timeout=30) as client:
        client.dashboard = app.state.dashboard  # type: ignore[attr-defined]
        yield client


def token(client: httpx.Client) -> str:
    return client.dashboard.token  # type: ignore[attr-defined,no-any-return]


def post(client: httpx.Client, path: str, data: dict[str, Any] | None = None, *, origin: str | None = "same",
         with_token: bool = True, follow: bool = False) -> httpx.Response:
    """A POST as the dashboard's own pages send it: same Origin, CSRF token in the form."""
    form = dict(data or {})
    if with_token:
        form["csrf_token"] = token(client)
    if origin == "same":
        origin = str(client.base_url).rstrip("/")
    headers = {"Origin": origin} if origin is not None else {}
    return client.post(path, data=form, headers=headers, follow_redirects=follow)


def text_of(html: str, element_id: str) -> str:
    """The text inside the element with this id (tags stripped, whitespace squeezed)."""
    match = re.search(rf'id="{re.escape(element_id)}"[^>]*>(.*?)</', html, re.DOTALL)
    assert match is not None, f"no element #{element_id}"
    return " ".join(re.sub(r"<[^>]+>", " ", match.group(1)).split())
