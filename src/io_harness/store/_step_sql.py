"""The SQL that writes one step: its rows, the run's totals, and the run's end.

The caller holds the transaction; everything here is one step's writes.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from io_harness.errors import ResumeError, StorageError
from io_harness.messages import Message, Usage
from io_harness.store._approvals_sql import (
    check_writer_may_commit,
    insert_permissions,
    write_approvals,
)
from io_harness.store._records import (
    EventRow,
    Finish,
    McpEventRow,
    SandboxEventRow,
    StepRecord,
    TreeEventRow,
)
from io_harness.store._sql import SqlConnection

__all__ = [
    "USAGE_COLUMNS",
    "insert_events",
    "insert_mcp_events",
    "insert_messages",
    "insert_sandbox_events",
    "insert_tree_events",
    "reopen",
    "usage_values",
    "write_step",
]

USAGE_COLUMNS = (
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "reasoning_tokens",
)


def usage_values(usage: Usage) -> tuple[int, ...]:
    """A usage's token counts in :data:`USAGE_COLUMNS` order."""
    return tuple(getattr(usage, column) for column in USAGE_COLUMNS)


def write_step(db: SqlConnection, run_id: str, record: StepRecord) -> None:
    """Write one step's records, and the run's end if it has one; see ``Store.commit_step``."""
    row = db.execute("SELECT steps, status FROM runs WHERE id = ?", (run_id,)).fetchone()
    if row is None:
        raise StorageError(f"run {run_id!r} is not in the store")
    steps, status = row
    check_writer_may_commit(db, run_id, record, steps, status)
    if record.counts_as_step:
        _insert_step(db, run_id, record)
    _insert_attempts(db, run_id, record)
    _insert_verifications(db, run_id, record)
    if record.attempts:
        db.execute(
            "UPDATE runs SET cost_micros = cost_micros + ?,"
            " unpriced_calls = unpriced_calls + ? WHERE id = ?",
            (record.cost_micros, record.unpriced_calls, run_id),
        )
    insert_events(db, run_id, record.events)
    insert_permissions(db, run_id, record.step, record.permissions)
    insert_sandbox_events(db, run_id, record.step, record.sandbox_events)
    insert_mcp_events(db, run_id, record.step, record.mcp_events)
    insert_tree_events(db, run_id, record.step, record.tree_events)
    _insert_compactions(db, run_id, record)
    write_approvals(db, run_id, record)
    _update_run(db, run_id, record)
    if record.finish is not None:
        _finish(db, run_id, record.finish)


def _stored_before(db: SqlConnection, table: str, column: str, run_id: str, step: int) -> int:
    """The highest ``column`` of the step's rows in ``table`` already stored (0 if none)."""
    (last,) = db.execute(
        f"SELECT coalesce(max({column}), 0) FROM {table} WHERE run_id = ? AND step = ?",
        (run_id, step),
    ).fetchone()
    return int(last)


def _insert_attempts(db: SqlConnection, run_id: str, record: StepRecord) -> None:
    """One ``provider_calls`` row for each attempt the step made (numbered on from those
    a stopped run left under the step, after a continuation)."""
    before = (
        _stored_before(db, "provider_calls", "attempt", run_id, record.step)
        if record.numbered_on and record.attempts
        else 0
    )
    db.executemany(
        "INSERT INTO provider_calls (run_id, step, attempt, provider, model, started_at,"
        " latency, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens,"
        " reasoning_tokens, finish_reason, error_kind, error_status, error_message,"
        " served_model, time_to_first_token, cost_micros)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (
                run_id,
                record.step,
                before + a.attempt,
                a.provider,
                a.model,
                a.started_at,
                a.latency,
                *usage_values(a.usage),
                a.finish_reason,
                a.error_kind,
                a.error_status,
                a.error_message,
                a.served_model,
                a.time_to_first_token,
                a.cost_micros,
            )
            for a in record.attempts
        ],
    )


