"""The web dashboard: an ASGI app over one queue, servable alone or mounted in your own app.

``create_app(queue)`` returns a Starlette application; ``taskqueue dashboard``
serves it with uvicorn. Pages are rendered on the server (Jinja2, every value
escaped) and refreshed in place by the vendored htmx; there is no JavaScript
build. It needs the ``dashboard`` extra: ``pip install 'taskqueue[dashboard]'``.
"""

from __future__ import annotations

MISSING_EXTRA = (
    "the dashboard needs the 'dashboard' extra (starlette, jinja2, uvicorn, prometheus-client, python-multipart): "
    "pip install 'taskqueue[dashboard]'"
)

try:
    import jinja2  # noqa: F401
    import prometheus_client  # noqa: F401
    import python_multipart  # noqa: F401
    import starlette  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised by the CLI test with the import blocked
    raise ImportError(f"{MISSING_EXTRA} ({exc})") from exc

from .app import create_app  # noqa: E402 - after the check that names the missing extra

__all__ = ["MISSING_EXTRA", "create_app"]
