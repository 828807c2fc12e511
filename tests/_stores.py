"""The store conformance suite's fixture: one test, run on each backend.

``store_factory`` is parametrised over SQLite (a file in the test's folder) and
PostgreSQL (a fresh database on the session's throw-away server). Calling it
opens a store at the test's location, so a test that needs two writers on one
store calls it twice; the stores it opened are closed after the test.
``sql`` runs a statement on the store's database behind its back, with ``?``
placeholders on both backends.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pytest

from io_harness import Store
from io_harness.store._schema import MIGRATIONS, postgres_migration

__all__ = ["BACKENDS", "StoreFactory", "store_factory"]

Backend = Literal["sqlite", "postgresql"]
BACKENDS: tuple[Backend, ...] = ("sqlite", "postgresql")


@dataclass
class StoreFactory:
    """Opens stores of one backend at one location; see the module's docstring."""

    backend: Backend
    location: str | Path
    opened: list[Store] = field(default_factory=list)

    def __call__(self, **options: Any) -> Store:
        """A new store object on the test's store (``Store.open``'s keyword options)."""
        store = Store.open(self.location, **options)
        self.opened.append(store)
        return store

    @property
    def leases_expire(self) -> bool:
        """Whether a dead writer's lease lasts until it expires (not dropped at once)."""
        return self.backend == "postgresql"

    def sql(self, statement: str, *params: object) -> list[tuple[Any, ...]]:
        """Run ``statement`` on the database directly and commit; the rows it returned."""
        if self.backend == "sqlite":
            with contextlib.closing(sqlite3.connect(self.location)) as db:
                rows = db.execute(statement, params).fetchall()
                db.commit()
                return rows
        import psycopg

        with psycopg.connect(str(self.location), autocommit=True) as conn:
            cursor = conn.execute(statement.replace("?", "%s").encode(), params)
            return cursor.fetchall() if cursor.description else []

    def create_at_version(self, version: int) -> None:
        """Create the store's tables as a release of format ``version`` left them, empty."""
        if self.backend == "sqlite":
            with contextlib.closing(sqlite3.connect(self.location)) as db:
                for number in range(version):
                    db.executescript(MIGRATIONS[number])
                db.execute(f"PRAGMA user_version = {version}")
                db.commit()
            return
        from io_harness.store._pg_lease import LEASES_TABLE

        self.sql(LEASES_TABLE + "CREATE TABLE store_format (version BIGINT NOT NULL);")
        for number in range(version):
            self.sql(postgres_migration(number))
        self.set_version(version, insert=True)

    def set_version(self, version: int, *, insert: bool = False) -> None:
        """Mark the store as format ``version``, as a newer (or older) release would."""
        if self.backend == "sqlite":
            self.sql(f"PRAGMA user_version = {version}")
        elif insert:
            self.sql("INSERT INTO store_format VALUES (?)", version)
        else:
            self.sql("UPDATE store_format SET version = ?", version)

    def close(self) -> None:
        """Close every store this factory opened."""
        for store in self.opened:
            store.close()


@pytest.fixture(params=BACKENDS)
def store_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreFactory]:
    """Stores of one backend (the test runs once per backend) at one fresh location."""
    backend: Backend = request.param
    location: str | Path = (
        request.getfixturevalue("postgres_url") if backend == "postgresql" else tmp_path / "runs.db"
    )
    factory = StoreFactory(backend, location)
    yield factory
    factory.close()
