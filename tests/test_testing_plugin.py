"""The pytest plugin as its users meet it: throw-away test modules run by pytester.

Each inner run is a pytest of its own in a subprocess, as a user's would be:
an in-process run would share (and, when it ends, unload) the modules this
session imported, and a fresh interpreter shows what the plugin imports. The
inner runs use this session's server (``TASKQUEUE_TEST_DSN`` is set to it),
so they start none of their own.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.support.plugin import plugin_args

pytest_plugins = ["pytester"]

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"
NOWHERE = "postgresql://nobody@127.0.0.1:1/nothing"  # connecting here fails at once


@pytest.fixture
def user(pytester: pytest.Pytester, taskqueue_dsn: str, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """A user's project whose tests run on this session's server."""
    monkeypatch.setenv("TASKQUEUE_TEST_DSN", taskqueue_dsn)
    return pytester


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(*plugin_args(), "-p", "no:cacheprovider", *args)


def test_each_test_gets_an_empty_migrated_queue_of_its_own(user: pytest.Pytester) -> None:
    user.makepyfile(
        """
        import pytest
        from taskqueue.testing import assert_enqueued

        DATABASES = set()

        @pytest.mark.parametrize("n", [1, 2, 3])
        def test_enqueue(tq, taskqueue_database, n):
            DATABASES.add(taskqueue_database)
            assert tq.tasks() == []
            tq.enqueue({"n": n}, queue="email")
            assert [t.payload for t in assert_enqueued(tq, queue="email")] == [{"n": n}]

        def test_three_databases():
            assert len(DATABASES) == 3
        """
    )
    result = run(user)
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(["taskqueue: 3 test database(s) on a PostgreSQL from TASKQUEUE_TEST_DSN"])


def test_enqueue_drain_and_assert_as_a_user_writes_it(user: pytest.Pytester) -> None:
    user.makepyfile(
        """
        import pytest
        from taskqueue import Permanent, Retry, Worker
        from taskqueue.testing import assert_enqueued, assert_not_enqueued, drain

        def signup(tq, email):
            tq.enqueue({"email": email}, queue="welcome")

        @pytest.fixture
        def worker(tq):
            worker = Worker()

            @worker.handler("welcome")
            def welcome(task):
                tq.enqueue({"to": task.payload["email"], "template": "welcome"}, queue="mail")
                return "queued mail"

            @worker.handler("mail")
            def mail(task):
                if task.payload["to"].endswith("@flaky.example") and task.attempts < 2:
                    raise Retry(0, "smtp busy")
                if task.payload["to"].endswith("@invalid.example"):
                    raise Permanent("no such domain")
                if task.payload["to"].endswith("@bug.example"):
                    raise KeyError("template")
                return {"sent": task.payload["to"]}

            return worker

        def test_signup_sends_a_welcome_mail(tq, worker):
            signup(tq, "ada@example.com")
            assert_enqueued(tq, queue="welcome", payload={"email": "ada@example.com"})
            result = drain(tq, worker)
            assert [t.queue for t in result.completed] == ["welcome", "mail"]
            assert result.completed[1].result == {"sent": "ada@example.com"}
            assert_not_enqueued(tq)

        def test_retries_and_failures_show_in_the_result(tq, worker):
            for email in ("b@flaky.example", "c@invalid.example", "d@bug.example"):
                signup(tq, email)
            result = drain(tq, worker)
            assert [(r.task.payload.get("to"), r.outcome) for r in result.runs if r.task.queue == "mail"] == [
                ("b@flaky.example", "retried"),
                ("b@flaky.example", "completed"),
                ("c@invalid.example", "failed"),
                ("d@bug.example", "retried"),
            ]
            assert [t.error for t in result.failed] == ["Permanent: no such domain"]
            assert result.retried[-1].error.startswith("KeyError: 'template'")
            assert_enqueued(tq, queue="mail", payload={"to": "d@bug.example"}, state="scheduled", count=1)
        """
    )
    run(user).assert_outcomes(passed=2)


def test_a_failed_assertion_lists_what_is_enqueued(user: pytest.Pytester) -> None:
    user.makepyfile(
        """
        from taskqueue.testing import assert_enqueued

        def test_wrong_address(tq):
            tq.enqueue({"to": "ada@example.com"}, queue="mail", priority=2)
            tq.enqueue({"report": 7}, queue="reports", delay=60)
            assert_enqueued(tq, queue="mail", payload={"to": "bob@example.com"})
        """
    )
    result = run(user)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            '>       assert_enqueued(tq, queue="mail", payload={"to": "bob@example.com"})',  # the test's own line
            "E       AssertionError: no task enqueued with queue='mail', payload containing "
            '{"to": "bob@example.com"}, state queued or scheduled',
            "E       the queue holds, queued or scheduled:",
            "E         task *: queue='mail' state=queued priority=2 required=0 payload={\"to\": \"ada@example.com\"}",
            "E         task *: queue='reports' state=scheduled priority=0 required=0 payload={\"report\": 7}",
        ]
    )


def test_the_schema_comes_from_the_ini_file(user: pytest.Pytester) -> None:
    user.makeini("[pytest]\ntaskqueue_schema = jobs\n")
    user.makepyfile(
        """
        def test_schema(tq):
            assert tq.schema == "jobs"
            tq.enqueue(1)
            assert len(tq.tasks()) == 1
        """
    )
    run(user).assert_outcomes(passed=1)


def test_a_users_own_tq_fixture_wins(user: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TASKQUEUE_TEST_DSN", NOWHERE)  # the plugin's server would fail to start
    user.makeconftest(
        """
        import pytest

        @pytest.fixture
        def tq():
            return "mine"
        """
    )
    user.makepyfile("def test_mine(tq):\n    assert tq == 'mine'\n")
    result = run(user)
    result.assert_outcomes(passed=1)
    assert "taskqueue:" not in result.stdout.str()


ASYNC_TESTS = """
import pytest
from taskqueue import Worker
from taskqueue.testing import aassert_enqueued, aassert_not_enqueued, adrain

