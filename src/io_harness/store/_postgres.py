"""The PostgreSQL store: psycopg 3 with a connection pool, one transaction per step.

It runs the SQL the SQLite store runs (``_sql_store`` and the ``*_sql``
helpers) through :class:`_Connection`, which turns their ``?`` placeholders
into psycopg's. A run's single driver is enforced in the database, by a
lease with a fencing generation (``_pg_lease``). This module is imported only
when a ``postgresql://`` store is opened, so ``import io_harness`` never loads
psycopg.
"""

from __future__ import annotations

import contextlib
import functools
import select
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Literal

import psycopg
from psycopg_pool import ConnectionPool

from io_harness._urls import redacted, without_password
from io_harness.errors import StorageError
from io_harness.store._pg_lease import LEASES_TABLE, PostgresLeases
from io_harness.store._schema import SCHEMA_VERSION, newer_format, postgres_migration
from io_harness.store._sql import SqlConnection
from io_harness.store._sql_store import Dialect, SqlStore

__all__ = ["PostgresStore"]

POSTGRES = Dialect(
    has_label="(runs.labels::jsonb ->> ?) = ?",
    json_integer="({column}::jsonb ->> '{key}')::bigint",
)

_FORMAT_TABLE = """
-- The store's format: the number of MIGRATIONS applied (SQLite keeps it in user_version).
CREATE TABLE store_format (version BIGINT NOT NULL);
INSERT INTO store_format VALUES (0);
"""

_MIGRATION_LOCK = 0x10_4A_52_4E_55_53
"""The advisory lock two processes opening one new database take turns on to migrate it."""

_NUL_STANDS_IN = "\u2400"
"""What a NUL character of stored text becomes: PostgreSQL's text cannot hold NUL."""


class PostgresStore(SqlStore):
    """A store in a PostgreSQL database. See :meth:`Store.open`.

    ``connections`` caps the pool (one connection is opened at first; the
    lease heartbeat uses one while it renews).
    """

    dialect = POSTGRES
    url: str
    """The URL the store was opened with, password included: connect with it, never show
    it (:attr:`location` is the URL without its password)."""

    def __init__(
        self,
        url: str,
        *,
        durability: Literal["full", "normal"] = "full",
        lease_seconds: float = 30.0,
        heartbeat_seconds: float | None = None,
        connections: int = 4,
    ) -> None:
        if lease_seconds <= 0 or (heartbeat_seconds is not None and heartbeat_seconds <= 0):
            raise StorageError("a lease's seconds and its heartbeat's must be more than 0")
        heartbeat = heartbeat_seconds if heartbeat_seconds is not None else lease_seconds / 3
        self.url = url
        self.location = without_password(url)
        self.durability = durability
        self._migrate(url)
        self._wait_ms = max(int(lease_seconds * 1000), 1000)
        self._pool: ConnectionPool[psycopg.Connection[Any]] = ConnectionPool(
            url,
            kwargs={
                "autocommit": True,
                "application_name": "io-harness",
                # A server that went silent (a partition) is noticed within about a lease.
                "keepalives": 1,
                "keepalives_idle": max(int(lease_seconds / 3), 1),
                "keepalives_interval": max(int(lease_seconds / 9), 1),
                "keepalives_count": 3,
            },
            min_size=1,
            max_size=max(connections, 2),
            open=False,
            configure=self._configure,
            check=_check_if_closed,
            timeout=max(lease_seconds, 1.0),
            name="io-harness store",
            num_workers=1,
        )
        self._pool.open()
        self._leases = PostgresLeases(
            self._pool,
            functools.partial(self._lease_session, url, lease_seconds),
            seconds=lease_seconds,
            heartbeat=heartbeat,
        )

    @staticmethod
    def _lease_session(url: str, lease_seconds: float) -> psycopg.Connection[Any]:
        """The lease holder's own session (``_pg_session``): it only ever holds advisory
        locks, so it must never be ended for being idle."""
        conn = psycopg.connect(
            url,
            autocommit=True,
            connect_timeout=max(int(lease_seconds), 2),
            application_name="io-harness lease",
            keepalives=1,
            keepalives_idle=max(int(lease_seconds / 3), 1),
            keepalives_interval=max(int(lease_seconds / 9), 1),
            keepalives_count=3,
        )
        with contextlib.suppress(psycopg.Error):  # idle_session_timeout is PostgreSQL 14+
            conn.execute("SET idle_session_timeout = 0")
        return conn

    def _configure(self, conn: psycopg.Connection[Any]) -> None:
        # A writer stopped or cut off inside a transaction holds its locks: the server
        # ends such a session after a lease's time, and nobody waits on a lock longer.
        # A wait that ends so is a StorageError; a worker tries the run again later.
        conn.execute(f"SET lock_timeout = {self._wait_ms}")
        conn.execute(f"SET idle_in_transaction_session_timeout = {self._wait_ms}")
        if self.durability == "normal":
            conn.execute("SET synchronous_commit = off")

    def _migrate(self, url: str) -> None:
        try:
            with (
                psycopg.connect(url, connect_timeout=10, application_name="io-harness") as conn,
                conn.transaction(),
            ):
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
                version = self._version(conn)
                for number in range(version, SCHEMA_VERSION):
                    conn.execute(postgres_migration(number).encode())
                if version < SCHEMA_VERSION:
                    conn.execute("UPDATE store_format SET version = %s", (SCHEMA_VERSION,))
        except psycopg.Error as exc:
            said = self._said(exc)
            raise StorageError(f"cannot open the store {self.location}: {said}") from None

    def _version(self, conn: psycopg.Connection[Any]) -> int:
        """The store's format; a new store's tables when the database has none."""
        row = conn.execute("SELECT to_regclass('store_format') IS NOT NULL").fetchone()
        if row is None or not row[0]:
            tables = conn.execute(
                "SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()"
            ).fetchone()
            if tables is not None and tables[0]:
                raise StorageError(
                    f"{self.location} is a PostgreSQL database but not an io-harness store "
                    "(it has tables and no store_format); give an empty database"
                )
            conn.execute((_FORMAT_TABLE + LEASES_TABLE).encode())
        found = conn.execute("SELECT version FROM store_format").fetchone()
        version = int(found[0]) if found is not None else 0
        if version > SCHEMA_VERSION:
            raise newer_format(self.location, version)
        return version

    # -- connections ---------------------------------------------------------------

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[SqlConnection]:
        # In pipeline mode a write is sent without waiting for its answer: a step's dozen
        # statements cost the round trips of the few whose results are read, and the
        # transaction's end waits for all of them (an error raises there, and rolls back).
        try:
            with self._pool.connection() as conn, conn.pipeline() as pipeline, conn.transaction():
                yield _Connection(conn, pipeline)
        except psycopg.Error as exc:
            raise StorageError(f"cannot write to {self.location}: {self._said(exc)}") from None
        except UnicodeEncodeError as exc:
            raise StorageError(f"cannot write to {self.location}: {exc}") from None

    @contextlib.contextmanager
    def _reading(self) -> Iterator[SqlConnection]:
        try:
            with self._pool.connection() as conn:
                yield _Connection(conn)
        except psycopg.Error as exc:
            raise StorageError(f"cannot read {self.location}: {self._said(exc)}") from None

    def close(self) -> None:
        """Stop the lease heartbeat and close the pool; the store cannot be used afterwards."""
        self._leases.close()
        self._pool.close()

    def __repr__(self) -> str:
        return f"Store.open({self.location!r})"

    def _said(self, exc: BaseException) -> str:
        """What a driver's error says, on one line and without the URL's credentials: libpq
        quotes the piece of a URL it cannot parse, password and all."""
        return " ".join(redacted(str(exc), self.url).split()) or type(exc).__name__

    # -- leases ------------------------------------------------------------------

    def lease(self, run_id: str) -> contextlib.AbstractContextManager[None]:
        return self._held(run_id)

    @contextlib.contextmanager
    def _held(self, run_id: str) -> Iterator[None]:
        with contextlib.ExitStack() as holding:
            try:
                holding.enter_context(self._leases.hold(run_id))
            except psycopg.Error as exc:
                raise StorageError(
                    f"cannot take the lease on run {run_id!r} in {self.location}: {self._said(exc)}"
                ) from None
            yield

    def driven(self, run_id: str) -> bool:
        try:
            return self._leases.held(run_id)
        except psycopg.Error as exc:
            raise StorageError(f"cannot read {self.location}: {self._said(exc)}") from None

    def _fence(
        self,
        db: SqlConnection,
        run_id: str,
        *,
        root_id: str | None = None,
        unleased_ok: bool = False,
    ) -> None:
        self._leases.fence(db, run_id, root_id=root_id, unleased_ok=unleased_ok)


