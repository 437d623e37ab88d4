"""Who may reach the dashboard, and which POSTs it accepts."""

from __future__ import annotations

import base64

import httpx
import pytest

from taskqueue import TaskQueue, ValidationError
from taskqueue.dashboard import create_app
from taskqueue.dashboard.security import Credentials, check_bind, credentials_from
from tests.support.dashboard import dashboard_client, post, serve
from tests.test_cli import assert_one_line_error, run_cli


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.10", "::", "example.com"])
def test_non_loopback_bind_without_credentials_is_refused(host: str) -> None:
    with pytest.raises(ValidationError, match="basic-auth credentials"):
        check_bind(host, None)
    check_bind(host, Credentials("ops", "secret"))


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "localhost"])
def test_loopback_bind_needs_no_credentials(host: str) -> None:
    check_bind(host, None)


def test_cli_refuses_a_public_bind_without_credentials_before_serving(dsn: str) -> None:
    result = run_cli("dashboard", "--host", "0.0.0.0", "--port", "1", dsn=dsn, timeout=60)
    assert_one_line_error(result, 2, "basic-auth credentials")
    half = run_cli("dashboard", "--host", "0.0.0.0", dsn=dsn, env={"TASKQUEUE_DASHBOARD_USER": "ops"})
    assert_one_line_error(half, 2, "give both a user and a password")


def test_credentials_come_from_flags_or_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TASKQUEUE_DASHBOARD_USER", raising=False)
    monkeypatch.delenv("TASKQUEUE_DASHBOARD_PASSWORD", raising=False)
    assert credentials_from(None, None) is None
    monkeypatch.setenv("TASKQUEUE_DASHBOARD_USER", "ops")
    monkeypatch.setenv("TASKQUEUE_DASHBOARD_PASSWORD", "pw")
    assert credentials_from(None, None) == Credentials("ops", "pw")
    assert credentials_from("admin", None) == Credentials("admin", "pw")
    assert "pw" not in repr(credentials_from(None, None))
    with pytest.raises(ValidationError, match="':'"):
        credentials_from("a:b", "c")


def test_basic_auth_guards_every_route(tq: TaskQueue) -> None:
    app = create_app(tq, credentials=Credentials("ops", "s3cret"))
    good = "Basic " + base64.b64encode(b"ops:s3cret").decode()
    bad = "Basic " + base64.b64encode(b"ops:wrong").decode()
    with serve(app) as base, httpx.Client(base_url=base) as client:
        for path in ("/", "/tasks", "/metrics", "/static/htmx.min.js"):
            anonymous = client.get(path)
            assert anonymous.status_code == 401 and anonymous.headers["www-authenticate"].startswith("Basic")
            assert client.get(path, headers={"Authorization": bad}).status_code == 401
            assert client.get(path, headers={"Authorization": "Basic !!"}).status_code == 401
            assert client.get(path, headers={"Authorization": good}).status_code == 200


def test_post_without_the_token_or_from_another_origin_is_refused(tq: TaskQueue) -> None:
    task_id = tq.enqueue({}, queue="q")
    with dashboard_client(tq) as client:
        no_token = post(client, f"/tasks/{task_id}/cancel", with_token=False)
        wrong_token = client.post(f"/tasks/{task_id}/cancel", data={"csrf_token": "guess"})
        other_origin = post(client, f"/tasks/{task_id}/cancel", origin="http://evil.example")
        opaque_origin = post(client, f"/tasks/{task_id}/cancel", origin="null")
        other_referer = client.post(f"/tasks/{task_id}/cancel", data={"csrf_token": client.dashboard.token},
                                    headers={"Referer": "http://evil.example/page"})
        responses = [no_token, wrong_token, other_origin, opaque_origin, other_referer]
        assert [r.status_code for r in responses] == [403] * 5
        assert "CSRF" in no_token.text and "cross-origin" in other_origin.text
        assert tq.get(task_id).state == "queued"
        # The token in the header, as htmx sends it, with no Origin (a script, not a browser).
        ok = client.post(f"/tasks/{task_id}/cancel", headers={"X-CSRF-Token": client.dashboard.token})
    assert ok.status_code == 303 and tq.get(task_id).state == "cancelled"


def test_a_get_never_changes_anything(tq: TaskQueue) -> None:
    task_id = tq.enqueue({}, queue="q")
    with dashboard_client(tq) as client:
        assert client.get(f"/tasks/{task_id}/cancel").status_code == 405
        assert client.get("/rescue").status_code == 405
    assert tq.get(task_id).state == "queued"


def test_pages_forbid_framing_and_foreign_scripts(tq: TaskQueue) -> None:
    with dashboard_client(tq) as client:
        headers = client.get("/").headers
    assert headers["x-frame-options"] == "DENY"
    assert "script-src 'self'" in headers["content-security-policy"]
    assert "frame-ancestors 'none'" in headers["content-security-policy"]
    assert headers["x-content-type-options"] == "nosniff"


def test_cli_without_the_dashboard_extra_says_what_to_install(dsn: str) -> None:
    import subprocess
    import sys

    # Starlette made unimportable, as on an install without the extra.
    program = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'starlette' or name.startswith('starlette.'):\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "from taskqueue.cli import main\n"
        "main(['dashboard', '--dsn', sys.argv[1]])\n"
    )
    result = subprocess.run([sys.executable, "-c", program, dsn], capture_output=True, text=True, timeout=60, check=False)
    assert_one_line_error(result, 1, "pip install 'taskqueue[dashboard]'")