{mark}

@pytest.fixture
def worker(async_tq):
    worker = Worker()

    @worker.handler("welcome")
    async def welcome(task):
        await async_tq.enqueue({{"to": task.payload["email"]}}, queue="mail")

    @worker.handler("mail")
    async def mail(task):
        if task.payload["to"].endswith("@invalid.example"):
            raise ValueError("no such domain")
        return {{"sent": task.payload["to"]}}

    return worker

@pytest.mark.parametrize("email", ["ada@example.com", "bob@invalid.example"])
async def test_signup(async_tq, worker, email):
    assert await async_tq.tasks() == []  # a queue of its own
    await async_tq.enqueue({{"email": email}}, queue="welcome")
    await aassert_enqueued(async_tq, queue="welcome", payload={{"email": email}}, count=1)
    result = await adrain(async_tq, worker)
    if email.endswith("@invalid.example"):
        assert [t.error.splitlines()[0] for t in result.retried] == ["ValueError: no such domain"]
        await aassert_enqueued(async_tq, queue="mail", state="scheduled")
    else:
        assert [t.result for t in result.completed] == [None, {{"sent": email}}]
        await aassert_not_enqueued(async_tq)
    with pytest.raises(AssertionError, match="no task enqueued with queue='sms'"):
        await aassert_enqueued(async_tq, queue="sms")
