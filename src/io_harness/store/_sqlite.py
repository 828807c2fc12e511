"""The SQLite store: WAL, ``busy_timeout``, ``BEGIN IMMEDIATE``, one transaction per step."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

from io_harness._confined import Folder
from io_harness.errors import StorageError
from io_harness.store._files import (
    Owner,
    check_companions,
    open_private_file,
    read_only_reason,
    sqlite_uri,
    store_folder,
)
from io_harness.store._lease import FileLeases, MemoryLeases
from io_harness.store._schema import MIGRATIONS, SCHEMA_VERSION, newer_format
from io_harness.store._sql_store import Dialect, SqlStore
from io_harness.store._trace import Trace

__all__ = ["SqliteStore", "UndecodableError"]

Durability = Literal["full", "normal"]

SQLITE = Dialect(
    has_label="EXISTS (SELECT 1 FROM json_each(CASE WHEN json_valid(runs.labels)"
    " THEN runs.labels END) AS label WHERE label.key = ? AND label.value = ?)",
    json_integer="json_extract({column}, '$.{key}')",
)


class SqliteStore(SqlStore):
    """A store in one SQLite file (or in memory). See :meth:`Store.open`.

    A file this process cannot write (a read-only filesystem, or another
    user's file) is opened read-only: it reads as any store, and every write
    (a lease, a step, a decision, a note) is a :class:`StorageError` saying so.
    """

    dialect = SQLITE

    def __init__(self, target: str, *, durability: Durability = "full") -> None:
        self.location = target
        self.durability = durability
        self._lock = threading.Lock()
        self._leases: FileLeases | MemoryLeases = MemoryLeases()
        self._read_only: str | None = None
        if target == ":memory:":
            self._db = _connect(target, target)
        else:
            path = Path(target).absolute()
            folder = store_folder(path.parent, create=True)
            try:
                self._db, owner, self._read_only = _open_file(folder, path, target)
            except BaseException:
                folder.close()
                raise
            self._leases = FileLeases(folder, f"{path.name}.leases", owner)
        try:
            self._db.execute("PRAGMA busy_timeout = 10000")
            if target != ":memory:" and self._read_only is None:
                self._db.execute("PRAGMA journal_mode = WAL")
            self._db.execute(f"PRAGMA synchronous = {durability.upper()}")
            self._db.execute("PRAGMA foreign_keys = ON")
            self._migrate()
        except sqlite3.DatabaseError as exc:
            self._close_all()
            raise StorageError(f"{target} is not a readable io-harness store: {exc}") from None
        except BaseException:
            self._close_all()
            raise

    @property
    def read_only(self) -> bool:
        """Whether the file can only be read here (see :attr:`Store.read_only`)."""
        return self._read_only is not None

    def _migrate(self) -> None:
        version = self._version()
        if version == 0:
            tables = self._db.execute(
                "SELECT count(*) FROM sqlite_master WHERE type = 'table'"
            ).fetchone()[0]
            if tables:
                raise StorageError(f"{self.location} is an SQLite file but not an io-harness store")
        if version == SCHEMA_VERSION:
            return
        if self._read_only is not None:  # a migration writes: none can be made here
            said = f"the store {self.location} is read-only ({self._read_only})"
            if not version:
                raise StorageError(f"{said} and empty: it holds no runs, nor can it here")
            raise StorageError(
                f"{said} and in an older format (v{version}; this version reads "
                f"v{SCHEMA_VERSION}): open it once where it can be written, to upgrade it"
            )
        with self._transaction():
            # Read again under the write lock: another process may have migrated the
            # store between the read above and this transaction.
            version = self._version()
            for number in range(version, SCHEMA_VERSION):
                for statement in _statements(MIGRATIONS[number]):
                    self._db.execute(statement)
            if version < SCHEMA_VERSION:
                self._db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def _version(self) -> int:
        """The store's format, refused when it is newer than this code knows."""
        (version,) = self._db.execute("PRAGMA user_version").fetchone()
        if version > SCHEMA_VERSION:
            raise newer_format(self.location, version)
        return int(version)

    def _refused(self, why: str) -> StorageError:
        return StorageError(
            f"the store {self.location} is read-only ({why}): nothing can be written to it "
            "here (open it where it can be written)"
        )

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        if self._read_only is not None:
            raise self._refused(self._read_only)
        with self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise StorageError(
                    f"cannot start a transaction in {self.location}: {exc}"
                ) from None
            try:
                yield self._db
            except sqlite3.Error as exc:
                self._rollback()
                raise StorageError(f"cannot write to {self.location}: {exc}") from exc
            except BaseException:
                self._rollback()
                raise
            try:
                self._db.execute("COMMIT")
            except sqlite3.Error as exc:
                self._rollback()
                raise StorageError(f"cannot commit to {self.location}: {exc}") from None

    def _rollback(self) -> None:
        # SQLite has already rolled back after some errors (a full disk, for one).
        if self._db.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                self._db.execute("ROLLBACK")

    @contextlib.contextmanager
    def _reading(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            try:
                yield self._db
            except sqlite3.OperationalError as exc:
                if _UNDECODABLE in str(exc):
                    raise _Undecodable(f"cannot read {self.location}: {exc}") from None
                raise StorageError(f"cannot read {self.location}: {exc}") from None
            except sqlite3.Error as exc:
                raise StorageError(f"cannot read {self.location}: {exc}") from None

    def files(self) -> tuple[Path, ...]:
        """The database, its ``-wal``, ``-shm`` and ``-journal``, and its leases folder."""
        if self.location == ":memory:":
            return ()
        path = Path(self.location).absolute()
        companions = ("-wal", "-shm", "-journal", ".leases")
        return (path, *(path.with_name(path.name + suffix) for suffix in companions))

    def close(self) -> None:
        """Close the connection; the store cannot be used afterwards."""
        with self._lock:
            self._close_all()

    def _close_all(self) -> None:
        self._db.close()
        if isinstance(self._leases, FileLeases):
            self._leases.close()

    def __repr__(self) -> str:
        return f"Store.open({self.location!r})" if self.location != ":memory:" else "Store.memory()"

    def lease(self, run_id: str) -> contextlib.AbstractContextManager[None]:
        if self._read_only is not None:  # a run it cannot write it cannot drive
            raise self._refused(self._read_only)
        return self._leases.hold(run_id)

    def driven(self, run_id: str) -> bool:
        return self._leases.held(run_id)

    # -- text that is not UTF-8 --------------------------------------------------

    @contextlib.contextmanager
    def _lenient(self) -> Iterator[None]:
        """Read text that is not UTF-8 with its bad bytes replaced (U+FFFD), for a block."""
        with self._lock:
            self._db.text_factory = _replacing
        try:
            yield
        finally:
            with self._lock:
                self._db.text_factory = str

    def _undecodable_row(self, run_id: str) -> str:
        """Where the run's first text that is not UTF-8 lies: ``table row N, column C``."""
        for table in _RUN_TABLES:
            key = "id" if table == "runs" else "run_id"
            with self._lock:
                self._db.text_factory = bytes
                try:
                    cursor = self._db.execute(
                        f"SELECT rowid, * FROM {table} WHERE {key} = ?", (run_id,)
                    )
                    columns = [d[0] for d in cursor.description]
                    rows = cursor.fetchall()
                except sqlite3.Error:
                    continue
                finally:
                    self._db.text_factory = str
            for row in rows:
                for column, value in zip(columns, row, strict=True):
                    if isinstance(value, bytes) and not _utf8(value):
                        return f"{table} row {row[0]}, column {column}"
        return "a row of the run"

    def trace(self, run_id: str, *, undecodable: Literal["raise", "replace"] = "raise") -> Trace:
        """Every row stored about one run; see :meth:`Store.trace`.

        Text the file holds that is not UTF-8 (a damaged store) is a
        :class:`StorageError` naming the run and the row; with
        ``undecodable="replace"`` its bad bytes read as U+FFFD instead, so the
        rest of the trace can still be shown.
        """
        if undecodable == "replace":
            with self._lenient():
                return self._trace(run_id)
        try:
            return self._trace(run_id)
        except _Undecodable:
            where = self._undecodable_row(run_id)
            raise UndecodableError(
                f"run {run_id!r} holds text that is not UTF-8 in {where} of {self.location}; "
                "read it with trace(run_id, undecodable='replace') (ioh show does)"
            ) from None


def _open_file(
    folder: Folder, path: Path, shown: str
) -> tuple[sqlite3.Connection, Owner, str | None]:
    """A connection to the database ``path`` in ``folder`` (made ``0600`` if missing), the
    database's owner, and why it is read-only (``None``: it is not).

    The file is opened (or made) here, from the folder's descriptor and never
    through a symlink; SQLite then opens it by path without the right to
    create it (``mode=rw``, or read-only where it cannot be written), and the file
    it opened is checked to be this one before anything is read or written, so a
    symlink put in its place meanwhile leads nowhere.
    """
    fd = open_private_file(folder, path.name, os.O_RDONLY)
    try:
        check_companions(folder, path.name)
        checked = os.fstat(fd)
        read_only = read_only_reason(folder, path.name, fd)
        db = _connect(sqlite_uri(folder, path, read_only), shown)
        try:
            opened = os.stat(db.execute("PRAGMA database_list").fetchone()[2])
        except (OSError, sqlite3.Error) as exc:
            db.close()
            raise StorageError(f"cannot open the store {shown}: {exc}") from None
        if (opened.st_dev, opened.st_ino) != (checked.st_dev, checked.st_ino):
            db.close()
            raise StorageError(f"cannot open the store {shown}: it was replaced while opened")
        return db, Owner.of(checked), read_only
    finally:
        os.close(fd)


def _connect(target: str, shown: str) -> sqlite3.Connection:
    try:
        return sqlite3.connect(
            target, isolation_level=None, check_same_thread=False, uri=target != ":memory:"
        )
    except sqlite3.Error as exc:
        raise StorageError(f"cannot open the store {shown}: {exc}") from None


_UNDECODABLE = "Could not decode to UTF-8"
_RUN_TABLES = (
    "runs", "messages", "steps", "provider_calls", "tool_calls", "verifications", "events",
    "permissions", "approvals", "sandbox_events", "mcp_events", "tree_events", "compactions",
)  # fmt: skip
"""The tables with a row per run (``runs``) or rows keyed by ``run_id``."""


class _Undecodable(StorageError):
    """A read met text that is not UTF-8."""


class UndecodableError(StorageError):
    """A run holds text that is not UTF-8 (a damaged store); the message names the row."""


def _utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _replacing(data: bytes) -> str:
    return data.decode("utf-8", "replace")


def _statements(script: str) -> Iterator[str]:
    buffer = ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            yield buffer.strip()
            buffer = ""
    if buffer.strip():
        yield buffer.strip()