def _insert_verifications(db: SqlConnection, run_id: str, record: StepRecord) -> None:
    """One ``verifications`` row for each time the step ran the criterion, in order."""
    before = (
        _stored_before(db, "verifications", "seq", run_id, record.step)
        if record.numbered_on and record.verifications
        else 0
    )
    db.executemany(
        "INSERT INTO verifications (run_id, step, seq, trigger, passed, criterion,"
        " summary, result, duration) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (
                run_id,
                record.step,
                seq,
                v.trigger,
                int(v.passed),
                v.criterion,
                v.summary,
                v.result_json,
                v.duration,
            )
            for seq, v in enumerate(record.verifications, start=before + 1)
        ],
    )


def _update_run(db: SqlConnection, run_id: str, record: StepRecord) -> None:
    """The run's columns a step sets: its journal (cleared once a step counts or the run
    ends), and what it remembered, its policy and its sandbox, when the step gives them."""
    if record.journal_json is not None:
        db.execute("UPDATE runs SET journal = ? WHERE id = ?", (record.journal_json, run_id))
    elif record.counts_as_step or record.finish is not None:
        db.execute("UPDATE runs SET journal = NULL WHERE id = ?", (run_id,))
    for column, value in (("remembered", record.remembered_json),
                          ("policy", record.policy_json),
                          ("sandbox", record.sandbox_json)):  # fmt: skip
        if value is not None:
            db.execute(f"UPDATE runs SET {column} = ? WHERE id = ?", (value, run_id))


def _insert_step(db: SqlConnection, run_id: str, record: StepRecord) -> None:
    usage = usage_values(record.usage)
    db.execute(
        "INSERT INTO steps (run_id, step, started_at, finished_at, input_tokens,"
        " output_tokens, cache_read_tokens, cache_write_tokens, reasoning_tokens,"
        " cost_micros) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            run_id,
            record.step,
            record.started_at,
            record.finished_at,
            *usage,
            record.step_cost_micros,
        ),
    )
    db.execute(
        "UPDATE runs SET steps = steps + 1, input_tokens = input_tokens + ?,"
        " output_tokens = output_tokens + ?, cache_read_tokens = cache_read_tokens + ?,"
        " cache_write_tokens = cache_write_tokens + ?,"
        " reasoning_tokens = reasoning_tokens + ? WHERE id = ?",
        (*usage, run_id),
    )
    insert_messages(db, run_id, record.step, record.messages)
    db.executemany(
        "INSERT INTO tool_calls (run_id, step, seq, call_id, name, arguments, result,"
        " is_error, changed, kind, duration, error) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (
                run_id,
                record.step,
                seq,
                c.call_id,
                c.name,
                c.arguments_json,
                c.result,
                int(c.is_error),
                json.dumps(list(c.changed)),
                c.kind,
                c.duration,
                c.error,
            )
            for seq, c in enumerate(record.tool_calls, start=1)
        ],
    )


def insert_messages(db: SqlConnection, run_id: str, step: int, messages: Sequence[Message]) -> None:
    """Append messages to the run's conversation, numbered on from its last."""
    if not messages:
        return
    (count,) = db.execute(
        "SELECT coalesce(max(seq), 0) FROM messages WHERE run_id = ?", (run_id,)
    ).fetchone()
    db.executemany(
        "INSERT INTO messages (run_id, seq, step, role, body) VALUES (?, ?, ?, ?, ?)",
        [
            (run_id, seq, step, m.role, m.model_dump_json())
            for seq, m in enumerate(messages, start=count + 1)
        ],
    )


def insert_events(db: SqlConnection, run_id: str, events: Sequence[EventRow]) -> None:
    """Append events to the run's, numbered on from its last."""
    if not events:
        return
    (last,) = db.execute(
        "SELECT coalesce(max(seq), 0) FROM events WHERE run_id = ?", (run_id,)
    ).fetchone()
    db.executemany(
        "INSERT INTO events (run_id, seq, step, kind, at, data) VALUES (?, ?, ?, ?, ?, ?)",
        [
            (run_id, seq, e.step, e.kind, e.at, e.data_json)
            for seq, e in enumerate(events, start=last + 1)
        ],
    )


def insert_sandbox_events(
    db: SqlConnection, run_id: str, step: int, rows: Sequence[SandboxEventRow]
) -> None:
    """Append what the sandbox did in one record, numbered on from the run's last."""
    if not rows:
        return
    (last,) = db.execute(
        "SELECT coalesce(max(seq), 0) FROM sandbox_events WHERE run_id = ?", (run_id,)
    ).fetchone()
    db.executemany(
        "INSERT INTO sandbox_events (run_id, seq, step, call_id, kind, backend, detail, at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (run_id, seq, step, e.call_id, e.kind, e.backend, e.detail_json, e.at)
            for seq, e in enumerate(rows, start=last + 1)
        ],
    )