class _Connection:
    """A pooled psycopg connection that runs the shared SQL (``?`` placeholders)."""

    def __init__(self, conn: psycopg.Connection[Any], pipeline: psycopg.Pipeline | None = None):
        self._conn = conn
        self._pipeline = pipeline

    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> _Result:
        cursor = self._conn.execute(_placeholders(sql), _storable(parameters))
        return _Result(cursor, self._pipeline)

    def executemany(self, sql: str, parameters: Iterable[Sequence[Any]], /) -> None:
        rows = [_storable(row) for row in parameters]
        if rows:
            with self._conn.cursor() as cursor:
                cursor.executemany(_placeholders(sql), rows)


class _Result:
    """A statement's result; in pipeline mode its row count waits for the server's answer
    (its rows do by themselves)."""

    def __init__(self, cursor: psycopg.Cursor[Any], pipeline: psycopg.Pipeline | None) -> None:
        self._cursor = cursor
        self._pipeline = pipeline

    @property
    def rowcount(self) -> int:
        """How many rows the statement changed."""
        if self._pipeline is not None:
            self._pipeline.sync()
        return self._cursor.rowcount

    def fetchone(self) -> Any:
        """The next row, or ``None``."""
        return self._cursor.fetchone()

    def fetchall(self) -> list[Any]:
        """The remaining rows."""
        return self._cursor.fetchall()


def _check_if_closed(conn: psycopg.Connection[Any]) -> None:
    """Let the pool hand out ``conn`` unless its server has closed it (a restart, say).

    An idle connection has nothing to read; one the server closed has its
    goodbye (or an end of file) waiting, and only that one pays the round trip
    of the pool's own check, which discards it.
    """
    try:
        waiting, _, _ = select.select([conn.fileno()], [], [], 0)
    except (OSError, ValueError, psycopg.Error):
        waiting = [True]
    if waiting:
        ConnectionPool.check_connection(conn)


@functools.lru_cache(maxsize=512)
def _placeholders(sql: str) -> bytes:
    """The statement with psycopg's placeholders: the shared SQL has no ``%`` nor ``?``
    operator of its own."""
    return sql.replace("%", "%%").replace("?", "%s").encode()


def _storable(parameters: Sequence[Any]) -> Sequence[Any]:
    if any(isinstance(value, str) and "\x00" in value for value in parameters):
        return [
            value.replace("\x00", _NUL_STANDS_IN) if isinstance(value, str) else value
            for value in parameters
        ]
    return parameters
