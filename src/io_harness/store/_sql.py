"""What the shared SQL asks of a backend's connection: ``execute`` and ``executemany``.

The statements in ``_step_sql``, ``_approvals_sql``, ``_memory_sql`` and
``_sql_store`` are written once, with ``?`` placeholders and SQL both SQLite
and PostgreSQL speak; a ``sqlite3.Connection`` runs them as they are and the
PostgreSQL store's connection translates the placeholders.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol

__all__ = ["SqlConnection", "SqlCursor"]


class SqlCursor(Protocol):
    """The result of one statement."""

    @property
    def rowcount(self) -> int:
        """How many rows the statement changed."""
        ...

    def fetchone(self) -> Any:
        """The next row, or ``None``."""
        ...

    def fetchall(self) -> list[Any]:
        """The remaining rows."""
        ...


class SqlConnection(Protocol):
    """A connection inside the transaction its store holds."""

    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> SqlCursor:
        """Run one statement with ``?`` placeholders."""
        ...

    def executemany(self, sql: str, parameters: Iterable[Sequence[Any]], /) -> object:
        """Run one statement once per row of parameters."""
        ...
