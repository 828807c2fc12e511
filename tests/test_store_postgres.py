"""What only the PostgreSQL store has: leases that expire and fence, a server that restarts or
goes away, its errors, and `ioh` against a `postgresql://` store. The behaviour both backends
share is the conformance suite (tests/test_store.py, tests/test_trace.py)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

import psycopg
import pytest

import support
from _postgres import PASSWORD_ROLE, PostgresCluster
from _stores import StoreFactory
from io_harness import (
    CompletionRequest,
    CompletionResponse,
    ConfigError,
    Containment,
    Decision,
    Harness,
    Policy,
    ResumeError,
    RunOutcome,
    StorageError,
    Store,
    TaskContract,
    WorkspaceFileContains,
    resume,
    run,
)
from io_harness.cli import main
from io_harness.messages import Message
from io_harness.store._records import McpEventRow, StepRecord
from io_harness.store._schema import SCHEMA_VERSION
from io_harness.testing import ScriptedProvider, call, reply
from support import eventually, line_from

LISTING = reply(calls=[call("list_dir")])


contract = partial(support.contract, goal="look around", file="never.txt", needle="x", max_steps=3)
"""The task of the runs here: done when never.txt holds ``x`` (most never write it)."""


def sql(url: str, statement: str, *params: object) -> list[tuple[object, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        cursor = conn.execute(statement.replace("?", "%s").encode(), params)
        return cursor.fetchall() if cursor.description else []


@pytest.fixture
def opened(postgres_url: str) -> Iterator[list[Store]]:
    """Stores a test opens, closed after it (before its database is dropped)."""
    stores: list[Store] = []
    yield stores
    for store in stores:
        store.close()


def open_store(stores: list[Store], url: str, **options: float) -> Store:
    store = Store.open(url, **options)  # type: ignore[arg-type]
    stores.append(store)
    return store


async def stopped_at_step(root: Path, store: Store, run_id: str = "r", steps: int = 0) -> None:
    """A run ``run_id`` whose process stopped after ``steps`` committed steps."""
    script: list[object] = [LISTING] * steps + [KeyboardInterrupt()]
    with pytest.raises(KeyboardInterrupt):
        await run(contract(root, max_steps=5), ScriptedProvider(script), store=store, run_id=run_id)  # type: ignore[arg-type]


def next_step(store: Store, run_id: str) -> StepRecord:
    stored = store.load_run(run_id)
    return StepRecord(
        step=stored.steps + 1,
        started_at=0.0,
        finished_at=0.0,
        messages=[Message(role="assistant")],
    )


# -- the database's own checks ----------------------------------------------------------


def test_a_new_store_records_its_format_and_a_lease_table(postgres_url: str) -> None:
    Store.open(postgres_url).close()

    assert sql(postgres_url, "SELECT version FROM store_format") == [(SCHEMA_VERSION,)]
    assert sql(postgres_url, "SELECT count(*) FROM leases") == [(0,)]
    Store.open(postgres_url).close()  # a second open finds it as it is
    assert sql(postgres_url, "SELECT count(*) FROM store_format") == [(1,)]


def test_two_processes_opening_one_new_database_create_it_once(postgres_url: str) -> None:
    opening = f"from io_harness import Store\nStore.open({postgres_url!r}).close()\n"
    procs = [subprocess.Popen([sys.executable, "-c", opening]) for _ in range(3)]

    assert [proc.wait(timeout=120) for proc in procs] == [0, 0, 0]
    assert sql(postgres_url, "SELECT version FROM store_format") == [(SCHEMA_VERSION,)]


def test_store_errors_are_storage_errors_with_a_one_line_reason(
    postgres_url: str, postgres_cluster: PostgresCluster
) -> None:
    sql(postgres_url, f"CREATE ROLE {PASSWORD_ROLE} LOGIN PASSWORD 'right-password'")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    base = postgres_cluster.url().rsplit("/", 1)[0]
    refused = {
        f"postgresql://postgres@127.0.0.1:{closed}/x": "Connection refused",
        f"postgresql://{PASSWORD_ROLE}:wrong-password@127.0.0.1:{postgres_cluster.port}/postgres":
            "password authentication failed",
        f"{base}/no_such_database": 'database "no_such_database" does not exist',
    }  # fmt: skip

    for url, reason in refused.items():
        with pytest.raises(StorageError) as failed:
            Store.open(url)
        message = str(failed.value)
        assert reason in message and "\n" not in message, message
        assert message.startswith("cannot open the store postgresql://")
        assert "wrong-password" not in message


# -- leases ------------------------------------------------------------------------------


async def test_a_writer_whose_lease_expired_and_was_taken_cannot_write_the_run(
    project: Path, postgres_url: str, opened: list[Store]
) -> None:
    # A never renews in time: its heartbeat comes long after its lease expires.
    late = open_store(opened, postgres_url, lease_seconds=0.5, heartbeat_seconds=3600)
    other = open_store(opened, postgres_url)
    await stopped_at_step(project, other, steps=1)
    before = other.trace("r")
    step = next_step(other, "r")

    with late.lease("r"):
        assert other.driven("r")
        assert eventually(lambda: not other.driven("r"))  # A stopped renewing: lost
        with other.lease("r"):  # another writer takes the run
            writes: dict[str, Callable[[], None]] = {
                "commit": lambda: late.commit_step("r", step),
                "journal": lambda: late.journal_step("r", step.step, "{}"),
                "mcp": lambda: late.append_mcp_events("r", 1, [McpEventRow("s", "close", "{}", 1)]),
            }
            for name, write in writes.items():
                with pytest.raises(StorageError, match="lost its lease on run 'r'"):
                    write()
                assert other.trace("r") == before, name
        # The taker let go, but the lease A held is gone for good.
        with pytest.raises(StorageError, match="lost its lease"):
            late.commit_step("r", step)
    assert other.trace("r") == before
    # Each take bumps the generation: the run's (1), A's (2), the taker's (3), the next (4).
    assert sql(postgres_url, "SELECT generation FROM leases WHERE run_id = 'r'") == [(3,)]
    with other.lease("r"):
        other.commit_step("r", step)
    assert sql(postgres_url, "SELECT generation FROM leases WHERE run_id = 'r'") == [(4,)]
    assert other.load_run("r").steps == 2


async def test_a_writer_that_lost_its_trees_root_cannot_write_a_sub_agent(
    project: Path, postgres_url: str, opened: list[Store]
) -> None:
    """A child's lease alone is not enough: a driver whose tree's root was taken over (it
    stalled past the root's lease) cannot go on writing the root's children."""
    store = open_store(opened, postgres_url)

    child_working = asyncio.Event()

    async def answer(request: CompletionRequest) -> CompletionResponse:
        goal = str(request.messages[0].text).split("\n\n", 1)[0]
        turn = sum(m.role == "assistant" for m in request.messages)
        if goal == "write a":
            child_working.set()
            await asyncio.Event().wait()  # the tree is stopped while its child works
        verify = {"kind": "workspace_file_contains", "file": "a.txt", "needle": "done"}
        turns = [
            reply("splitting", [call("spawn_agent", goal="write a", verify=verify)]),
            reply("finishing", [call("write_file", path="root.txt", content="done\n")]),
        ]
        return turns[turn]

    harness = Harness(ScriptedProvider(answer), store=store, containment=Containment(max_depth=1))
    task = TaskContract.workspace("coordinate", project, WorkspaceFileContains("root.txt", "done"))
    running = asyncio.ensure_future(harness.run(task, run_id="root"))
    await child_working.wait()
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    late = open_store(opened, postgres_url, lease_seconds=0.5, heartbeat_seconds=3600)
    other = open_store(opened, postgres_url)
    step = next_step(other, "root.1")

    with late.lease("root"):
        assert eventually(lambda: not other.driven("root"))  # the root's lease ran out
        refused = pytest.raises(StorageError, match="lost its lease on run 'root', the root")
        with late.lease("root.1"), other.lease("root"), refused:  # another writer took it
            late.commit_step("root.1", step)
    assert other.load_run("root.1").steps == 0


async def test_a_writer_stalled_inside_a_transaction_does_not_hold_up_a_taker_for_long(
    project: Path, postgres_url: str, opened: list[Store]
) -> None:
    """A writer stopped mid-commit holds the lease row's lock; a taker gives up after about a
    lease's time with a StorageError (a worker tries again later) instead of hanging."""
    store = open_store(opened, postgres_url, lease_seconds=1.0)
    await stopped_at_step(project, store, steps=1)
    with store.lease("r"):
        pass  # the lease row exists now, released
    with psycopg.connect(postgres_url) as stalled:  # a transaction left open, as if stopped
        stalled.execute("SELECT * FROM leases WHERE run_id = 'r' FOR UPDATE")
        taker = open_store(opened, postgres_url, lease_seconds=1.0)
        with (
            pytest.raises(StorageError, match="cannot take the lease on run 'r'"),
            taker.lease("r"),
        ):
            pass
        stalled.rollback()
    with taker.lease("r"):  # once the stalled writer is gone, the run is taken at once
        assert taker.driven("r")


async def test_a_writer_that_lost_its_lease_cannot_decide_or_perform_the_runs_deferred_act(
    project: Path, postgres_url: str, opened: list[Store]
) -> None:
    late = open_store(opened, postgres_url, lease_seconds=0.5, heartbeat_seconds=3600)
    other = open_store(opened, postgres_url)
    write = reply(calls=[call("write_file", path="never.txt", content="x")])
    waiting = await run(
        contract(project), ScriptedProvider([write]), store=other, policy=Policy.guarded()
    )
    assert waiting.request_id is not None
    (pending,) = other.approvals(waiting.run_id)

    with late.lease(waiting.run_id):
        assert eventually(lambda: not other.driven(waiting.run_id))
        with other.lease(waiting.run_id):
            with pytest.raises(StorageError, match="lost its lease"):
                late.decide(waiting.request_id, Decision.approve(by="stale"))
            with pytest.raises(StorageError, match="lost its lease"):
                late.mark_performing(pending, Decision.approve(by="stale"))

    assert other.approvals(waiting.run_id) == [pending]  # still pending, undecided
    other.decide(waiting.request_id, Decision.deny("no", by="carol"))
    done = await resume(waiting.run_id, ScriptedProvider([reply("stopping")]), store=other)
    assert done.outcome is not RunOutcome.SUCCESS and not (project / "never.txt").exists()


async def test_a_lease_that_expired_unclaimed_still_fences_its_writer(
    project: Path, postgres_url: str, opened: list[Store]
) -> None:
    late = open_store(opened, postgres_url, lease_seconds=0.5, heartbeat_seconds=3600)
    await stopped_at_step(project, late, steps=1)
    before = late.trace("r")

    with late.lease("r"):
        assert eventually(lambda: not late.driven("r"))
        with pytest.raises(StorageError, match="lost its lease"):
            late.commit_step("r", next_step(late, "r"))

    assert late.trace("r") == before


async def test_a_heartbeat_keeps_a_lease_past_its_expiry(
    project: Path, postgres_url: str, opened: list[Store]
) -> None:
    holder = open_store(opened, postgres_url, lease_seconds=0.6, heartbeat_seconds=0.1)
    other = open_store(opened, postgres_url)
    await stopped_at_step(project, holder, steps=1)

    with holder.lease("r"):
        await asyncio.sleep(2.0)  # more than three leases long: only the heartbeat keeps it
        assert other.driven("r")
        with pytest.raises(ResumeError, match="being driven by another writer"), other.lease("r"):
            pass
        holder.commit_step("r", next_step(holder, "r"))

    assert not other.driven("r")  # given back at the block's end, not left to expire
    assert holder.load_run("r").steps == 2


async def test_a_writer_without_the_lease_cannot_write_a_run_another_drives(
    project: Path, postgres_url: str, opened: list[Store]
) -> None:
    driver, intruder = open_store(opened, postgres_url), open_store(opened, postgres_url)
    await stopped_at_step(project, driver, steps=1)
    before = driver.trace("r")

    with driver.lease("r"):
        with pytest.raises(StorageError, match="driven by another writer"):
            intruder.commit_step("r", next_step(intruder, "r"))
        with pytest.raises(StorageError, match="driven by another writer"):
            intruder.journal_step("r", 2, "{}")

    assert driver.trace("r") == before
    intruder.commit_step("r", next_step(intruder, "r"))  # nobody drives it now
    assert driver.load_run("r").steps == 2


async def test_an_operators_decision_is_stored_while_the_run_is_held_elsewhere(
    project: Path, postgres_url: str, opened: list[Store]
) -> None:
    store, operator = open_store(opened, postgres_url), open_store(opened, postgres_url)
    waiting = await run(
        contract(project),
        ScriptedProvider([reply(calls=[call("write_file", path="never.txt", content="x")])]),
        store=store,
        policy=Policy.guarded(),
    )
    assert waiting.request_id is not None

    with store.lease(waiting.run_id):  # a resume reads the decision when it runs
        operator.decide(waiting.request_id, Decision.approve(by="carol"))

    done = await resume(waiting.run_id, ScriptedProvider([]), store=store)
    assert done.outcome is RunOutcome.SUCCESS


STOPPED_WRITER = """
import asyncio, sys
from io_harness import Budget, StorageError, Store, TaskContract, WorkspaceFileContains, run
from io_harness.testing import ScriptedProvider, call, reply

store = Store.open({url!r}, lease_seconds=1, heartbeat_seconds=0.2)

def answer(request):
    print("asking", flush=True)
    sys.stdin.readline()  # the test stops this process here, past its lease
    return reply(calls=[call("write_file", path="late.txt", content="x")])

contract = TaskContract.workspace(
    "g", {root!r}, WorkspaceFileContains("never.txt", "x"), budget=Budget(max_steps=3)
)
try:
    asyncio.run(run(contract, ScriptedProvider(answer), store=store, run_id="r"))
except StorageError as exc:
    print("refused:", exc, flush=True)
else:
    print("committed", flush=True)
store.close()
"""


@pytest.mark.parametrize("taken_over", [True, False], ids=["taken-over", "expired"])
def test_a_writer_stopped_past_its_lease_then_continued_commits_nothing(
    project: Path, postgres_url: str, opened: list[Store], taken_over: bool
) -> None:
    script = STOPPED_WRITER.format(url=postgres_url, root=str(project))
    proc = subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert line_from(proc) == "asking\n"
    store = open_store(opened, postgres_url)
    proc.send_signal(signal.SIGSTOP)
    try:
        assert eventually(lambda: not store.driven("r"))  # its heartbeat is stopped too
        before = store.trace("r")
        with store.lease("r") if taken_over else contextlib.nullcontext():
            proc.send_signal(signal.SIGCONT)
            out, _ = proc.communicate("go\n", timeout=120)
    finally:
        proc.send_signal(signal.SIGCONT)

    assert "refused:" in out and "lost its lease on run 'r'" in out, out
    after = store.trace("r")
    assert after == before and after.run.steps == 0 and after.tool_calls == ()
    finished = asyncio.run(resume("r", ScriptedProvider([LISTING] * 3), store=store))
    assert finished.outcome is RunOutcome.STEP_CAP_REACHED
    assert [s.step for s in store.trace("r").steps] == [1, 2, 3]


# -- the server restarts or goes away --------------------------------------------------


async def test_a_run_goes_on_across_a_database_restart(
    project: Path, postgres_url: str, postgres_cluster: PostgresCluster, opened: list[Store]
) -> None:
    store = open_store(opened, postgres_url, lease_seconds=30)
    asked: list[int] = []

    def answer(request: object) -> object:
        asked.append(len(asked) + 1)
        if len(asked) == 2:
            postgres_cluster.restart()  # every connection of the pool is cut
        return LISTING

    try:
        result = await run(contract(project, max_steps=4), ScriptedProvider(answer), store=store)  # type: ignore[arg-type]
        run_id = result.run_id
    except StorageError as exc:  # a connection cut inside a commit: the run stops cleanly
        assert "\n" not in str(exc)
        (run_id,) = [r.id for r in store.runs()]
        assert eventually(lambda: not store.driven(run_id))
        result = await resume(run_id, ScriptedProvider([LISTING] * 4), store=store)

    assert result.outcome is RunOutcome.STEP_CAP_REACHED
    trace = store.trace(run_id)
    assert [s.step for s in trace.steps] == [1, 2, 3, 4]
    assert [c.step for c in trace.provider_calls] == [1, 2, 3, 4]
    assert [m.role for m in trace.messages].count("assistant") == 4


async def test_a_run_whose_database_went_away_fails_cleanly_and_resumes(
    project: Path, postgres_url: str, postgres_cluster: PostgresCluster, opened: list[Store]
) -> None:
    store = open_store(opened, postgres_url, lease_seconds=2)
    asked: list[int] = []

    def answer(request: object) -> object:
        asked.append(1)
        if len(asked) == 2:
            postgres_cluster.stop()
        return LISTING

    try:
        with pytest.raises(StorageError) as failed:
            await run(
                contract(project, max_steps=4),
                ScriptedProvider(answer),  # type: ignore[arg-type]
                store=store,
                run_id="r",
            )
    finally:
        postgres_cluster.start()

    assert "\n" not in str(failed.value) and "postgresql://" in str(failed.value)
    assert eventually(lambda: not store.driven("r"))
    assert [s.step for s in store.trace("r").steps] == [1]
    result = await resume("r", ScriptedProvider([LISTING] * 3), store=store)
    assert result.outcome is RunOutcome.STEP_CAP_REACHED
    trace = store.trace("r")
    assert [s.step for s in trace.steps] == [1, 2, 3, 4]
    assert [m.role for m in trace.messages].count("assistant") == 4


# -- ioh against a PostgreSQL store ------------------------------------------------------


async def test_ioh_lists_shows_and_approves_runs_in_a_postgresql_store(
    project: Path,
    postgres_url: str,
    opened: list[Store],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "250")
    store = open_store(opened, postgres_url)
    write = reply(calls=[call("write_file", path="never.txt", content="x")])
    waiting = await Harness(ScriptedProvider([write]), store=store, policy=Policy.guarded()).run(
        contract(project), run_id="asks"
    )
    await stopped_at_step(project, store, run_id="cut", steps=1)
    assert waiting.request_id is not None

    assert main(["runs", "--store", postgres_url]) == 0
    listed = capsys.readouterr().out
    assert "asks" in listed and "awaiting" in listed
    assert "cut" in listed and "interrupted" in listed
    assert main(["pending", "--store", postgres_url]) == 0
    assert waiting.request_id in capsys.readouterr().out
    assert main(["show", "asks", "--store", postgres_url]) == 0
    shown = capsys.readouterr().out
    assert "deferred by nobody write never.txt" in shown and "outcome: awaiting" in shown
    assert main(["approve", "asks", "--no-resume", "--store", postgres_url]) == 0
    assert "approved: write never.txt" in capsys.readouterr().out

    done = await Harness(ScriptedProvider([]), store=store).resume("asks")
    assert done.outcome is RunOutcome.SUCCESS
    assert main(["show", "asks", "--store", postgres_url]) == 0
    assert "success" in capsys.readouterr().out
    assert main(["pending", "--store", postgres_url]) == 0
    assert waiting.request_id not in capsys.readouterr().out


def test_ioh_says_a_postgresql_store_it_cannot_reach_in_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]

    assert main(["runs", "--store", f"postgresql://postgres@127.0.0.1:{closed}/x"]) != 0
    err = capsys.readouterr().err
    assert "cannot open the store" in err and "Traceback" not in err
    assert len([line for line in err.splitlines() if line.strip()]) <= 2, err