"""


def test_async_tq_adrain_and_async_assertions_under_anyio(user: pytest.Pytester) -> None:
    pytest.importorskip("anyio")
    # As FastAPI's docs write it: the mark, and the asyncio backend.
    mark = 'pytestmark = pytest.mark.anyio\n\n@pytest.fixture\ndef anyio_backend():\n    return "asyncio"'
    user.makepyfile(ASYNC_TESTS.format(mark=mark))
    run(user).assert_outcomes(passed=2)


def test_async_tq_skips_under_trio_with_the_reason(user: pytest.Pytester) -> None:
    pytest.importorskip("trio")
    user.makepyfile(
        """
        import pytest

        @pytest.mark.anyio
        @pytest.mark.parametrize("anyio_backend", ["trio"])
        async def test_on_trio(async_tq, anyio_backend):
            pass
        """
    )
    result = run(user, "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*async_tq needs asyncio*"])


def test_async_tq_under_pytest_asyncio_in_auto_mode(user: pytest.Pytester) -> None:
    pytest.importorskip("pytest_asyncio")
    user.makeini("[pytest]\nasyncio_mode = auto\nasyncio_default_fixture_loop_scope = function\n")
    user.makepyfile(ASYNC_TESTS.format(mark=""))
    run(user, "-p", "no:anyio").assert_outcomes(passed=2)


REPORT_CONFTEST = """
import json, sys
from pathlib import Path

def pytest_sessionfinish(session):
    from taskqueue.testing.plugin import STATE
    state = session.config.stash.get(STATE, None)
    Path("report.json").write_text(json.dumps({
        "plugin": session.config.pluginmanager.has_plugin("taskqueue")
                  or session.config.pluginmanager.has_plugin("taskqueue.testing.plugin"),
        "server": None if state is None or state.server is None else state.server.kind,
        "heavy": sorted(m for m in ("sqlalchemy", "psycopg", "testcontainers", "docker", "pgserver")
                        if m in sys.modules),
    }))
"""


def test_a_session_that_does_not_use_the_plugin_starts_and_imports_nothing(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TASKQUEUE_TEST_DSN", NOWHERE)
    pytester.makeconftest(REPORT_CONFTEST)
    pytester.makepyfile("def test_plain():\n    assert 1 + 1 == 2\n")
    result = run(pytester)
    result.assert_outcomes(passed=1)
    report = json.loads((pytester.path / "report.json").read_text())
    assert report == {"plugin": True, "server": None, "heavy": []}
    assert "taskqueue:" not in result.stdout.str()


def _entry_point_site(root: Path) -> Path:
    """A site directory whose only distribution declares pyproject.toml's pytest11 entry points."""
    tomllib = pytest.importorskip("tomllib")
    declared = tomllib.loads(PYPROJECT.read_text())["project"]["entry-points"]["pytest11"]
    info = root / "site" / "taskqueue_plugin_probe-0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: taskqueue-plugin-probe\nVersion: 0\n")
    lines = "".join(f"{name} = {target}\n" for name, target in declared.items())
    (info / "entry_points.txt").write_text(f"[pytest11]\n{lines}")
    return root / "site"


def test_the_entry_point_loads_the_plugin_and_p_no_taskqueue_disables_it(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = _entry_point_site(pytester.path)
    paths = [str(site), *(p for p in sys.path if p and Path(p).joinpath("taskqueue").is_dir())]
    monkeypatch.setenv("PYTHONPATH", ":".join(paths))
    monkeypatch.setenv("TASKQUEUE_TEST_DSN", NOWHERE)
    pytester.makeconftest(REPORT_CONFTEST)
    pytester.makepyfile(
        """
        def test_registered(request):
            assert request.config.pluginmanager.get_plugin("taskqueue") is not None

        def test_wants_tq(tq):
            pass
        """
    )
    on = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-k", "registered")
    on.assert_outcomes(passed=1)
    assert json.loads((pytester.path / "report.json").read_text())["server"] is None

    off = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:taskqueue", "-k", "wants_tq")
    off.assert_outcomes(errors=1)
    off.stdout.fnmatch_lines(["*fixture 'tq' not found*"])
    assert json.loads((pytester.path / "report.json").read_text())["plugin"] is False
