"""The trace as typed records: columns by name, JSON columns decoded, old rows and bad rows.

Every test runs on each store backend (SQLite, PostgreSQL): see tests/_stores.py.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from _stores import StoreFactory
from io_harness import (
    NO_SANDBOX,
    ApprovalRequest,
    Decision,
    Policy,
    RunOutcome,
    StorageError,
    Store,
    TaskContract,
    ToolCallTrace,
    Usage,
    VerificationResult,
    WorkspaceFileContains,
    run,
)
from io_harness.testing import ScriptedProvider, call, reply

FIX = call("edit_file", path="pkg/calc.py", search="a - b", replace="a + b")


def fixing(project: Path) -> TaskContract:
    return TaskContract.workspace("fix add", project, WorkspaceFileContains("pkg/calc.py", "a + b"))


@pytest.fixture
def store(store_factory: StoreFactory) -> Store:
    """A store of the backend under test."""
    return store_factory()


async def test_each_row_is_a_record_named_by_its_columns_with_json_decoded(
    project: Path, store: Store
) -> None:
    usage = Usage(input_tokens=30, output_tokens=4)
    provider = ScriptedProvider([reply(calls=[FIX], usage=usage)])

    result = await run(fixing(project), provider, store=store, sandbox=NO_SANDBOX)
    trace = store.trace(result.run_id)

    assert result.outcome is RunOutcome.SUCCESS
    (step,) = trace.steps
    assert (step.step, step.usage) == (1, usage)
    (attempt,) = trace.provider_calls
    assert (attempt.attempt, attempt.provider, attempt.error_kind) == (1, "scripted", None)
    (edit,) = trace.tool_calls
    assert isinstance(edit, ToolCallTrace)
    assert (edit.seq, edit.name, edit.is_error, edit.kind) == (1, "edit_file", False, "builtin")
    assert edit.changed == ("pkg/calc.py",)
    assert edit.parsed_arguments == {"path": "pkg/calc.py", "search": "a - b", "replace": "a + b"}
    (check,) = trace.verifications
    assert check.passed is True and check.trigger == "file_changed"
    assert isinstance(check.parsed_result, VerificationResult) and check.parsed_result.passed
    started = trace.events[0]
    assert started.kind == "run_started" and started.data["run_id"] == result.run_id
    assert {(p.act, p.target, p.argv) for p in trace.permissions} >= {
        ("write", "pkg/calc.py", None)
    }
    assert trace.sandbox is not None and trace.sandbox.backend == "none"
    assert trace.memory == ()


async def test_an_approval_holds_its_request_and_the_decision_stored_on_it(
    project: Path, store: Store
) -> None:
    waiting = await run(
        fixing(project),
        ScriptedProvider([reply(calls=[FIX])]),
        store=store,
        policy=Policy.guarded(),
    )
    assert waiting.request_id is not None
    before = time.time()

    store.decide(waiting.request_id, Decision.deny("not now", by="carol"))

    (approval,) = store.trace(waiting.run_id).approvals
    assert isinstance(approval.request, ApprovalRequest)
    assert (approval.id, approval.status) == (waiting.request_id, "decided")
    assert approval.request.target == "pkg/calc.py" and approval.request.tool == "edit_file"
    assert approval.decision == Decision.deny("not now", by="carol")
    assert approval.decided_at is not None and before <= approval.decided_at <= time.time()


async def test_the_runs_memory_changes_are_in_its_trace_in_order(
    project: Path, store: Store, store_factory: StoreFactory
) -> None:
    result = await run(fixing(project), ScriptedProvider([reply(calls=[FIX])]), store=store)
    insert = (
        "INSERT INTO memory_log (workspace, key, op, value, run_id, step, call_id, at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
    )
    store_factory.sql(insert, "/w", "style", "set", "tabs", result.run_id, 1, "call_1_1", 5.0)
    store_factory.sql(insert, "/w", "other", "set", "x", "another-run", 1, "call_1_1", 6.0)
    store_factory.sql(insert, "/w", "style", "forget", "tabs", None, None, None, 7.0)
    store_factory.sql(insert, "/w", "old", "evict", "y", result.run_id, 2, "call_3_1", 8.0)

    memory = store.trace(result.run_id).memory

    assert [(m.key, m.op, m.value, m.step, m.call_id) for m in memory] == [
        ("style", "set", "tabs", 1, "call_1_1"),
        ("old", "evict", "y", 2, "call_3_1"),
    ]
    assert memory[0].seq < memory[1].seq and memory[0].workspace == "/w"


async def test_columns_an_older_store_left_empty_load_as_none(
    project: Path, store: Store, store_factory: StoreFactory
) -> None:
    result = await run(fixing(project), ScriptedProvider([reply(calls=[FIX])]), store=store)
    store_factory.sql("UPDATE tool_calls SET duration = NULL, error = NULL")
    store_factory.sql("UPDATE provider_calls SET served_model = NULL, time_to_first_token = NULL")
    store_factory.sql("UPDATE runs SET sandbox = NULL")

    trace = store.trace(result.run_id)

    assert (trace.tool_calls[0].duration, trace.tool_calls[0].error) == (None, None)
    assert trace.provider_calls[0].served_model is None
    assert trace.sandbox is None


async def test_a_row_that_does_not_load_is_a_storage_error_naming_its_table(
    project: Path, store: Store, store_factory: StoreFactory
) -> None:
    result = await run(fixing(project), ScriptedProvider([reply(calls=[FIX])]), store=store)
    store_factory.sql("UPDATE events SET data = 'not json' WHERE seq = 1")

    with pytest.raises(StorageError, match=f"run '{result.run_id}' holds a row of events"):
        store.trace(result.run_id)


async def test_an_unreadable_sandbox_record_is_shown_not_lost(
    project: Path, store: Store, store_factory: StoreFactory
) -> None:
    result = await run(fixing(project), ScriptedProvider([reply(calls=[FIX])]), store=store)
    store_factory.sql("UPDATE runs SET sandbox = '{broken'")

    sandbox = store.trace(result.run_id).sandbox

    assert sandbox is not None and (sandbox.backend, sandbox.why) == ("(unreadable)", "{broken")
