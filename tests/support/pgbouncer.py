"""A throwaway PgBouncer in transaction mode in front of the test server.

It listens on a free local TCP port and forwards to the server of a test DSN
(a host, or the embedded server's unix-socket directory). Tests skip when the
binary is missing, unless ``TASKQUEUE_REQUIRE_PGBOUNCER=1`` (CI), where they
fail instead.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from tests.support.polling import wait_for

CANDIDATES = ("pgbouncer", "/usr/sbin/pgbouncer", "/usr/bin/pgbouncer")


def pgbouncer_binary() -> str:
    """The pgbouncer executable; skip the test without one (fail when CI requires it)."""
    for name in CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    reason = "no pgbouncer binary (apt-get install pgbouncer)"
    if os.environ.get("TASKQUEUE_REQUIRE_PGBOUNCER") == "1":
        pytest.fail(f"{reason}, and TASKQUEUE_REQUIRE_PGBOUNCER=1")
    pytest.skip(reason)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ini(value: str) -> str:
    """A value for pgbouncer's connection string: quoted, with quotes and backslashes escaped."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


@contextlib.contextmanager
def pgbouncer(dsn: str, *, pool_size: int = 2) -> Iterator[str]:
    """Run pgbouncer (transaction pooling, ``pool_size`` server connections) in front of ``dsn``; yield its DSN."""
    binary = pgbouncer_binary()
    params = {k: str(v) for k, v in conninfo_to_dict(dsn).items() if v is not None}
    user = params.get("user", "postgres")
    dbname = params.get("dbname", user)
    target = {"dbname": dbname, "user": user, "host": params.get("host", "127.0.0.1")}
    for key in ("port", "password"):
        if key in params:
            target[key] = params[key]
    port = _free_port()
    root = Path(tempfile.mkdtemp(prefix="taskqueue-pgbouncer-"))
    try:
        os.chmod(root, 0o755)  # pgbouncer drops root to nobody, who must read its files
        (root / "users.txt").write_text(f'"{user}" ""\n')
        (root / "pgbouncer.ini").write_text(
            "[databases]\n"
            f"{dbname} = {' '.join(f'{k}={_ini(v)}' for k, v in target.items())}\n"
            "[pgbouncer]\n"
            "listen_addr = 127.0.0.1\n"
            f"listen_port = {port}\n"
            "unix_socket_dir =\n"
            "auth_type = trust\n"
            f"auth_file = {root / 'users.txt'}\n"
            "pool_mode = transaction\n"
            f"default_pool_size = {pool_size}\n"
            "max_client_conn = 200\n"
            f"logfile = {root / 'pgbouncer.log'}\n"
        )
        (root / "pgbouncer.log").touch()
        for path in root.iterdir():
            os.chmod(path, 0o666)
        argv = [binary, "-q"]
        if os.getuid() == 0:  # pgbouncer refuses to run as root
            argv += ["-u", _run_as(target["host"])]
        process = subprocess.Popen([*argv, str(root / "pgbouncer.ini")], stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT)
        url = make_conninfo("", host="127.0.0.1", port=port, dbname=dbname, user=user)
        try:
            if not wait_for(lambda: process.poll() is not None or _answers(url)):
                raise RuntimeError("pgbouncer did not answer")
            if process.poll() is not None:
                output = process.stdout.read().decode(errors="replace") if process.stdout else ""
                raise RuntimeError(f"pgbouncer exited {process.returncode}: {output}{_log(root)}")
            yield url
        finally:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:  # pragma: no cover - a stuck pgbouncer
                process.kill()
                process.wait()
            if process.stdout is not None:
                process.stdout.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _run_as(host: str) -> str:
    """Who pgbouncer runs as: the owner of a socket directory (the embedded server's is 0700), else nobody."""
    if host.startswith("/"):
        owner = os.stat(host).st_uid
        if owner != 0:
            return pwd.getpwuid(owner).pw_name
    return "nobody"


def _answers(url: str) -> bool:
    try:
        with psycopg.connect(url, connect_timeout=2, prepare_threshold=None) as conn:
            conn.execute("SELECT 1")
        return True
    except psycopg.Error:
        return False


def _log(root: Path) -> str:
    path = root / "pgbouncer.log"
    return "\n" + path.read_text(errors="replace")[-2000:] if path.exists() else ""
