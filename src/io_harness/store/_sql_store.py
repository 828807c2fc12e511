"""What the SQL backends share: every read and write of :class:`Store`, written once.

A backend supplies its connection and transactions (:meth:`SqlStore._transaction`,
:meth:`SqlStore._reading`), its leases, the few expressions its SQL dialect
spells its own way (:class:`Dialect`) and, where it can lose a lease while a
writer still runs, the check every write of a run's state makes first
(:meth:`SqlStore._fence`).
"""

from __future__ import annotations

import abc
import contextlib
import json
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from io_harness.errors import ResumeError, StorageError, run_already_stored
from io_harness.messages import Message, Usage
from io_harness.policy._approval import Decision
from io_harness.store._approvals_sql import (
    APPROVAL_COLUMNS,
    approval_rows,
    decide,
    mark_performing,
)
from io_harness.store._base import Store
from io_harness.store._memory import (
    DEFAULT_MEMORY_LIMITS,
    MemoryAuthor,
    MemoryEntry,
    MemoryLimits,
    memory_workspace,
)
from io_harness.store._memory_sql import forget_key, memory_entries, remember_key
from io_harness.store._records import (
    ApprovalRow,
    CompactionRow,
    EventRow,
    McpEventRow,
    NewRun,
    RunSummary,
    StepRecord,
    StoredRun,
    TreeNode,
    TreePlace,
)
from io_harness.store._rows import MessageRecord, RunRecord, decoded_json, records
from io_harness.store._sql import SqlConnection
from io_harness.store._step_sql import (
    insert_events,
    insert_mcp_events,
    insert_messages,
    insert_tree_events,
    reopen,
    write_step,
)
from io_harness.store._trace import (
    ApprovalTrace,
    CompactionTrace,
    EventTrace,
    McpEventTrace,
    MemoryTrace,
    PermissionTrace,
    ProviderCallTrace,
    RecordT,
    SandboxChoiceTrace,
    SandboxEventTrace,
    StepTrace,
    ToolCallTrace,
    Trace,
    TreeEventTrace,
    VerificationTrace,
)

__all__ = ["RUN_COLUMNS", "Dialect", "SqlStore"]

RUN_COLUMNS = RunRecord.columns()
"""The ``runs`` columns a read selects, in the order :class:`RunRecord` takes them."""


@dataclass(frozen=True, slots=True)
class Dialect:
    """The expressions a backend's SQL spells its own way."""

    has_label: str
    """True for a ``runs`` row whose labels hold key ``?`` with value ``?``."""
    json_integer: str
    """The integer at key ``{key}`` of the JSON text in column ``{column}``."""