def test_importing_io_harness_does_not_load_psycopg() -> None:
    probe = textwrap.dedent(
        """
        import sys
        import io_harness
        from io_harness import Store
        Store.memory().close()
        print(sorted(m for m in sys.modules if m.startswith(("psycopg", "psycopg_pool"))))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    )
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://someone:sekret@127.0.0.1:1/runs",
        "postgresql://someone@127.0.0.1:1/runs?password=sekret",
        "postgresql://someone:sekret%zz@127.0.0.1:1/runs",
        "postgresql://someone@127.0.0.1:1/runs?sslpassword=sekret&password=a%zzsekret",
    ],
)
def test_ioh_never_prints_a_database_password(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["runs", "--store", url]) == 2
    assert main(["resume", "r", "--store", url]) == 2
    out, err = capsys.readouterr()
    assert "sekret" not in out + err
    assert "someone@127.0.0.1:1/runs" in err


async def test_a_label_holding_a_nul_is_refused(project: Path, store_factory: StoreFactory) -> None:
    with pytest.raises(ConfigError, match="NUL"):
        await run(
            contract(project),
            ScriptedProvider([LISTING]),
            store=store_factory(),
            labels={"team": "a\x00b"},
        )


def test_a_postgresql_store_without_psycopg_names_the_extra_to_install(tmp_path: Path) -> None:
    """Where psycopg is not installed, a postgresql:// store is one line saying what to do."""
    blocker = tmp_path / "psycopg.py"
    blocker.write_text("raise ImportError('no psycopg here', name='psycopg')\n")
    done = subprocess.run(
        [Path(sys.executable).parent / "ioh", "runs", "--store", "postgresql://x@127.0.0.1/y"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
        check=False,
    )
    assert done.returncode == 2
    assert "pip install 'io-harness[postgres]'" in done.stderr
    assert "internal error" not in done.stderr


async def test_a_store_opened_with_credentials_in_its_url_shows_and_stores_none(
    postgres_url: str, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The server here trusts every connection, so the credentials open it and must still
    appear nowhere: not in what the store says of itself, its errors, ioh, nor any column."""
    url = postgres_url.replace("postgres@", "postgres:SECRETMARK@", 1)
    url += "?application_name=ioh&sslpassword=SECRETMARK"
    with Store.open(url) as store:
        await run(
            contract(project, max_steps=1), ScriptedProvider([LISTING]), store=store, run_id="r1"
        )
        assert "SECRETMARK" not in f"{store!r} {store.location}"  # type: ignore[attr-defined]
        with pytest.raises(ResumeError) as unknown:
            store.load_run("never")
        assert "SECRETMARK" not in str(unknown.value)
    for argv in (["runs"], ["show", "r1"], ["show", "nope"]):
        main([*argv, "--store", url])
    out, err = capsys.readouterr()
    assert "r1" in out and "SECRETMARK" not in out + err
    tables = [
        row[0]
        for row in sql(postgres_url, "SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
    ]
    for table in tables:
        for row in sql(postgres_url, f"SELECT * FROM {table}"):
            assert not any("SECRETMARK" in str(value) for value in row), (table, row)
