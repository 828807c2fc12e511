"""The SQL of durable memory: entries per workspace, and the log of every change.

The caller holds the transaction, so a change and its ``memory_log`` rows
(the set, the forget, each eviction) commit together or not at all.
"""

from __future__ import annotations

from pathlib import PurePath

from io_harness.errors import ConfigError
from io_harness.store._memory import (
    MemoryAuthor,
    MemoryEntry,
    MemoryLimits,
    MemoryOp,
    memory_key_problem,
)
from io_harness.store._rows import records
from io_harness.store._sql import SqlConnection

__all__ = [
    "forget_key",
    "memory_entries",
    "remember_key",
]


def memory_entries(db: SqlConnection, workspace: str) -> list[MemoryEntry]:
    """The entries of ``workspace``, oldest write first."""
    rows = db.execute(
        "SELECT key, value, updated_at FROM memory WHERE workspace = ? ORDER BY written",
        (workspace,),
    ).fetchall()
    return list(records(MemoryEntry, "memory", rows, owner=f"workspace {workspace!r}"))


def remember_key(
    db: SqlConnection,
    workspace: str,
    key: str,
    value: str,
    *,
    limits: MemoryLimits,
    by: MemoryAuthor | None,
    at: float,
) -> tuple[MemoryEntry, ...]:
    """Set ``key`` to ``value`` as the newest entry, then evict the oldest until the caps hold.

    Returns the evicted entries, oldest first. A bad workspace or key, or a
    value over ``limits.value_chars``, is a ConfigError and nothing is written.
    """
    _check(workspace, key)
    if len(value) > limits.value_chars:
        raise ConfigError(
            f"memory {key!r}: the value is {len(value):,} characters, over the cap of "
            f"{limits.value_chars:,} characters per value"
        )
    (written,) = db.execute(
        "SELECT coalesce(max(written), 0) + 1 FROM memory WHERE workspace = ?", (workspace,)
    ).fetchone()
    db.execute(
        "INSERT INTO memory (workspace, key, value, written, updated_at) VALUES (?, ?, ?, ?, ?)"
        " ON CONFLICT (workspace, key) DO UPDATE SET value = excluded.value,"
        " written = excluded.written, updated_at = excluded.updated_at",
        (workspace, key, value, written, at),
    )
    _log(db, workspace, key, "set", value, by, at)
    return _evict(db, workspace, limits, by, at)


def _evict(
    db: SqlConnection,
    workspace: str,
    limits: MemoryLimits,
    by: MemoryAuthor | None,
    at: float,
) -> tuple[MemoryEntry, ...]:
    entries = memory_entries(db, workspace)
    count = len(entries)
    total = sum(len(entry.value) for entry in entries)
    evicted: list[MemoryEntry] = []
    # The newest entry is never evicted: its value fits value_chars, which fits total_chars.
    for entry in entries[:-1]:
        if count <= limits.entries and total <= limits.total_chars:
            break
        db.execute("DELETE FROM memory WHERE workspace = ? AND key = ?", (workspace, entry.key))
        _log(db, workspace, entry.key, "evict", entry.value, by, at)
        evicted.append(entry)
        count -= 1
        total -= len(entry.value)
    return tuple(evicted)


def forget_key(
    db: SqlConnection,
    workspace: str,
    key: str,
    *,
    by: MemoryAuthor | None,
    at: float,
) -> bool:
    """Remove ``key`` from ``workspace``'s memory; whether it was there.

    Forgetting a key that is not remembered changes nothing and logs nothing.
    """
    _check(workspace, key)
    row = db.execute(
        "SELECT value FROM memory WHERE workspace = ? AND key = ?", (workspace, key)
    ).fetchone()
    if row is None:
        return False
    db.execute("DELETE FROM memory WHERE workspace = ? AND key = ?", (workspace, key))
    _log(db, workspace, key, "forget", row[0], by, at)
    return True


def _log(
    db: SqlConnection,
    workspace: str,
    key: str,
    op: MemoryOp,
    value: str | None,
    by: MemoryAuthor | None,
    at: float,
) -> None:
    db.execute(
        "INSERT INTO memory_log (workspace, key, op, value, run_id, step, call_id, at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (
            workspace,
            key,
            op,
            value,
            None if by is None else by.run_id,
            None if by is None else by.step,
            None if by is None else by.call_id,
            at,
        ),
    )


def _check(workspace: str, key: str) -> None:
    if not workspace or not PurePath(workspace).is_absolute():
        raise ConfigError(
            f"memory's workspace must be the absolute, resolved root of a workspace, "
            f"not {workspace!r}"
        )
    problem = memory_key_problem(key)
    if problem is not None:
        raise ConfigError(f"memory key {key!r}: {problem}")