class SqlStore(Store):
    """A store whose backend speaks SQL: the reads and writes both backends share."""

    location: str
    dialect: Dialect

    @abc.abstractmethod
    def _transaction(self) -> contextlib.AbstractContextManager[SqlConnection]:
        """A write transaction for a block: committed at its end, rolled back on an error.

        A backend error is a StorageError saying what failed.
        """

    @abc.abstractmethod
    def _reading(self) -> contextlib.AbstractContextManager[SqlConnection]:
        """A connection to read with for a block; a backend error is a StorageError."""

    def _fence(
        self,
        db: SqlConnection,
        run_id: str,
        *,
        root_id: str | None = None,
        unleased_ok: bool = False,
    ) -> None:
        """Refuse, inside the transaction ``db``, a write of ``run_id``'s state by a writer
        that may not make it. ``root_id`` is the tree whose rows the write numbers on;
        ``unleased_ok`` lets a writer that holds no lease write while another drives the
        run (an operator's decision on a deferred act: the resume re-reads it).

        A SQLite store writes one transaction at a time and its leases cannot be
        lost by a live writer, so it checks nothing here.
        """

    def _read(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        with self._reading() as db:
            return db.execute(sql, params).fetchall()

    # -- writing -----------------------------------------------------------------

    def create_run(self, run: NewRun) -> None:
        place = run.tree
        with self._transaction() as db:
            if place is not None and place.parent_id is not None:
                self._fence(db, place.parent_id)  # a child is its parent's write too
            self._fence(db, run.id, root_id=place.root_id if place else None)
            if db.execute("SELECT 1 FROM runs WHERE id = ?", (run.id,)).fetchone():
                raise run_already_stored(run.id)
            db.execute(
                "INSERT INTO runs (id, goal, contract, system_prompt, tools, provider, model,"
                " status, started_at, policy, labels, sandbox, prices, setup,"
                " parent_id, root_id, depth, spawn_call, tree)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, 'running', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    run.id,
                    run.goal,
                    run.contract_json,
                    run.system_prompt,
                    run.tools_json,
                    run.provider,
                    run.model,
                    run.started_at,
                    run.policy_json,
                    json.dumps(run.labels) if run.labels else None,
                    run.sandbox_json,
                    run.prices_json,
                    run.setup_json,
                    place.parent_id if place else None,
                    place.root_id if place else None,
                    place.depth if place else 0,
                    place.spawn_call if place else None,
                    place.tree_json if place else None,
                ),
            )
            insert_messages(db, run.id, 0, run.messages)
            insert_events(db, run.id, run.events)
            if run.tree_events:
                assert place is not None and place.parent_id is not None
                insert_tree_events(db, place.parent_id, 0, run.tree_events)

    def restart_clock(self, run_id: str, label: str, at: float | None = None) -> bool:
        with self._transaction() as db:
            self._fence(db, run_id)
            found = db.execute("SELECT labels FROM runs WHERE id = ?", (run_id,)).fetchone()
            labels = _labels(found[0]) if found is not None else {}
            if label not in labels:
                return False
            del labels[label]
            db.execute(
                "UPDATE runs SET started_at = ?, labels = ? WHERE id = ?",
                (time.time() if at is None else at, json.dumps(labels) if labels else None, run_id),
            )
            return True

    def continue_run(
        self, run_id: str, contract_json: str, said: Message | None, event: EventRow
    ) -> None:
        with self._transaction() as db:
            self._fence(db, run_id)
            reopen(db, run_id, contract_json, said, event)

    def commit_step(self, run_id: str, record: StepRecord) -> None:
        with self._transaction() as db:
            self._fence(db, run_id)
            write_step(db, run_id, record)

    def journal_step(self, run_id: str, step: int, progress_json: str) -> None:
        with self._transaction() as db:
            self._fence(db, run_id)
            updated = db.execute(
                "UPDATE runs SET journal = ? WHERE id = ? AND steps = ? AND status = 'running'",
                (progress_json, run_id, step - 1),
            ).rowcount
            if updated != 1:
                raise StorageError(
                    f"run {run_id!r} is not at step {step - 1} and running: another writer "
                    "advanced or ended it"
                )

    def append_mcp_events(self, run_id: str, step: int, rows: Sequence[McpEventRow]) -> None:
        if rows:
            with self._transaction() as db:
                self._fence(db, run_id)
                insert_mcp_events(db, run_id, step, rows)

    def decide(self, request_id: str, decision: Decision, at: float | None = None) -> None:
        when = time.time() if at is None else at
        with self._transaction() as db:
            found = db.execute(
                "SELECT run_id FROM approvals WHERE id = ?", (request_id,)
            ).fetchone()
            if found is not None:
                self._fence(db, str(found[0]), unleased_ok=True)
            decide(db, request_id, decision.model_dump_json(), when)

    def mark_performing(
        self, loaded: ApprovalRow, decision: Decision, at: float | None = None
    ) -> None:
        when = time.time() if at is None else at
        with self._transaction() as db:
            self._fence(db, loaded.run_id)
            mark_performing(db, loaded, decision.model_dump_json(), when)

    def approvals(self, run_id: str | None = None) -> list[ApprovalRow]:
        where = "status IN ('pending', 'decided', 'performing')"
        params: tuple[Any, ...] = ()
        if run_id is not None:
            where, params = f"{where} AND run_id = ?", (run_id,)
        rows = self._read(
            f"SELECT {', '.join(APPROVAL_COLUMNS)} FROM approvals WHERE {where}"
            " ORDER BY created_at, id",
            params,
        )
        return approval_rows(rows)

    # -- memory ------------------------------------------------------------------

    def memory_entries(self, workspace: str | os.PathLike[str]) -> list[MemoryEntry]:
        scope = memory_workspace(workspace)
        with self._reading() as db:
            return memory_entries(db, scope)

    def remember(
        self,
        workspace: str | os.PathLike[str],
        key: str,
        value: str,
        *,
        limits: MemoryLimits = DEFAULT_MEMORY_LIMITS,
        by: MemoryAuthor | None = None,
        at: float | None = None,
    ) -> tuple[MemoryEntry, ...]:
        scope, when = memory_workspace(workspace), time.time() if at is None else at
        with self._transaction() as db:
            return remember_key(db, scope, key, value, limits=limits, by=by, at=when)

    def forget(
        self,
        workspace: str | os.PathLike[str],
        key: str,
        *,
        by: MemoryAuthor | None = None,
        at: float | None = None,
    ) -> bool:
        scope, when = memory_workspace(workspace), time.time() if at is None else at
        with self._transaction() as db:
            return forget_key(db, scope, key, by=by, at=when)

    def memory_log(self, run_id: str) -> tuple[MemoryTrace, ...]:
        return self._records(run_id, MemoryTrace, "memory_log", "seq")

    # -- reading -----------------------------------------------------------------

    def _run_row(self, run_id: str) -> RunRecord:
        rows = self._read(f"SELECT {', '.join(RUN_COLUMNS)} FROM runs WHERE id = ?", (run_id,))
        if not rows:
            raise ResumeError(f"no run {run_id!r} in the store {self.location}")
        if len(rows) > 1:  # only a store made by hand lacks the primary key that forbids it
            raise StorageError(f"run {run_id!r} holds {len(rows)} rows of runs, not one")
        (run,) = records(RunRecord, "runs", rows, owner=f"run {run_id!r}")
        return run

    def load_run(self, run_id: str) -> StoredRun:
        run = self._run_row(run_id)
        owner = f"run {run_id!r}"
        bodies = self._read(
            "SELECT seq, body FROM messages WHERE run_id = ? ORDER BY seq", (run_id,)
        )
        messages = [m.body for m in records(MessageRecord, "messages", bodies, owner=owner)]
        edits = self._records(run_id, CompactionTrace, "compactions", "seq")
        return StoredRun(
            id=run.id,
            goal=run.goal,
            contract_json=run.contract,
            system_prompt=run.system_prompt,
            tools_json=run.tools,
            provider=run.provider,
            model=run.model,
            status=run.status,
            outcome=run.outcome,
            steps=run.steps,
            usage=_usage(run),
            cost_micros=run.cost_micros,
            unpriced_calls=run.unpriced_calls,
            started_at=run.started_at,
            finished_at=run.finished_at,
            error_json=run.error,
            verification_json=self._last_check(run_id),
            messages=messages,
            policy_json=run.policy,
            labels=run.labels or {},
            remembered_json=run.remembered,
            pending=next(iter(self.approvals(run_id)), None),
            sandbox_json=run.sandbox,
            prices_json=run.prices,
            setup_json=run.setup,
            tree=_place(run),
            journal_json=run.journal,
            compactions=tuple(
                CompactionRow(e.kind, e.step, e.message, e.text, e.at) for e in edits
            ),
        )

    def child_run(self, parent_id: str, spawn_call: str) -> str | None:
        rows = self._read(
            "SELECT id FROM runs WHERE parent_id = ? AND spawn_call = ?", (parent_id, spawn_call)
        )
        return str(rows[0][0]) if rows else None

    def tree(self, root_id: str) -> list[TreeNode]:
        rows = self._read(
            f"SELECT {', '.join(RUN_COLUMNS)} FROM runs WHERE root_id = ?"
            " ORDER BY depth, started_at, rowid",
            (root_id,),
        )
        return [
            TreeNode(
                run=_summary(run),
                parent_id=run.parent_id,
                depth=run.depth,
                spawn_call=run.spawn_call,
            )
            for run in records(RunRecord, "runs", rows)
        ]

    def tree_drawn(self, root_id: str) -> tuple[int, int]:
        tokens = self.dialect.json_integer.format(column="detail", key="tokens")
        cost = self.dialect.json_integer.format(column="detail", key="cost_micros")
        ((drawn, spent),) = self._read(
            f"SELECT coalesce(sum({tokens}), 0), coalesce(sum({cost}), 0)"
            " FROM tree_events WHERE root_id = ? AND kind = 'draw'",
            (root_id,),
        )
        return int(drawn), int(spent)

    def _last_check(self, run_id: str) -> str | None:
        rows = self._read(
            f"SELECT {', '.join(VerificationTrace.columns())} FROM verifications"
            " WHERE run_id = ? ORDER BY step DESC, seq DESC LIMIT 1",
            (run_id,),
        )
        checks = records(VerificationTrace, "verifications", rows, owner=f"run {run_id!r}")
        return checks[0].result if checks else None

    def runs(
        self,
        limit: int | None = None,
        *,
        labels: Mapping[str, str] | None = None,
        status: str | None = None,
    ) -> list[RunSummary]:
        where: list[str] = ["1 = 1"]
        params: list[object] = []
        for key, value in (labels or {}).items():
            where.append(self.dialect.has_label)
            params += [key, value]
        if status is not None:
            where.append("(status = ? OR outcome = ?)")
            params += [status, status]
        sql = (
            f"SELECT {', '.join(RUN_COLUMNS)} FROM runs WHERE {' AND '.join(where)}"
            " ORDER BY started_at DESC, rowid DESC"
        )
        if limit is not None:
            sql, params = f"{sql} LIMIT ?", [*params, max(limit, 0)]
        return [_summary(run) for run in records(RunRecord, "runs", self._read(sql, params))]

    def _records(
        self, run_id: str, cls: type[RecordT], table: str, order: str
    ) -> tuple[RecordT, ...]:
        rows = self._read(
            f"SELECT {', '.join(cls.columns())} FROM {table} WHERE run_id = ? ORDER BY {order}",
            (run_id,),
        )
        return records(cls, table, rows, owner=f"run {run_id!r}")

    def trace(self, run_id: str, *, undecodable: Literal["raise", "replace"] = "raise") -> Trace:
        return self._trace(run_id)

    def _trace(self, run_id: str) -> Trace:
        stored = self.load_run(run_id)
        run = self._run_row(run_id)
        return Trace(
            run=_summary(run),
            messages=tuple(stored.messages),
            steps=self._records(run_id, StepTrace, "steps", "step"),
            provider_calls=self._records(
                run_id, ProviderCallTrace, "provider_calls", "step, attempt"
            ),
            tool_calls=self._records(run_id, ToolCallTrace, "tool_calls", "step, seq"),
            verifications=self._records(run_id, VerificationTrace, "verifications", "step, seq"),
            events=self._records(run_id, EventTrace, "events", "seq"),
            permissions=self._records(run_id, PermissionTrace, "permissions", "seq"),
            approvals=self._records(run_id, ApprovalTrace, "approvals", "created_at, id"),
            sandbox_events=self._records(run_id, SandboxEventTrace, "sandbox_events", "seq"),
            mcp_events=self._records(run_id, McpEventTrace, "mcp_events", "seq"),
            tree_events=self._records(run_id, TreeEventTrace, "tree_events", "seq"),
            compactions=self._records(run_id, CompactionTrace, "compactions", "seq"),
            sandbox=SandboxChoiceTrace.from_json(run.sandbox),
            memory=self.memory_log(run_id),
        )


