"""The embedded PostgreSQL used when no DSN is given (the binaries of the ``pgserver`` wheel).

Its data lives in a per-user directory (``$TASKQUEUE_HOME`` overrides it), so
tasks survive restarts, and a server that is already running is reused.

We run the wheel's ``initdb`` and ``pg_ctl`` ourselves instead of pgserver's
Python wrapper. The wrapper kept a JSON list of client pids in the data
directory and rewrote it from an ``atexit`` callback: a Ctrl-C or SIGKILL at
the wrong moment left it empty or stale, and from then on no command could
start the server. Here nothing is written per client. The only state is what
PostgreSQL itself keeps (``postmaster.pid``, checked against a live process),
and every start or stop holds an ``flock`` on a lock file next to the data
directory, which the kernel releases however its holder ends. ``initdb`` runs
in a scratch directory that is renamed into place only when it succeeded, so
an interrupted first start leaves nothing half made. The server runs in its
own session, so a Ctrl-C in the terminal never reaches it; it keeps running
for the next command until ``taskqueue embedded stop``.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import shlex
import shutil
import stat
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import TaskQueueError

log = logging.getLogger("taskqueue.embedded")

#: PostgreSQL refuses to run as root; as root we run it as this user (pgserver's choice, so old data dirs fit).
SYSTEM_USER = "pgserver"
LOCK_WAIT_SECONDS = 120.0
START_TIMEOUT_SECONDS = 60
#: A postmaster.pid with no pid in it this old is a torn leftover, not a server writing it.
TORN_FILE_GRACE_SECONDS = 10.0
#: A unix socket path must fit in sun_path (108 bytes on Linux, 104 on macOS).
MAX_SOCKET_PATH = 100


def home_dir() -> Path:
    """Where the embedded server's data lives: ``$TASKQUEUE_HOME``, else the XDG data dir."""
    override = os.environ.get("TASKQUEUE_HOME")
    if override:
        return Path(override).expanduser()
    xdg = os.environ.get("XDG_DATA_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".local" / "share"
    return base / "taskqueue"


def bin_dir() -> Path:
    """The PostgreSQL binaries shipped in the pgserver wheel (found without importing it)."""
    spec = importlib.util.find_spec("pgserver")
    if spec is None or not spec.submodule_search_locations:
        raise TaskQueueError("no DSN given and the embedded PostgreSQL (pgserver) is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"


@dataclass(frozen=True)
class EmbeddedStatus:
    """What ``taskqueue embedded status`` shows."""

    data_dir: Path
    initialised: bool
    running: bool
    state: str  # ready, starting, stopping, stopped or not created
    pid: int | None
    dsn: str | None
    log_file: Path


@dataclass(frozen=True)
class _Postmaster:
    """The lines of ``postmaster.pid`` we use."""

    pid: int | None
    port: int
    socket_dir: str
    status: str  # starting, ready, stopping (PostgreSQL's words)

    def uri(self) -> str:
        return f"postgresql://postgres@/postgres?host={self.socket_dir}&port={self.port}"


class EmbeddedServer:
    """One data directory, with the server that serves it started and stopped on demand."""

    def __init__(self, data_dir: Path | str | None = None) -> None:
        self.data_dir = Path(data_dir or home_dir() / "pgdata").expanduser().resolve()
        self.lock_file = self.data_dir.with_name(self.data_dir.name + ".lock")
        self.log_file = self.data_dir / "log"
        self._lock_fd: int | None = None

    # -- public -------------------------------------------------------------
    def start(self) -> str:
        """Start the server unless it is running; return its libpq URI."""
        with self._locked():
            self._init_if_needed()
            started = False
            deadline = time.monotonic() + START_TIMEOUT_SECONDS
            while True:
                # A server another client left starting or stopping (it was killed midway) is
                # waited for: until it is ready, or gone and started again.
                running = self._postmaster()
                if running is not None and running.status == "ready":
                    break
                if running is None and not started:
                    self._pg_ctl_start()
                    started = True
                    continue
                if time.monotonic() > deadline:
                    raise TaskQueueError(f"the embedded PostgreSQL in {self.data_dir} did not become ready: "
                                         f"{self._log_tail()}")
                time.sleep(0.05)
        log.debug("embedded PostgreSQL at %s (pid %s)", self.data_dir, running.pid)
        return running.uri()

    def stop(self) -> bool:
        """Stop the server (fast shutdown: sessions are ended); False when it was not running."""
        with self._locked():
            running = self._postmaster()
            if running is None:
                return False
            result = self._run(["pg_ctl", "stop", "-D", str(self.data_dir), "-m", "fast", "-w", "-t", "60"])
            if result.returncode != 0 and self._postmaster() is not None:
                raise TaskQueueError(f"could not stop the embedded PostgreSQL (pid {running.pid}): "
                                     f"{_last_line(result.stderr)}")
            return True

    def status(self) -> EmbeddedStatus:
        running = self._postmaster()
        initialised = (self.data_dir / "PG_VERSION").exists()
        return EmbeddedStatus(
            data_dir=self.data_dir,
            initialised=initialised,
            running=running is not None,
            state=running.status if running is not None else "stopped" if initialised else "not created",
            pid=None if running is None else running.pid,
            dsn=None if running is None or running.status != "ready" else running.uri(),
            log_file=self.log_file,
        )

    # -- the lock -----------------------------------------------------------
    @contextmanager
    def _locked(self) -> Iterator[None]:
        import fcntl  # POSIX only, like the embedded server; imported here so the CLI loads anywhere

        self.data_dir.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.lock_file, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            deadline = time.monotonic() + LOCK_WAIT_SECONDS
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise TaskQueueError(
                            f"another process has been starting or stopping the embedded PostgreSQL for "
                            f"{LOCK_WAIT_SECONDS:.0f} s ({self.lock_file})"
                        ) from None
                    time.sleep(0.05)
            self._lock_fd = fd
            yield
        finally:
            self._lock_fd = None
            os.close(fd)  # closing releases the flock; so does the process ending in any way

    # -- state --------------------------------------------------------------
    def _postmaster(self) -> _Postmaster | None:
        """The server serving this directory, or None; a stale ``postmaster.pid`` counts as none.

        A server that is starting writes the file in steps (the status line comes
        last), so a short file of a live server means "starting", never "stale".
        """
        path = self.data_dir / "postmaster.pid"
        try:
            lines = path.read_text().splitlines()
            age = time.time() - path.stat().st_mtime
        except (FileNotFoundError, NotADirectoryError):
            return None
        try:
            pid = int(lines[0])
        except (IndexError, ValueError):
            # Not even the pid yet: a server writing it right now, or a torn file from long ago.
            return _Postmaster(None, 0, "", "starting") if age < TORN_FILE_GRACE_SECONDS else None
        if not _is_postgres(pid):
            return None
        port = int(lines[3]) if len(lines) > 3 and lines[3].strip().isdigit() else 0
        socket_dir = lines[4].strip() if len(lines) > 4 else ""
        status = lines[7].strip() if len(lines) > 7 and lines[7].strip() else "starting"
        return _Postmaster(pid, port, socket_dir, status)

    def _init_if_needed(self) -> None:
        for scratch in self.data_dir.parent.glob(f".{self.data_dir.name}.init-*"):
            shutil.rmtree(scratch, ignore_errors=True)  # an interrupted initdb's leftovers
        if (self.data_dir / "PG_VERSION").exists():
            return
        if self.data_dir.exists():
            if any(self.data_dir.iterdir()):
                raise TaskQueueError(
                    f"{self.data_dir} is not empty and holds no PostgreSQL data directory; move it away"
                )
            self.data_dir.rmdir()
        scratch = Path(tempfile.mkdtemp(prefix=f".{self.data_dir.name}.init-", dir=self.data_dir.parent))
        self._give_to_system_user(scratch)
        # initdb inherits the lock: if we are killed, the next client waits for it to end
        # instead of deleting the directory under it.
        result = self._run([
            "initdb", "-D", str(scratch), "--auth=trust", "--auth-local=trust", "--encoding=utf8", "-U", "postgres",
        ], keep_lock=True)
        if result.returncode != 0:
            shutil.rmtree(scratch, ignore_errors=True)
            raise TaskQueueError(f"initdb failed in {self.data_dir.parent}: {_last_line(result.stderr)}")
        os.rename(scratch, self.data_dir)

    def _pg_ctl_start(self) -> None:
        self._remove_stale_locks()
        socket_dir = self._socket_dir()
        options = f"-c listen_addresses='' -k {shlex.quote(str(socket_dir))}"
        result = self._run(["pg_ctl", "start", "-D", str(self.data_dir), "-l", str(self.log_file),
                            "-o", options, "-w", "-t", str(START_TIMEOUT_SECONDS)])
        if result.returncode != 0 and self._postmaster() is None:
            why = self._log_tail() or _last_line(result.stderr)
            raise TaskQueueError(f"could not start the embedded PostgreSQL in {self.data_dir}: {why}")

    def _remove_stale_locks(self) -> None:
        """Remove the lock files of a server that is gone (``_postmaster()`` found no live one).

        PostgreSQL removes them itself unless the pid in them still exists: a killed server
        that no one reaped (a zombie, common in containers) would block every start.
        """
        pid_file = self.data_dir / "postmaster.pid"
        try:
            lines = pid_file.read_text().splitlines()
        except OSError:
            return
        if len(lines) >= 5 and lines[3].strip().isdigit() and lines[4].strip():
            socket_lock = Path(lines[4].strip()) / f".s.PGSQL.{lines[3].strip()}.lock"
            try:
                holder = int(socket_lock.read_text().splitlines()[0])
            except (OSError, ValueError, IndexError):
                holder = None
            if holder is not None and not _is_postgres(holder):
                socket_lock.unlink(missing_ok=True)
        pid_file.unlink(missing_ok=True)

    def _socket_dir(self) -> Path:
        if len(str(self.data_dir / ".s.PGSQL.5432")) <= MAX_SOCKET_PATH:
            return self.data_dir
        digest = hashlib.sha256(str(self.data_dir).encode()).hexdigest()[:12]
        short = Path(tempfile.gettempdir()) / f"taskqueue-{digest}"
        short.mkdir(mode=0o700, exist_ok=True)
        self._give_to_system_user(short)
        return short

    def _log_tail(self) -> str:
        """The server log's last FATAL or PANIC line (else its last line): why it did not start."""
        try:
            lines = self.log_file.read_text(errors="replace").splitlines()[-30:]
        except OSError:
            return ""
        fatal = [line for line in lines if "FATAL:" in line or "PANIC:" in line]
        return (fatal[-1] if fatal else _last_line("\n".join(lines))).strip()

    # -- running the binaries ------------------------------------------------
    def _run(self, argv: list[str], *, keep_lock: bool = False) -> subprocess.CompletedProcess[str]:
        """Run one of the bundled binaries, as the system user when we are root, in its own session.

        Its own session: a Ctrl-C in the terminal reaches neither it nor the server it starts.
        ``keep_lock``: the child holds our lock until it ends (never for ``pg_ctl start``,
        whose server would then hold it for good).
        """
        command = [str(bin_dir() / argv[0]), *argv[1:]]
        extra: dict[str, Any] = {}
        if keep_lock and self._lock_fd is not None:
            extra["pass_fds"] = (self._lock_fd,)
        user = self._system_user()
        if user is not None:
            extra.update(user=user[0], group=user[1], extra_groups=[])
            _let_others_traverse(self.data_dir.parent)  # a parent's mode may have changed since
        try:
            return subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                  start_new_session=True, check=False, cwd=self.data_dir.parent, **extra)
        except OSError as exc:
            raise TaskQueueError(f"cannot run {command[0]}: {exc}") from None

    @staticmethod
    def _system_user() -> tuple[int, int] | None:
        if os.geteuid() != 0:
            return None
        import pwd

        try:
            entry = pwd.getpwnam(SYSTEM_USER)
        except KeyError:
            subprocess.run(["useradd", "--system", "--no-create-home", "-s", "/usr/sbin/nologin", SYSTEM_USER],
                           check=True, capture_output=True)
            entry = pwd.getpwnam(SYSTEM_USER)
        _let_others_run(bin_dir().parent)
        return entry.pw_uid, entry.pw_gid

    def _give_to_system_user(self, path: Path) -> None:
        user = self._system_user()
        if user is None:
            return
        os.chown(path, *user)
        _let_others_traverse(path.parent)


def _let_others_traverse(path: Path) -> None:
    """As root: let the system user reach ``path`` (o+x on it and every parent)."""
    for part in (path, *path.parents):
        mode = part.stat().st_mode
        if not mode & stat.S_IXOTH:
            part.chmod(mode | stat.S_IXOTH | stat.S_IXGRP)


def _let_others_run(install: Path) -> None:
    """As root: the bundled binaries and libraries must be readable and runnable by the system user."""
    # The path first, every time: a wheel's files may be runnable by all while
    # a parent (a 0700 home directory holding the virtualenv) still shuts them out.
    _let_others_traverse(install)
    marker = install / "bin" / "postgres"
    if marker.stat().st_mode & stat.S_IXOTH:
        return
    for root, dirs, files in os.walk(install):
        for name in dirs:
            p = Path(root, name)
            p.chmod(p.stat().st_mode | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
        for name in files:
            p = Path(root, name)
            mode = p.stat().st_mode
            extra = stat.S_IXGRP | stat.S_IXOTH if mode & stat.S_IXUSR else 0
            p.chmod(mode | stat.S_IRGRP | stat.S_IROTH | extra)


def _is_postgres(pid: int) -> bool:
    """Is ``pid`` a live PostgreSQL server process (not a reused pid of something else)?"""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    proc_stat = Path(f"/proc/{pid}/stat")
    if proc_stat.parent.parent.joinpath("self").exists():
        try:
            text = proc_stat.read_text()
        except OSError:
            return False
        # "pid (comm) state ...": a zombie (killed, not yet reaped) serves nothing.
        name, _, rest = text.partition("(")[2].rpartition(")")
        return name.startswith("postgres") and rest.split()[:1] not in (["Z"], ["X"])
    import psutil  # type: ignore[import-untyped]  # not Linux: ask psutil, which pgserver brings

    try:
        process_name: str = psutil.Process(pid).name()
    except psutil.Error:
        return False
    return process_name.startswith("postgres")


def _last_line(text: str) -> str:
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return lines[-1] if lines else ""


def embedded_dsn(data_dir: Path | None = None) -> str:
    """Start (or reuse) the embedded server and return its libpq URI."""
    return EmbeddedServer(data_dir).start()
