"""Who may reach the dashboard and which requests may change anything.

* A bind address other than loopback needs basic-auth credentials
  (:func:`check_bind`), so a dashboard is never open to a network by accident.
* With credentials, every request (pages, actions, /metrics) needs them
  (:class:`BasicAuth`).
* A state-changing request is a POST that carries the app's CSRF token and,
  when the browser says where it comes from (Origin, else Referer), comes
  from this very origin (:func:`check_post`). A page of another site can
  neither read the token nor send a matching Origin.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import os
import secrets
from dataclasses import dataclass
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from ..errors import ValidationError

USER_ENV = "TASKQUEUE_DASHBOARD_USER"
PASSWORD_ENV = "TASKQUEUE_DASHBOARD_PASSWORD"
CSRF_HEADER = "x-csrf-token"
CSRF_FIELD = "csrf_token"


@dataclass(frozen=True)
class Credentials:
    user: str
    password: str

    def __repr__(self) -> str:  # never print the password
        return f"Credentials(user={self.user!r}, password=***)"


def credentials_from(user: str | None, password: str | None) -> Credentials | None:
    """Flags first, then TASKQUEUE_DASHBOARD_USER / _PASSWORD; both or neither."""
    user = user if user is not None else os.environ.get(USER_ENV)
    password = password if password is not None else os.environ.get(PASSWORD_ENV)
    if not user and not password:
        return None
    if not user or not password:
        raise ValidationError("credentials", f"give both a user and a password ({USER_ENV}, {PASSWORD_ENV})")
    if ":" in user:
        raise ValidationError("credentials", "the user name cannot contain ':' (basic auth splits on it)")
    return Credentials(user, password)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, credentials: Credentials | None) -> None:
    """Refuse to serve a non-loopback address without credentials."""
    if not is_loopback(host) and credentials is None:
        raise ValidationError(
            "host",
            f"binding {host!r} exposes the dashboard beyond this machine; give basic-auth credentials "
            f"(--user/--password or {USER_ENV}/{PASSWORD_ENV}) or bind 127.0.0.1",
        )


class BasicAuth:
    """ASGI middleware: every HTTP request needs the credentials (constant-time comparison)."""

    def __init__(self, app: ASGIApp, credentials: Credentials) -> None:
        self.app = app
        self.expected = f"{credentials.user}:{credentials.password}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self._allowed(Request(scope)):
            await self.app(scope, receive, send)
            return
        response = PlainTextResponse(
            "authentication required", status_code=401, headers={"WWW-Authenticate": 'Basic realm="taskqueue"'}
        )
        await response(scope, receive, send)

    def _allowed(self, request: Request) -> bool:
        scheme, _, value = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "basic":
            return False
        try:
            given = base64.b64decode(value.strip(), validate=True)
        except (binascii.Error, ValueError):
            return False
        return secrets.compare_digest(given, self.expected)


def new_token() -> str:
    return secrets.token_urlsafe(32)


def same_origin(request: Request) -> bool:
    """True unless the browser names an origin (Origin, else Referer) other than this one."""
    claimed = request.headers.get("origin")
    if claimed is None:
        claimed = request.headers.get("referer")
    if claimed is None:
        return True  # not a browser, or one that hides both: the token still decides
    if claimed == "null":
        return False  # an opaque origin (sandboxed frame, data: URL) is never ours
    parts = urlsplit(claimed)
    host = request.headers.get("host", "")
    return parts.scheme == request.url.scheme and parts.netloc.lower() == host.lower()


def check_post(request: Request, token: str, form_token: str | None) -> str | None:
    """Why this POST must be refused, or None when it may go ahead."""
    if not same_origin(request):
        return "cross-origin request refused"
    given = request.headers.get(CSRF_HEADER) or form_token or ""
    if not secrets.compare_digest(given.encode(), token.encode()):
        return "missing or wrong CSRF token"
    return None
