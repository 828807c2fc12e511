"""The SQLite store: WAL, ``busy_timeout``, ``BEGIN IMMEDIATE``, one transaction per step."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

from io_harness.errors import ConfigError, ResumeError, StorageError
from io_harness.messages import Message, Usage
from io_harness.policy._approval import Decision
from io_harness.store._approvals_sql import (
    APPROVAL_COLUMNS,
    approval_from_row,
    decide,
    mark_performing,
)
from io_harness.store._base import Store
from io_harness.store._lease import FileLeases, MemoryLeases
from io_harness.store._memory import (
    DEFAULT_MEMORY_LIMITS,
    MemoryAuthor,
    MemoryEntry,
    MemoryLimits,
)
from io_harness.store._memory_sql import (
    forget_key,
    memory_entries,
    remember_key,
)
from io_harness.store._records import (
    ApprovalRow,
    CompactionRow,
    McpEventRow,
    NewRun,
    RunSummary,
    StepRecord,
    StoredRun,
    TreeNode,
    TreePlace,
)
from io_harness.store._schema import MIGRATIONS, SCHEMA_VERSION
from io_harness.store._step_sql import (
    USAGE_COLUMNS,
    insert_events,
    insert_mcp_events,
    insert_messages,
    insert_tree_events,
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
    trace_records,
)

__all__ = ["SqliteStore", "UndecodableError"]

Durability = Literal["full", "normal"]

_RUN_COLUMNS = (
    "id", "goal", "contract", "system_prompt", "tools", "provider", "model", "status",
    "outcome", "steps", *USAGE_COLUMNS, "cost_micros", "unpriced_calls", "started_at",
    "finished_at", "error", "policy", "remembered", "labels", "sandbox", "prices", "setup",
    "parent_id", "root_id", "depth", "spawn_call", "tree", "journal",
)  # fmt: skip


def row_dict(keys: tuple[str, ...], row: tuple[Any, ...]) -> dict[str, Any]:
    """A result row as a mapping of its column names."""
    return dict(zip(keys, row, strict=True))


class SqliteStore(Store):
    """A store in one SQLite file (or in memory). See :meth:`Store.open`."""

    def __init__(self, target: str, *, durability: Durability = "full") -> None:
        self.location = target
        self.durability = durability
        self._lock = threading.Lock()
        self._leases: FileLeases | MemoryLeases = (
            MemoryLeases()
            if target == ":memory:"
            else FileLeases(Path(f"{target}.leases").absolute())
        )
        try:
            self._db = sqlite3.connect(target, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as exc:
            raise StorageError(f"cannot open the store {target}: {exc}") from None
        try:
            self._db.execute("PRAGMA busy_timeout = 10000")
            if target != ":memory:":
                self._db.execute("PRAGMA journal_mode = WAL")
            self._db.execute(f"PRAGMA synchronous = {durability.upper()}")
            self._db.execute("PRAGMA foreign_keys = ON")
            self._migrate()
        except sqlite3.DatabaseError as exc:
            self._db.close()
            raise StorageError(f"{target} is not a readable io-harness store: {exc}") from None
        except BaseException:
            self._db.close()
            raise

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
            raise ResumeError(
                f"the store {self.location} has format {version}, newer than this "
                f"io-harness knows ({SCHEMA_VERSION}); upgrade io-harness to use it"
            )
        return int(version)

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
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

    def close(self) -> None:
        """Close the connection; the store cannot be used afterwards."""
        with self._lock:
            self._db.close()

    def __repr__(self) -> str:
        return f"Store.open({self.location!r})" if self.location != ":memory:" else "Store.memory()"

    # -- writing -----------------------------------------------------------------

    def lease(self, run_id: str) -> contextlib.AbstractContextManager[None]:
        return self._leases.hold(run_id)

    def driven(self, run_id: str) -> bool:
        return self._leases.held(run_id)

    def create_run(self, run: NewRun) -> None:
        with self._transaction() as db:
            if db.execute("SELECT 1 FROM runs WHERE id = ?", (run.id,)).fetchone():
                raise ConfigError(
                    f"a run with id {run.id!r} is already in the store; use resume() to continue it"
                )
            place = run.tree
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

    def commit_step(self, run_id: str, record: StepRecord) -> None:
        with self._transaction() as db:
            write_step(db, run_id, record)

    def journal_step(self, run_id: str, step: int, progress_json: str) -> None:
        with self._transaction() as db:
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
                insert_mcp_events(db, run_id, step, rows)

    def decide(self, request_id: str, decision: Decision, at: float | None = None) -> None:
        when = time.time() if at is None else at
        with self._transaction() as db:
            decide(db, request_id, decision.model_dump_json(), when)

    def mark_performing(
        self, loaded: ApprovalRow, decision: Decision, at: float | None = None
    ) -> None:
        when = time.time() if at is None else at
        with self._transaction() as db:
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
        return [approval_from_row(row) for row in rows]

    # -- memory ------------------------------------------------------------------

    def memory_entries(self, workspace: str) -> list[MemoryEntry]:
        with self._lock:
            try:
                return memory_entries(self._db, workspace)
            except sqlite3.Error as exc:
                raise StorageError(f"cannot read {self.location}: {exc}") from None

    def remember(
        self,
        workspace: str,
        key: str,
        value: str,
        *,
        limits: MemoryLimits = DEFAULT_MEMORY_LIMITS,
        by: MemoryAuthor | None = None,
        at: float | None = None,
    ) -> tuple[MemoryEntry, ...]:
        when = time.time() if at is None else at
        with self._transaction() as db:
            return remember_key(db, workspace, key, value, limits=limits, by=by, at=when)

    def forget(
        self, workspace: str, key: str, *, by: MemoryAuthor | None = None, at: float | None = None
    ) -> bool:
        when = time.time() if at is None else at
        with self._transaction() as db:
            return forget_key(db, workspace, key, by=by, at=when)

    def memory_log(self, run_id: str) -> tuple[MemoryTrace, ...]:
        return self._records(run_id, MemoryTrace, "memory_log", "seq")

    # -- reading -----------------------------------------------------------------

    def _read(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            try:
                return self._db.execute(sql, params).fetchall()
            except sqlite3.OperationalError as exc:
                if _UNDECODABLE in str(exc):
                    raise _Undecodable(f"cannot read {self.location}: {exc}") from None
                raise StorageError(f"cannot read {self.location}: {exc}") from None
            except sqlite3.Error as exc:
                raise StorageError(f"cannot read {self.location}: {exc}") from None

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

    def _run_row(self, run_id: str) -> dict[str, Any]:
        rows = self._read(f"SELECT {', '.join(_RUN_COLUMNS)} FROM runs WHERE id = ?", (run_id,))
        if not rows:
            raise ResumeError(f"no run {run_id!r} in the store {self.location}")
        return row_dict(_RUN_COLUMNS, rows[0])

    def load_run(self, run_id: str) -> StoredRun:
        row = self._run_row(run_id)
        bodies = self._read("SELECT body FROM messages WHERE run_id = ? ORDER BY seq", (run_id,))
        try:
            messages = [Message.model_validate_json(body) for (body,) in bodies]
        except ValueError as exc:
            raise StorageError(
                f"run {run_id!r} holds a message that does not load: {exc}"
            ) from None
        return StoredRun(
            id=row["id"],
            goal=row["goal"],
            contract_json=row["contract"],
            system_prompt=row["system_prompt"],
            tools_json=row["tools"],
            provider=row["provider"],
            model=row["model"],
            status=row["status"],
            outcome=row["outcome"],
            steps=row["steps"],
            usage=Usage(**{c: row[c] for c in USAGE_COLUMNS}),
            cost_micros=row["cost_micros"],
            unpriced_calls=row["unpriced_calls"],
            started_at=row["started_at"],
            finished_at=row["finished_at"],
            error_json=row["error"],
            verification_json=self._last_check(run_id),
            messages=messages,
            policy_json=row["policy"],
            labels=_labels(row["labels"]),
            remembered_json=row["remembered"],
            pending=next(iter(self.approvals(run_id)), None),
            sandbox_json=row["sandbox"],
            prices_json=row["prices"],
            setup_json=row["setup"],
            tree=_place(row),
            journal_json=row["journal"],
            compactions=tuple(
                CompactionRow(kind, step, message, text, at)
                for kind, step, message, text, at in self._read(
                    "SELECT kind, step, message, text, at FROM compactions WHERE run_id = ?"
                    " ORDER BY seq",
                    (run_id,),
                )
            ),
        )

    def child_run(self, parent_id: str, spawn_call: str) -> str | None:
        rows = self._read(
            "SELECT id FROM runs WHERE parent_id = ? AND spawn_call = ?", (parent_id, spawn_call)
        )
        return str(rows[0][0]) if rows else None

    def tree(self, root_id: str) -> list[TreeNode]:
        rows = self._read(
            f"SELECT {', '.join(_RUN_COLUMNS)} FROM runs WHERE root_id = ?"
            " ORDER BY depth, started_at, rowid",
            (root_id,),
        )
        nodes = []
        for values in rows:
            row = row_dict(_RUN_COLUMNS, values)
            nodes.append(
                TreeNode(
                    run=self._summary(row),
                    parent_id=row["parent_id"],
                    depth=row["depth"],
                    spawn_call=row["spawn_call"],
                )
            )
        return nodes

    def tree_drawn(self, root_id: str) -> tuple[int, int]:
        ((tokens, cost),) = self._read(
            "SELECT coalesce(sum(json_extract(detail, '$.tokens')), 0),"
            " coalesce(sum(json_extract(detail, '$.cost_micros')), 0)"
            " FROM tree_events WHERE root_id = ? AND kind = 'draw'",
            (root_id,),
        )
        return int(tokens), int(cost)

    def _last_check(self, run_id: str) -> str | None:
        rows = self._read(
            "SELECT result FROM verifications WHERE run_id = ? ORDER BY step DESC, seq DESC"
            " LIMIT 1",
            (run_id,),
        )
        return str(rows[0][0]) if rows else None

    @staticmethod
    def _summary(row: dict[str, Any]) -> RunSummary:
        return RunSummary(
            id=row["id"],
            goal=row["goal"],
            status=row["status"],
            outcome=row["outcome"],
            steps=row["steps"],
            tokens=row["input_tokens"] + row["output_tokens"],
            cost_micros=row["cost_micros"],
            unpriced_calls=row["unpriced_calls"],
            provider=row["provider"],
            model=row["model"],
            started_at=row["started_at"],
            finished_at=row["finished_at"],
            labels=_labels(row["labels"]),
        )

    def runs(self, limit: int | None = None) -> list[RunSummary]:
        rows = self._read(
            f"SELECT {', '.join(_RUN_COLUMNS)} FROM runs ORDER BY started_at DESC, rowid DESC"
            " LIMIT ?",
            (-1 if limit is None else limit,),
        )
        return [self._summary(row_dict(_RUN_COLUMNS, row)) for row in rows]

    def _records(
        self, run_id: str, cls: type[RecordT], table: str, order: str
    ) -> tuple[RecordT, ...]:
        rows = self._read(
            f"SELECT {', '.join(cls.columns())} FROM {table} WHERE run_id = ? ORDER BY {order}",
            (run_id,),
        )
        return trace_records(cls, table, run_id, rows)

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

    def _trace(self, run_id: str) -> Trace:
        stored = self.load_run(run_id)
        row = self._run_row(run_id)
        return Trace(
            run=self._summary(row),
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
            sandbox=SandboxChoiceTrace.from_json(row["sandbox"]),
            memory=self.memory_log(run_id),
        )


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


def _place(row: dict[str, Any]) -> TreePlace | None:
    if row["root_id"] is None:
        return None
    return TreePlace(
        root_id=row["root_id"],
        parent_id=row["parent_id"],
        depth=row["depth"],
        spawn_call=row["spawn_call"],
        tree_json=row["tree"],
    )


def _labels(text: str | None) -> dict[str, str]:
    try:
        value = json.loads(text) if text else {}
    except json.JSONDecodeError:
        return {"(unreadable)": text or ""}
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}


def _statements(script: str) -> Iterator[str]:
    buffer = ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            yield buffer.strip()
            buffer = ""
    if buffer.strip():
        yield buffer.strip()
