"""A throw-away PostgreSQL cluster for tests: initdb in a temporary folder, loopback only.

The cluster listens on 127.0.0.1 at a free port, with its Unix sockets in its
own folder, and runs as an unprivileged user: PostgreSQL refuses to run as
root, so a root test run creates (once) and uses the system user ``ioh-pg``.
Tests get a fresh database each (``postgres_url``); the cluster is stopped
and its folder removed when the session ends.

The binaries are the newest of ``/usr/lib/postgresql/*/bin`` (Debian's
``postgresql`` package, which ``make test`` installs), else ``initdb`` on PATH.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from io_harness._scratch import _alive

__all__ = [
    "PASSWORD_ROLE",
    "PostgresCluster",
    "postgres_binaries",
    "postgres_cluster",
    "postgres_url",
]

SERVICE_USER = "ioh-pg"
"""The system user a root test run starts PostgreSQL as."""

PASSWORD_ROLE = "ioh_password"
"""The one role the cluster asks a password of (every other connects without one), so a test
can see a refused password; create it with ``CREATE ROLE ... LOGIN PASSWORD ...``."""

_FAST = ("fsync=off", "synchronous_commit=off", "full_page_writes=off")
"""Settings that make a test cluster fast; a crash of the whole machine may lose its data."""


def postgres_binaries() -> Path:
    """The folder of the newest PostgreSQL server binaries here.

    Where PostgreSQL cannot run (neither Linux nor macOS) the test is skipped;
    on Linux or macOS a missing PostgreSQL fails the test, naming the fix.
    """
    if not sys.platform.startswith(("linux", "darwin")):
        pytest.skip(f"the PostgreSQL store's tests run on Linux and macOS, not {sys.platform}")
    found = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/initdb"),
        key=lambda p: _version(p.parent.parent.name),
    )
    if found:
        return found[-1].parent
    on_path = shutil.which("initdb")
    if on_path is not None:
        return Path(on_path).resolve().parent
    pytest.fail(
        "PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb, no initdb on PATH): "
        "`make test` installs Debian's postgresql package when it is missing; run it, or "
        "`apt-get install postgresql`",
        pytrace=False,
    )


def _version(name: str) -> tuple[int, ...]:
    return tuple(int(part) for part in name.split(".") if part.isdigit())


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _service_user() -> str | None:
    """The user to run PostgreSQL as: ``ioh-pg`` (created if missing) when we are root."""
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam(SERVICE_USER)
    except KeyError:
        subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin",
             SERVICE_USER],
            check=True,
            capture_output=True,
        )  # fmt: skip
    return SERVICE_USER


class PostgresCluster:
    """One running PostgreSQL server in a temporary folder; :meth:`url` names a database."""

    def __init__(self, binaries: Path, *, fast: bool = True) -> None:
        self.binaries = binaries
        self.user = _service_user()
        self._sweep_dead()
        self.folder = Path(tempfile.mkdtemp(prefix=f"ioh-pg-{os.getpid()}-"))
        self.data = self.folder / "data"
        self.sockets = self.folder / "sockets"
        self.log = self.folder / "server.log"
        self.port = _free_port()
        self._settings = _FAST if fast else ()
        self._numbers = itertools.count(1)
        self.sockets.mkdir()
        if self.user is not None:
            entry = pwd.getpwnam(self.user)
            for path in (self.folder, self.sockets):
                os.chown(path, entry.pw_uid, entry.pw_gid)
        self._run(
            "initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8",
            "--no-locale", "--no-sync",
        )  # fmt: skip
        hba = self.data / "pg_hba.conf"
        asking = f"host all {PASSWORD_ROLE} 127.0.0.1/32 scram-sha-256\n"
        hba.write_text(asking + hba.read_text())  # the first line that matches decides
        self.start()

    def _sweep_dead(self) -> None:
        """Stop and remove the clusters of test processes that died without stopping them
        (a SIGKILLed pytest): each folder is named by its process's pid."""
        for folder in Path(tempfile.gettempdir()).glob("ioh-pg-*-*"):
            pid = folder.name.split("-")[2]
            if not pid.isdigit() or _alive(int(pid)):
                continue
            if (folder / "data" / "postmaster.pid").exists():
                stop = [str(self.binaries / "pg_ctl"), "-D", str(folder / "data"), "-w"]
                stop += ["-m", "immediate", "stop"]
                if self.user is not None:
                    stop = ["runuser", "-u", self.user, "--", *stop]
                with contextlib.suppress(OSError, subprocess.TimeoutExpired):
                    subprocess.run(stop, capture_output=True, check=False, timeout=60)
            shutil.rmtree(folder, ignore_errors=True)

    def _run(self, program: str, *args: str) -> subprocess.CompletedProcess[str]:
        command = [str(self.binaries / program), *args]
        if self.user is not None:
            command = ["runuser", "-u", self.user, "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=120)
        if done.returncode != 0:
            log = self.log.read_text(errors="replace") if self.log.exists() else ""
            raise RuntimeError(f"{program} {' '.join(args)} failed: {done.stderr}{log[-2000:]}")
        return done

    def _options(self) -> str:
        settings = (
            "listen_addresses=127.0.0.1",
            f"port={self.port}",
            f"unix_socket_directories={self.sockets}",
            "max_connections=300",
            *self._settings,
        )
        return " ".join(f"-c {setting}" for setting in settings)

    def start(self) -> None:
        """Start the server and wait until it takes connections."""
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-o",
                  self._options(), "start")  # fmt: skip

    def restart(self) -> None:
        """Restart the server (every connection is cut) and wait until it takes connections."""
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-m", "fast",
                  "-o", self._options(), "restart")  # fmt: skip

    def stop(self) -> None:
        """Stop the server (fast: connections are cut), if it runs."""
        with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
            self._run("pg_ctl", "-D", str(self.data), "-w", "-m", "fast", "stop")

    def url(self, database: str = "postgres", user: str = "postgres") -> str:
        """The ``postgresql://`` URL of ``database`` on this server."""
        return f"postgresql://{user}@127.0.0.1:{self.port}/{database}"

    def create_database(self) -> str:
        """A new, empty database; its URL."""
        import psycopg

        name = f"test_{next(self._numbers)}"
        with psycopg.connect(self.url(), autocommit=True) as admin:
            admin.execute(f"CREATE DATABASE {name}")
        return self.url(name)

    def drop_database(self, url: str) -> None:
        """Drop the database of ``url``, cutting whatever is still connected to it."""
        import psycopg

        name = url.rsplit("/", 1)[1]
        with (
            contextlib.suppress(psycopg.Error),
            psycopg.connect(self.url(), autocommit=True) as admin,
        ):
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    def remove(self) -> None:
        """Stop the server and delete its folder."""
        self.stop()
        shutil.rmtree(self.folder, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[PostgresCluster]:
    """A PostgreSQL server for the whole session, stopped and removed at its end."""
    cluster = PostgresCluster(postgres_binaries())
    try:
        yield cluster
    finally:
        cluster.remove()


@pytest.fixture
def postgres_url(postgres_cluster: PostgresCluster) -> Iterator[str]:
    """The URL of a fresh database on the session's PostgreSQL server, dropped after the test."""
    url = postgres_cluster.create_database()
    yield url
    postgres_cluster.drop_database(url)
