"""A store inside a run's workspace is the harness's alone: no tool or command of the run
reads it or changes it, so nothing the agent does changes its own stored policy.

``ioh`` keeps runs in ``.ioh/runs.db`` under the folder it runs in, which is often
the workspace itself; a malicious model tries every way to read another run's
transcript from it or to rewrite the policy the next resume takes.
"""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

import pytest

from io_harness import (
    Harness,
    Policy,
    RunOutcome,
    SandboxConfig,
    Store,
    TaskContract,
    ToolResult,
    WorkspaceFileContains,
)
from io_harness.testing import ScriptedProvider, call, reply

POLICY = Policy.permissive().layer("app").deny_write("secret.txt")


def observations(store: Store, run_id: str) -> list[str]:
    return [
        block.content
        for message in store.load_run(run_id).messages
        for block in message.content
        if isinstance(block, ToolResult)
    ]


def stored_policy(db: Path, run_id: str) -> str:
    with sqlite3.connect(db) as connection:
        (policy,) = connection.execute("SELECT policy FROM runs WHERE id = ?", (run_id,)).fetchone()
    return str(policy)


async def test_no_file_tool_reads_writes_or_lists_a_store_inside_the_workspace(
    project: Path,
) -> None:
    db = project / ".ioh" / "runs.db"
    store = Store.open(db)
    earlier = await Harness(ScriptedProvider([reply("x")]), store=store).run(
        TaskContract.workspace(
            "the other run's hunter2 goal", project, WorkspaceFileContains("x", "")
        )
    )
    calls = [
        call("read_file", path=".ioh/runs.db"),
        call("read_file", path="./.ioh//runs.db-wal"),
        call("write_file", path=".ioh/runs.db", content="x"),
        call("write_file", path=".ioh/runs.db-journal", content="x"),
        call("edit_file", path=".ioh/runs.db", search="a", replace="b"),
        call("list_dir", path=".ioh/runs.db.leases"),
        call("grep", pattern="hunter2"),
        call("find", name_glob="*runs.db*"),
        call("list_dir", path=".ioh"),
        call("write_file", path="done.txt", content="done"),
    ]
    provider = ScriptedProvider([reply(calls=calls), reply("done")])

    result = await Harness(provider, store=store, policy=POLICY).run(
        TaskContract.workspace("g", project, WorkspaceFileContains("done.txt", "done"))
    )

    assert result.outcome is RunOutcome.SUCCESS
    seen = observations(store, result.run_id)
    assert all("the harness's own store, private to it" in text for text in seen[:6]), seen
    grepped, found, listed = seen[6:9]
    assert grepped == "no matches for 'hunter2'" and "no files match" in found
    assert listed == ".ioh is empty"
    assert stored_policy(db, result.run_id) == POLICY.model_dump_json()
    assert store.load_run(earlier.run_id).goal == "the other run's hunter2 goal"
    store.close()


TAMPER = """
import sqlite3, sys
try:
    db = sqlite3.connect('.ioh/runs.db')
    print('runs', db.execute('SELECT goal FROM runs').fetchall())
    db.execute("UPDATE runs SET policy = '{}'")
    db.commit()
    print('tampered')
except Exception as exc:
    print('refused', type(exc).__name__, exc)
"""


@pytest.mark.skipif(sys.platform != "linux", reason="bubblewrap is Linux's")
async def test_a_command_neither_reads_the_store_nor_rewrites_the_runs_stored_policy(
    project: Path,
) -> None:
    db = project / ".ioh" / "runs.db"
    store = Store.open(db)
    await Harness(ScriptedProvider([reply("x")]), store=store).run(
        TaskContract.workspace("hunter2 goal", project, WorkspaceFileContains("x", ""))
    )
    calls = [
        call("exec", argv=[sys.executable, "-c", TAMPER]),
        call("write_file", path="done.txt", content="done"),
    ]
    provider = ScriptedProvider([reply(calls=calls), reply("done")])
    contract = TaskContract.workspace(
        "g", project, WorkspaceFileContains("done.txt", "done"), tools=["exec"]
    )
    harness = Harness(
        provider, store=store, policy=POLICY, sandbox=SandboxConfig(backends=("bubblewrap",))
    )

    result = await harness.run(contract)

    assert result.outcome is RunOutcome.SUCCESS
    printed = observations(store, result.run_id)[0].split("\nstdout", 1)[1]
    assert "tampered" not in printed and "hunter2" not in printed, printed
    assert "refused" in printed
    assert stored_policy(db, result.run_id) == POLICY.model_dump_json()
    store.close()


async def test_a_sandbox_that_cannot_hide_the_store_refuses_the_command(project: Path) -> None:
    db = project / ".ioh" / "runs.db"
    store = Store.open(db)
    calls = [
        call("exec", argv=[sys.executable, "-c", TAMPER]),
        call("write_file", path="done.txt", content="done"),
    ]
    provider = ScriptedProvider([reply(calls=calls), reply("done")])
    contract = TaskContract.workspace(
        "g", project, WorkspaceFileContains("done.txt", "done"), tools=["exec"]
    )
    floor = SandboxConfig(backends=("floor",), accept_floor=True, network="open")
    harness = Harness(provider, store=store, policy=POLICY, sandbox=floor)

    result = await harness.run(contract)

    assert result.outcome is RunOutcome.SUCCESS
    ran = observations(store, result.run_id)[0]
    assert "could not start" in ran and "the floor sandbox cannot hide it" in ran
    assert stored_policy(db, result.run_id) == POLICY.model_dump_json()
    store.close()