def insert_mcp_events(
    db: SqlConnection, run_id: str, step: int, rows: Sequence[McpEventRow]
) -> None:
    """Append what the run's MCP servers did, numbered on from the run's last."""
    if not rows:
        return
    (last,) = db.execute(
        "SELECT coalesce(max(seq), 0) FROM mcp_events WHERE run_id = ?", (run_id,)
    ).fetchone()
    db.executemany(
        "INSERT INTO mcp_events (run_id, seq, step, server, kind, detail, at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)",
        [
            (run_id, seq, step, e.server, e.kind, e.detail_json, e.at)
            for seq, e in enumerate(rows, start=last + 1)
        ],
    )


def _insert_compactions(db: SqlConnection, run_id: str, record: StepRecord) -> None:
    if record.compactions:
        (last,) = db.execute(
            "SELECT coalesce(max(seq), 0) FROM compactions WHERE run_id = ?", (run_id,)
        ).fetchone()
        db.executemany(
            "INSERT INTO compactions (run_id, seq, step, kind, message, text, at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            [
                (run_id, seq, c.step, c.kind, c.message, c.text, c.at)
                for seq, c in enumerate(record.compactions, start=last + 1)
            ],
        )
    extra = usage_values(record.extra_usage)
    if any(extra):
        db.execute(
            "UPDATE runs SET input_tokens = input_tokens + ?, output_tokens = output_tokens + ?,"
            " cache_read_tokens = cache_read_tokens + ?,"
            " cache_write_tokens = cache_write_tokens + ?,"
            " reasoning_tokens = reasoning_tokens + ? WHERE id = ?",
            (*extra, run_id),
        )


def insert_tree_events(
    db: SqlConnection, run_id: str, step: int, rows: Sequence[TreeEventRow]
) -> None:
    """Append what an agent did to its tree's events, numbered on from the tree's last."""
    if not rows:
        return
    found = db.execute("SELECT root_id FROM runs WHERE id = ?", (run_id,)).fetchone()
    if found is None or found[0] is None:
        raise StorageError(f"run {run_id!r} is not an agent of a tree; it has no tree events")
    root_id = found[0]
    (last,) = db.execute(
        "SELECT coalesce(max(seq), 0) FROM tree_events WHERE root_id = ?", (root_id,)
    ).fetchone()
    db.executemany(
        "INSERT INTO tree_events (root_id, seq, run_id, step, kind, detail, at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)",
        [
            (root_id, seq, run_id, step, e.kind, e.detail_json, e.at)
            for seq, e in enumerate(rows, start=last + 1)
        ],
    )


def _finish(db: SqlConnection, run_id: str, finish: Finish) -> None:
    db.execute(
        "UPDATE runs SET status = 'finished', outcome = ?, finished_at = ?, error = ? WHERE id = ?",
        (finish.outcome, finish.finished_at, finish.error_json, run_id),
    )


def reopen(
    db: SqlConnection, run_id: str, contract_json: str, said: Message | None, event: EventRow
) -> None:
    """A run that stopped without success made to go on: running again, under the contract
    ``contract_json`` (its new budget), with ``said`` as a user turn after its last step and
    ``event`` (its continuation) stored; its outcome, end and error cleared."""
    found = db.execute("SELECT status, outcome, steps FROM runs WHERE id = ?", (run_id,)).fetchone()
    if found is None:
        raise ResumeError(f"no run {run_id!r} in the store")
    status, outcome, steps = found
    if status != "finished" or outcome == "success":
        raise ResumeError(
            f"run {run_id!r} is {outcome or status}: only a run that stopped without success "
            "can be continued"
        )
    db.execute(
        "UPDATE runs SET status = 'running', outcome = NULL, finished_at = NULL, error = NULL,"
        " contract = ? WHERE id = ?",
        (contract_json, run_id),
    )
    if said is not None:
        insert_messages(db, run_id, steps, [said])
    insert_events(db, run_id, [event])
