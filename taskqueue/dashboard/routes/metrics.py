"""``/metrics``: the Prometheus exposition of the queue-wide gauges and this process's counters."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ...metrics import exposition
from ..context import blocking, state


async def metrics(request: Request) -> Response:
    body, content_type = await blocking(exposition, state(request).registry)
    return Response(body, media_type=content_type)


routes = [Route("/metrics", metrics, name="metrics")]