def _summary(run: RunRecord) -> RunSummary:
    return RunSummary(
        id=run.id,
        goal=run.goal,
        status=run.status,
        outcome=run.outcome,
        steps=run.steps,
        tokens=run.input_tokens + run.output_tokens,
        cost_micros=run.cost_micros,
        unpriced_calls=run.unpriced_calls,
        provider=run.provider,
        model=run.model,
        started_at=run.started_at,
        finished_at=run.finished_at,
        labels=run.labels or {},
    )


def _usage(run: RunRecord) -> Usage:
    return Usage(
        input_tokens=run.input_tokens,
        output_tokens=run.output_tokens,
        cache_read_tokens=run.cache_read_tokens,
        cache_write_tokens=run.cache_write_tokens,
        reasoning_tokens=run.reasoning_tokens,
    )


def _place(run: RunRecord) -> TreePlace | None:
    if run.root_id is None:
        return None
    return TreePlace(
        root_id=run.root_id,
        parent_id=run.parent_id,
        depth=run.depth,
        spawn_call=run.spawn_call,
        tree_json=run.tree,
    )


def _labels(text: object) -> dict[str, str]:
    """The labels a ``runs`` row holds, for a write that changes them; text that is not a
    JSON object of labels holds none (a read of the row says what is wrong with it)."""
    try:
        value = decoded_json(text) if text else {}
    except ValueError:
        return {}
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}
