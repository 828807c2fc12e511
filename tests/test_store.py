"""The store conformance suite: each test that takes ``store_factory`` runs on SQLite and on
PostgreSQL (schema version, foreign databases, listing and its filters, concurrent readers,
a second writer, leases); the rest is what only a SQLite file has (WAL, a corrupt file, bytes
that are not UTF-8, a full disk, relative paths)."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import subprocess
import sys
from functools import partial
from pathlib import Path

import pytest

import support
from _stores import StoreFactory
from io_harness import (
    ResumeError,
    RunOutcome,
    StorageError,
    Store,
    TaskContract,
    WorkspaceFileContains,
    resume,
    run,
)
from io_harness.store._records import StepRecord
from io_harness.store._schema import SCHEMA_VERSION
from io_harness.store._sqlite import SqliteStore
from io_harness.testing import ScriptedProvider, call, reply
from support import eventually, line_from

contract = partial(support.contract, goal="look around", file="never.txt", needle="x", max_steps=3)
"""The task of the runs here: done when never.txt holds ``x`` (most never write it)."""


def listing() -> ScriptedProvider:
    return ScriptedProvider(lambda request: reply(calls=[call("list_dir")]))


def test_a_new_store_records_its_schema_version(tmp_path: Path) -> None:
    Store.open(tmp_path / "runs.db").close()

    with contextlib.closing(sqlite3.connect(tmp_path / "runs.db")) as db:
        assert db.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)


async def test_a_version_1_store_is_migrated_with_its_runs_intact(
    tmp_path: Path, store_factory: StoreFactory
) -> None:
    # A store as the first release wrote it: only the version 1 schema, one run in it.
    store_factory.create_at_version(1)
    store_factory.sql(
        "INSERT INTO runs (id, goal, contract, system_prompt, tools, provider, model, status,"
        " outcome, steps, input_tokens, output_tokens, started_at, finished_at)"
        " VALUES ('old', 'g', '{}', 's', '[]', 'scripted', 'm', 'finished', 'success', 2,"
        " 10, 5, 1.0, 2.0)"
    )

    store = store_factory()
    (old,) = store.runs()
    assert (old.id, old.tokens, old.cost_micros, old.unpriced_calls) == ("old", 15, 0, 0)
    result = await run(contract(tmp_path), listing(), store=store)
    # The trace selects every column by name: it loads only if the migrations added them.
    calls = store.trace(result.run_id).provider_calls
    assert calls and calls[0].cost_micros is None  # no prices given: unpriced
    assert [r.id for r in store.runs()] == [result.run_id, "old"]
    store_factory().close()  # a store at the current format opens as it is


def test_a_store_written_by_a_newer_version_is_refused(store_factory: StoreFactory) -> None:
    store_factory().close()
    store_factory.set_version(99)

    with pytest.raises(ResumeError, match="format 99, newer") as refused:
        store_factory()
    assert isinstance(refused.value, StorageError)  # it cannot be read either


def test_a_corrupt_store_is_a_storage_error(tmp_path: Path) -> None:
    (tmp_path / "runs.db").write_bytes(b"this is not a database" * 100)

    with pytest.raises(StorageError, match="not a readable io-harness store"):
        Store.open(tmp_path / "runs.db")


def test_a_database_of_another_program_is_refused(store_factory: StoreFactory) -> None:
    store_factory.sql("CREATE TABLE accounts (id INTEGER)")

    with pytest.raises(StorageError, match="not an io-harness store"):
        store_factory()
    assert store_factory.sql("SELECT count(*) FROM accounts") == [(0,)]


async def test_runs_are_listed_newest_first_with_their_totals(
    project: Path, store_factory: StoreFactory
) -> None:
    store = store_factory()
    first = await run(contract(project, max_steps=1), listing(), store=store, run_id="first")
    second = await run(contract(project, max_steps=2), listing(), store=store, run_id="second")

    runs = store.runs()

    assert [r.id for r in runs] == ["second", "first"]
    assert runs[0].steps == second.steps == 2
    assert runs[1].outcome == first.outcome.value == "step_cap_reached"
    assert runs[0].status == "finished" and runs[0].finished_at is not None
    assert runs[0].goal == "look around"
    assert [r.id for r in store.runs(limit=1)] == ["second"]


async def test_restart_clock_stamps_the_start_once_and_drops_its_label(
    store_factory: StoreFactory, project: Path
) -> None:
    store = store_factory()
    waiting = {"ioh.queue.waiting": "1", "team": "a"}
    await run(contract(project, max_steps=1), listing(), store=store, run_id="q", labels=waiting)

    with store.lease("q"):
        assert store.restart_clock("q", "ioh.queue.waiting", at=4_000_000_000.0)
        assert not store.restart_clock("q", "ioh.queue.waiting", at=5_000_000_000.0)
    stored = store.load_run("q")
    assert stored.started_at == 4_000_000_000.0
    assert stored.labels == {"team": "a"}


async def test_runs_are_filtered_by_labels_and_by_status_or_outcome(
    project: Path, store_factory: StoreFactory
) -> None:
    store = store_factory()
    team = {"team": "a", "suite": "nightly"}
    await run(contract(project, max_steps=1), listing(), store=store, run_id="a1", labels=team)
    await run(
        contract(project, max_steps=1), listing(), store=store, run_id="a2", labels={"team": "a"}
    )
    await run(
        contract(project, max_steps=1), listing(), store=store, run_id="b1", labels={"team": "b"}
    )
    fixed = ScriptedProvider([reply(calls=[call("write_file", path="never.txt", content="x")])])
    await run(
        contract(project, max_steps=1), fixed, store=store, run_id="won", labels={"team": "b"}
    )
    stopped = ScriptedProvider([reply(calls=[call("list_dir")]), KeyboardInterrupt()])
    with pytest.raises(KeyboardInterrupt):
        await run(contract(project, max_steps=3), stopped, store=store, run_id="cut", labels=team)

    def ids(**filters: object) -> list[str]:
        return [r.id for r in store.runs(**filters)]  # type: ignore[arg-type]

    assert ids(labels={"team": "a"}) == ["cut", "a2", "a1"]
    assert ids(labels={"team": "a", "suite": "nightly"}) == ["cut", "a1"]
    assert ids(labels={"team": "a", "suite": "weekly"}) == []
    assert ids(labels={"suite'": "x"}) == []  # a key is a value, never SQL
    assert ids(status="running") == ["cut"]
    assert ids(status="finished") == ["won", "b1", "a2", "a1"]
    assert ids(status="success") == ["won"]
    assert ids(status="step_cap_reached", labels={"team": "b"}) == ["b1"]
    assert ids(status="finished", limit=2) == ["won", "b1"]
    assert ids(labels={}) == ids() == ["cut", "won", "b1", "a2", "a1"]


async def test_another_connection_reads_a_run_while_it_is_being_written(
    project: Path, store_factory: StoreFactory
) -> None:
    writer = store_factory()
    reader = store_factory()
    seen: list[int] = []

    def observe(event: object) -> None:
        if getattr(event, "kind", "") == "step_finished":
            seen.append(reader.runs()[0].steps)

    result = await run(contract(project, max_steps=4), listing(), store=writer, observer=observe)

    assert seen == [1, 2, 3, 4]
    assert reader.trace(result.run_id).run.steps == 4


async def test_a_second_writer_is_refused_before_it_calls_the_model(
    project: Path, store_factory: StoreFactory
) -> None:
    first_store, second_store = store_factory(), store_factory()
    in_call, release = asyncio.Event(), asyncio.Event()

    async def slow(request: object) -> object:
        in_call.set()
        await release.wait()
        return reply(calls=[call("list_dir")])

    first = asyncio.create_task(
        run(contract(project, max_steps=1), ScriptedProvider(slow), store=first_store, run_id="r")  # type: ignore[arg-type]
    )
    await in_call.wait()
    intruder = ScriptedProvider([reply(calls=[call("write_file", path="x", content="x")])])

    with pytest.raises(ResumeError, match="being driven by another writer"):
        await resume("r", intruder, store=second_store)

    release.set()
    assert (await first).steps == 1
    assert intruder.requests == [] and not (project / "x").exists()
    resumed = await resume("r", ScriptedProvider([]), store=second_store)
    assert resumed.outcome is RunOutcome.STEP_CAP_REACHED


async def test_a_store_that_cannot_write_reports_a_storage_error(
    project: Path, tmp_path: Path
) -> None:
    store = SqliteStore(str(tmp_path / "tiny.db"))
    store._db.execute("PRAGMA max_page_count = 12")  # stands in for a full disk
    big = reply("x" * 200_000, [call("list_dir")])

    with pytest.raises(StorageError, match="cannot write to"):
        await run(
            contract(project, max_steps=3), ScriptedProvider(lambda request: big), store=store
        )
    store.close()


def test_a_committed_step_must_follow_the_last_one(store_factory: StoreFactory) -> None:
    with pytest.raises(StorageError, match="not in the store"):
        store_factory().commit_step("absent", StepRecord(step=1, started_at=0.0))


async def test_a_step_another_writer_committed_first_is_refused_and_nothing_written(
    project: Path, store_factory: StoreFactory
) -> None:
    store = store_factory()
    stopped = ScriptedProvider([reply(calls=[call("list_dir")]), KeyboardInterrupt()])
    with pytest.raises(KeyboardInterrupt):
        await run(contract(project, max_steps=3), stopped, store=store, run_id="r")
    before = store.trace("r")

    with pytest.raises(StorageError, match="advanced by another writer"):
        late = StepRecord(step=1, started_at=0.0, messages=list(before.messages[-1:]))
        store.commit_step("r", late)
    with pytest.raises(StorageError, match="another writer advanced"):
        store.journal_step("r", 1, "{}")

    assert store.trace("r") == before


async def test_the_trace_holds_every_prompt_response_call_and_draw(
    project: Path, store_factory: StoreFactory
) -> None:
    store = store_factory()
    result = await run(contract(project, max_steps=2), listing(), store=store)

    trace = store.trace(result.run_id)

    assert [m.role for m in trace.messages] == ["user", "assistant", "tool", "assistant", "tool"]
    assert [c.name for c in trace.tool_calls] == ["list_dir", "list_dir"]
    assert len(trace.provider_calls) == 2 and trace.provider_calls[0].provider == "scripted"
    assert [s.step for s in trace.steps] == [1, 2]
    assert trace.events[-1].kind == "run_finished"
    assert trace.run.outcome == RunOutcome.STEP_CAP_REACHED.value


def test_an_unknown_run_in_the_trace_is_a_resume_error(store_factory: StoreFactory) -> None:
    with pytest.raises(ResumeError, match="no run 'missing'"):
        store_factory().trace("missing")


async def test_normal_durability_stores_the_same_run(
    project: Path, store_factory: StoreFactory
) -> None:
    fast = store_factory(durability="normal")
    result = await run(contract(project, max_steps=2), listing(), store=fast)
    assert fast.runs()[0].steps == result.steps == 2
    assert store_factory().trace(result.run_id).run.steps == 2


async def test_a_run_stored_before_policies_resumes_under_the_permissive_policy(
    tmp_path: Path, store_factory: StoreFactory
) -> None:
    with store_factory() as store:
        provider = ScriptedProvider([reply(calls=[call("list_dir")]), KeyboardInterrupt()])
        with pytest.raises(KeyboardInterrupt):
            await run(contract(tmp_path), provider, store=store, run_id="old")
    store_factory.sql("UPDATE runs SET policy = NULL")  # as a version 2 store left it

    with store_factory() as store:
        assert store.load_run("old").policy_json is None
        write = reply(calls=[call("write_file", path="never.txt", content="x")])
        resumed = await resume("old", ScriptedProvider([write]), store=store)
        assert resumed.outcome is RunOutcome.SUCCESS
        (row,) = [r for r in store.trace("old").permissions if r.act == "write"]
        assert (row.effect, row.decision) == ("allow", "allowed")


def test_a_store_opened_by_a_relative_path_locks_the_same_run_after_a_change_of_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path)
    with Store.open("runs.db") as first:
        monkeypatch.chdir(tmp_path / "elsewhere")
        with (
            first.lease("r1"),
            Store.open(tmp_path / "runs.db") as second,
            pytest.raises(ResumeError, match="being driven by another writer"),
            second.lease("r1"),
        ):
            pass


def test_text_that_is_not_utf8_is_a_storage_error_naming_the_row(tmp_path: Path) -> None:
    work = tmp_path / "ws"
    work.mkdir()
    path = tmp_path / "runs.db"
    with Store.open(path) as store:
        asyncio.run(
            run(
                TaskContract.workspace("g", work, WorkspaceFileContains("d.txt", "d")),
                ScriptedProvider([reply(calls=[call("write_file", path="d.txt", content="d")])]),
                store=store,
                run_id="x",
            )
        )
    with contextlib.closing(sqlite3.connect(path)) as db:
        db.execute("UPDATE tool_calls SET result = CAST(X'ff6f6b' AS TEXT) WHERE run_id = 'x'")
        db.commit()

    with Store.open(path) as store:
        with pytest.raises(StorageError, match=r"run 'x' holds text that is not UTF-8 in "
                           r"tool_calls row 1, column result"):  # fmt: skip
            store.trace("x")
        lenient = store.trace("x", undecodable="replace")
        assert lenient.tool_calls[0].result == "\ufffdok"
        assert store.trace("x", undecodable="replace").run.outcome == "success"


def test_a_run_whose_writer_died_is_not_driven(store_factory: StoreFactory) -> None:
    holder = (
        "import os, signal, sys\n"
        "from io_harness import Store\n"
        f"store = Store.open({str(store_factory.location)!r}, lease_seconds=1)\n"
        "with store.lease('r'):\n"
        "    print('held', flush=True)\n"
        "    sys.stdin.readline()\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", holder], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert line_from(proc) == "held\n"
    with store_factory() as store:
        assert store.driven("r")
        with pytest.raises(ResumeError, match="being driven by another writer"), store.lease("r"):
            pass
        proc.communicate("go\n", timeout=60)
        if store_factory.leases_expire:  # the dead writer's lease lasts until it expires
            assert eventually(lambda: not store.driven("r"))
        assert not store.driven("r")
        with store.lease("r"):
            assert store.driven("r")
        assert not store.driven("r")
        assert not store.driven("never-seen")
