"""The SQL of permissions and deferred approvals, kept apart from the step tables."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from io_harness.errors import ConfigError, StorageError
from io_harness.store._records import ApprovalRow, PermissionRow, StepRecord
from io_harness.store._rows import ApprovalRecord, records
from io_harness.store._sql import SqlConnection

__all__ = [
    "APPROVAL_COLUMNS",
    "approval_rows",
    "check_writer_may_commit",
    "decide",
    "insert_permissions",
    "mark_performing",
    "write_approvals",
]

APPROVAL_COLUMNS = ApprovalRecord.columns()
"""The ``approvals`` columns a read selects, in the order :func:`approval_rows` takes them."""

OPEN_STATUSES = ("pending", "decided", "performing")
"""An approval in one of these is not done: the run awaits it or is performing it."""


def approval_rows(rows: Iterable[Sequence[object]]) -> list[ApprovalRow]:
    """``approvals`` rows, in :data:`APPROVAL_COLUMNS` order, as the loop's records; one
    that does not load is a StorageError naming it."""
    return [
        ApprovalRow(
            id=row.id,
            run_id=row.run_id,
            step=row.step,
            status=row.status,
            request_json=row.request,
            progress_json=row.progress,
            decision_json=row.decision,
            created_at=row.created_at,
            decided_at=row.decided_at,
        )
        for row in records(ApprovalRecord, "approvals", rows)
    ]


def check_writer_may_commit(
    db: SqlConnection, run_id: str, record: StepRecord, steps: int, status: str
) -> None:
    """Refuse a record that does not continue the run as stored."""
    open_id = None
    if status == "awaiting":
        row = db.execute(
            "SELECT id FROM approvals WHERE run_id = ? AND status IN (?, ?, ?)",
            (run_id, *OPEN_STATUSES),
        ).fetchone()
        open_id = row[0] if row else None
    touches = {r.id for r in (record.resolves, record.defers) if r is not None}
    may = status == "running" or (status == "awaiting" and open_id in touches)
    if steps != record.step - 1 or not may:
        raise StorageError(
            f"run {run_id!r} was advanced by another writer (it is at step {steps}, "
            f"{status}); this writer's step {record.step} was not written"
        )


def insert_permissions(
    db: SqlConnection, run_id: str, step: int, rows: Sequence[PermissionRow]
) -> None:
    """Append the gate's rows for one record, numbered on from the run's last."""
    if not rows:
        return
    (last,) = db.execute(
        "SELECT coalesce(max(seq), 0) FROM permissions WHERE run_id = ?", (run_id,)
    ).fetchone()
    db.executemany(
        "INSERT INTO permissions (run_id, seq, step, call_id, act, target, argv, effect, rule,"
        " layer, decision, decided_by, reason, at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (run_id, seq, step, p.call_id, p.act, p.target, p.argv_json, p.effect, p.rule,
             p.layer, p.decision, p.decided_by, p.reason, p.at)
            for seq, p in enumerate(rows, start=last + 1)
        ],
    )  # fmt: skip


def write_approvals(db: SqlConnection, run_id: str, record: StepRecord) -> None:
    """Mark a performed approval done and store a new deferral, moving the run's status."""
    done = record.resolves
    if done is not None:
        db.execute(
            "UPDATE approvals SET status = 'done', decision = ?,"
            " decided_at = coalesce(decided_at, ?) WHERE id = ?",
            (done.decision_json, done.decided_at, done.id),
        )
        db.execute("UPDATE runs SET status = 'running' WHERE id = ?", (run_id,))
    new = record.defers
    if new is not None:
        db.execute(
            "INSERT INTO approvals (id, run_id, step, status, request, progress, created_at)"
            " VALUES (?, ?, ?, 'pending', ?, ?, ?) ON CONFLICT (id) DO UPDATE SET"
            " status = 'pending', request = excluded.request, progress = excluded.progress,"
            " decision = NULL,"
            " decided_at = NULL",
            (new.id, run_id, new.step, new.request_json, new.progress_json, new.created_at),
        )
        db.execute("UPDATE runs SET status = 'awaiting' WHERE id = ?", (run_id,))


def decide(db: SqlConnection, request_id: str, decision_json: str, at: float) -> None:
    """Store a decision on an open request; a request decided or done already is refused."""
    row = db.execute("SELECT status, decision FROM approvals WHERE id = ?", (request_id,))
    found = row.fetchone()
    if found is None:
        raise ConfigError(f"no deferred action {request_id!r} in the store")
    status, decision = found
    if status != "pending":
        raise ConfigError(
            f"the action {request_id!r} was already decided ({decision}); "
            + {
                "decided": "resume the run to perform it",
                "performing": "it was being performed when the run stopped; resume reports it",
            }.get(status, "it has been performed")
        )
    db.execute(
        "UPDATE approvals SET status = 'decided', decision = ?, decided_at = ? WHERE id = ?",
        (decision_json, at, request_id),
    )


def mark_performing(db: SqlConnection, loaded: ApprovalRow, decision_json: str, at: float) -> None:
    """Record that an approved act is about to be performed, with the decision that approved it.

    A process that dies before the step's commit leaves this mark; the next
    resume then does not perform the act a second time. The row must still
    be as the resume loaded it: a decision stored meanwhile (by another
    process) stops the act with a StorageError.
    """
    changed = db.execute(
        "UPDATE approvals SET status = 'performing', decision = ?,"
        " decided_at = coalesce(decided_at, ?)"
        " WHERE id = ? AND status = ? AND coalesce(decision, '') = ?",
        (decision_json, at, loaded.id, loaded.status, loaded.decision_json or ""),
    ).rowcount
    if changed != 1:
        raise StorageError(
            f"the decision on request {loaded.id} changed while this resume ran (it was "
            "decided elsewhere); nothing was performed. Resume again to take that decision"
        )
