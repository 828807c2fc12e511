"""What the trace keeps of the sandbox: its events, the run's backend, ioh show and ioh doctor."""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import sys
from functools import partial
from pathlib import Path

import pytest

import support
from io_harness import (
    NO_SANDBOX,
    Budget,
    Command,
    ConfigError,
    Decision,
    Policy,
    RunOutcome,
    Store,
    TaskContract,
    resume,
    run,
)
from io_harness._contract_toml import sandbox_config
from io_harness._demo import CASSETTE
from io_harness.cli import main
from io_harness.sandbox import SandboxConfig, SandboxError, SandboxLimits, probe, select
from io_harness.store._schema import SCHEMA_VERSION
from io_harness.testing import ScriptedProvider, call, reply

PY = sys.executable
MARK = ["sh", "-c", "echo ran >> marker.txt"]
CHECK = Command([PY, "-c", "import sys; sys.exit(0 if open('marker.txt').read() else 1)"])


@pytest.fixture(autouse=True)
def _restore_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", os.environ.get("PATH", ""))


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "ws"
    folder.mkdir()
    return folder


contract = partial(support.contract, goal="mark it", verify=CHECK, tools=["exec"], max_steps=3)
"""The task of the runs here: done when CHECK passes (marker.txt is not empty)."""


def marking() -> ScriptedProvider:
    return ScriptedProvider([reply(calls=[call("exec", argv=MARK)]), reply("done")])


def default_backend() -> str:
    return select(SandboxConfig()).name


async def test_the_exec_call_and_the_check_leave_sandbox_events_in_their_step(
    root: Path, store: Store
) -> None:
    result = await run(contract(root), marking(), store=store)

    assert result.outcome is RunOutcome.SUCCESS
    assert result.sandbox == default_backend()
    rows = store.trace(result.run_id).sandbox_events
    assert [r.seq for r in rows] == list(range(1, len(rows) + 1))
    by_call = [(r.step, r.call_id, r.kind) for r in rows]
    assert by_call[:3] == [(1, "call_1_1", "create"), (1, "call_1_1", "exec"),
                           (1, "call_1_1", "destroy")]  # fmt: skip
    checks = [(step, kind) for step, call_id, kind in by_call if call_id == ""]
    assert (2, "exec") in checks, "the criterion's command ran in the sandbox"
    assert {r.backend for r in rows} == {default_backend()}
    created = rows[0].detail
    assert created["mode"] == "workspace_write" and "wall_seconds" in created["limits"]
    assert rows[1].detail["argv"][1:] == MARK[1:]  # argv[0] may be resolved


async def test_the_run_records_its_backend_and_why(root: Path, store: Store) -> None:
    result = await run(contract(root), marking(), store=store)

    record = store.trace(result.run_id).sandbox
    assert record is not None and record.config is not None
    assert record.backend == default_backend()
    assert record.why.startswith("selected for the default configuration")
    assert record.config["network"] == "deny"


async def test_a_sandbox_config_is_selected_for_and_kept_for_the_resume(
    root: Path, store: Store
) -> None:
    config = SandboxConfig(limits=SandboxLimits(wall_seconds=77))
    provider = ScriptedProvider([reply(calls=[call("exec", argv=MARK)])])
    asking = Policy.permissive().layer("t").ask_exec("sh")
    first = await run(contract(root), provider, store=store, policy=asking, sandbox=config)
    assert first.outcome is RunOutcome.AWAITING_APPROVAL

    done = await resume(
        first.run_id, ScriptedProvider([]), store=store, decision=Decision.approve()
    )

    assert done.outcome is RunOutcome.SUCCESS
    trace = store.trace(first.run_id)
    assert trace.sandbox is not None and trace.sandbox.config is not None
    assert trace.sandbox.why.startswith("selected for the configuration the run started with")
    assert trace.sandbox.config["limits"]["wall_seconds"] == 77
    created = trace.sandbox_events[0].detail
    assert created["limits"]["wall_seconds"] == 77


async def test_opting_out_is_recorded_and_the_criterion_runs_directly(
    root: Path, store: Store
) -> None:
    result = await run(contract(root), marking(), store=store, sandbox=NO_SANDBOX)

    assert result.outcome is RunOutcome.SUCCESS and result.sandbox == "none"
    record = store.trace(result.run_id).sandbox
    assert record is not None and record.backend == "none" and record.config is None
    assert "opted out" in record.why


async def test_ioh_show_prints_the_backend_the_events_and_the_cap_hits(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "runs.db"
    provider = ScriptedProvider(
        [
            reply(calls=[call("exec", argv=[PY, "-c", "import time; time.sleep(60)"])]),
            reply(calls=[call("exec", argv=MARK)]),
            reply("done"),
        ]
    )
    capped = SandboxConfig(limits=SandboxLimits(wall_seconds=3))
    with Store.open(path) as store:
        result = await run(contract(root), provider, store=store, sandbox=capped)
    assert result.outcome is RunOutcome.SUCCESS

    assert main(["show", result.run_id, "--store", str(path)]) == 0

    shown = capsys.readouterr().out
    assert f"sandbox: {result.sandbox}" in shown
    assert "selected for the caller's" in shown
    assert "cap hit: wall (exec call call_1_1 in" in shown
    assert "sandbox events: 3 create, 3 exec, 1 cap_hit, 3 destroy" in " ".join(shown.split())


async def test_ioh_show_of_a_run_without_a_sandbox_says_none(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "runs.db"
    with Store.open(path) as store:
        result = await run(contract(root), marking(), store=store, sandbox=NO_SANDBOX)

    main(["show", result.run_id, "--store", str(path)])

    assert "sandbox: none (opted out" in capsys.readouterr().out


async def test_ioh_show_prints_terminal_escapes_from_the_run_as_text(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The model's arguments and a command's output are the run's, not the terminal's:
    # an escape sequence in them must not clear the screen or retitle the window.
    escapes = "\x1b]0;pwned\x07\x1b[2J\x9b1A"
    printing = Command([PY, "-c", f"print({escapes!r}); raise SystemExit(1)"])
    work = TaskContract.workspace(
        "mark it", root, printing, budget=Budget(max_steps=2), tools=["exec"]
    )
    provider = ScriptedProvider(
        [reply(calls=[call("exec", argv=["echo", escapes])]), reply("done")]
    )
    path = tmp_path / "runs.db"
    with Store.open(path) as store:
        result = await run(work, provider, store=store, sandbox=NO_SANDBOX)

    assert main(["show", result.run_id, "--store", str(path)]) == 0

    shown = capsys.readouterr().out
    assert "\x1b" not in shown and "\x07" not in shown and "\x9b" not in shown
    assert "\\x1b]0;pwned\\x07\\x1b[2J" in shown


def test_ioh_doctor_lists_every_backend_and_the_one_a_run_gets(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["doctor"]) == 0

    shown = capsys.readouterr().out
    for report in probe():
        assert report.name in shown
    assert f"a run with the default configuration gets: {default_backend()}" in shown
    assert "denies network" in shown


def test_ioh_doctor_says_when_no_backend_gives_the_default(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def nothing(config: SandboxConfig) -> None:
        raise SandboxError("no sandbox backend gives this configuration: floor: no")

    monkeypatch.setattr("io_harness.cli._sandbox.select", nothing)

    assert main(["doctor"]) == 0

    shown = " ".join(capsys.readouterr().out.split())
    assert "gets no sandbox: no sandbox backend gives this configuration" in shown
    assert "a [sandbox] table can ask for less" in shown


def _demo_contract(tmp_path: Path, extra: str = "") -> Path:
    shutil.copytree(Path(CASSETTE).parent / "project", tmp_path / "work" / "project")
    target = tmp_path / "work" / "contract.toml"
    target.write_text((Path(CASSETTE).parent / "contract.toml").read_text() + extra)
    return target


def test_ioh_run_no_sandbox_warns_and_runs_directly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PATH", f"{Path(PY).parent}{os.pathsep}{os.environ['PATH']}")
    path = _demo_contract(tmp_path)
    store = str(tmp_path / "runs.db")

    status = main(
        ["run", str(path), "--provider", f"replay:{CASSETTE}", "--store", store, "--no-sandbox",
         "--run-id", "bare"]
    )  # fmt: skip

    shown = " ".join(capsys.readouterr().out.split())
    assert status == 0
    assert "warning: --no-sandbox" in shown
    assert "commands ran without a sandbox" in shown
    with Store.open(store) as opened:
        record = opened.trace("bare").sandbox
    assert record is not None and record.backend == "none"


def test_ioh_run_selects_the_sandbox_by_the_contracts_sandbox_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PATH", f"{Path(PY).parent}{os.pathsep}{os.environ['PATH']}")
    path = _demo_contract(tmp_path, "\n[sandbox]\nnetwork = \"deny\"\n[sandbox.limits]\n"
                                    "wall_seconds = 120\nmemory_bytes = 1073741824\n")  # fmt: skip
    store = str(tmp_path / "runs.db")

    status = main(["run", str(path), "--provider", f"replay:{CASSETTE}", "--store", store,
                   "--run-id", "tabled"])  # fmt: skip

    shown = " ".join(capsys.readouterr().out.split())
    assert status == 0, shown
    assert f"commands ran in the sandbox: {default_backend()}" in shown
    with Store.open(store) as opened:
        record = opened.trace("tabled").sandbox
    assert record is not None and record.config is not None
    assert record.why.startswith("selected for the caller's configuration")
    assert record.config["limits"]["wall_seconds"] == 120


def test_a_bad_sandbox_table_is_a_config_error_naming_the_key(tmp_path: Path) -> None:
    path = _demo_contract(tmp_path, "\n[sandbox]\nmode = \"everything\"\n[sandbox.limits]\n"
                                    "wall_secs = 5\n")  # fmt: skip

    with pytest.raises(ConfigError) as raised:
        TaskContract.from_toml(path)

    message = str(raised.value)
    assert message.startswith(f"{path}: sandbox.")
    assert "sandbox.mode: Input should be 'read_only'" in message
    assert "sandbox.limits.wall_secs: Extra inputs are not permitted" in message
    path.write_text(
        'goal = "g"\nroot = "project"\nsandbox = 3\n[verify]\nkind = "command"\nargv = ["x"]\n'
    )
    with pytest.raises(ConfigError, match="sandbox: expected a table"):
        sandbox_config(path)


async def test_a_version_3_store_opens_migrates_and_resumes(root: Path, tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    asking = Policy.permissive().layer("t").ask_exec("sh")
    with Store.open(path) as store:
        provider = ScriptedProvider([reply(calls=[call("exec", argv=MARK)])])
        first = await run(contract(root), provider, store=store, policy=asking)
    _as_version_3(path)

    with Store.open(path) as store:
        before = store.trace(first.run_id)
        assert before.sandbox is None and before.sandbox_events == ()
        assert store.runs()[0].status == "awaiting"
        done = await resume(
            first.run_id, ScriptedProvider([]), store=store, decision=Decision.approve()
        )
        after = store.trace(first.run_id)

    assert done.outcome is RunOutcome.SUCCESS
    assert (root / "marker.txt").read_text() == "ran\n"
    assert after.sandbox is not None and after.sandbox.backend == default_backend()
    assert after.sandbox.why.startswith("selected for the default configuration")
    assert [e.kind for e in after.sandbox_events][:3] == ["create", "exec", "destroy"]
    with contextlib.closing(sqlite3.connect(path)) as db:
        assert db.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)


def _as_version_3(path: Path) -> None:
    """Take the file back to what version 3 wrote: nothing of versions 4 and later."""
    with contextlib.closing(sqlite3.connect(path)) as db:
        for table in ("compactions", "tree_events", "mcp_events", "memory_log", "memory",
                      "sandbox_events"):  # fmt: skip
            db.execute(f"DROP TABLE {table}")
        for index in ("runs_by_spawn", "runs_by_root"):
            db.execute(f"DROP INDEX {index}")
        for column in ("parent_id", "root_id", "depth", "spawn_call", "tree", "journal"):
            db.execute(f"ALTER TABLE runs DROP COLUMN {column}")
        for table, column in (("runs", "prices"), ("runs", "setup"), ("runs", "sandbox"),
                              ("tool_calls", "kind"), ("tool_calls", "duration"),
                              ("tool_calls", "error")):  # fmt: skip
            db.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
        db.execute("PRAGMA user_version = 3")
        db.commit()


def test_a_version_3_store_another_process_migrates_first_still_opens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two processes open one old store: the second read version 3 before the first
    # migrated it, and must not run the migration again once it holds the lock.
    from io_harness.store._sqlite import SqliteStore

    path = tmp_path / "runs.db"
    Store.open(path).close()
    _as_version_3(path)
    original = SqliteStore._transaction
    went_first: list[bool] = []

    def another_process_goes_first(self: SqliteStore) -> contextlib.AbstractContextManager[object]:
        if not went_first:
            went_first.append(True)
            Store.open(path).close()
        return original(self)

    monkeypatch.setattr(SqliteStore, "_transaction", another_process_goes_first)

    with Store.open(path) as store:
        assert store.runs() == []
    assert went_first
    with contextlib.closing(sqlite3.connect(path)) as db:
        assert db.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)


def test_a_store_a_newer_version_migrated_meanwhile_is_not_marked_older(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from io_harness import ResumeError
    from io_harness.store._sqlite import SqliteStore

    path = tmp_path / "runs.db"
    Store.open(path).close()
    _as_version_3(path)
    original = SqliteStore._transaction

    def a_newer_harness_goes_first(self: SqliteStore) -> contextlib.AbstractContextManager[object]:
        with contextlib.closing(sqlite3.connect(path)) as db:
            db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
            db.commit()
        return original(self)

    monkeypatch.setattr(SqliteStore, "_transaction", a_newer_harness_goes_first)

    with pytest.raises(ResumeError, match="newer than this io-harness knows"):
        Store.open(path)
    with contextlib.closing(sqlite3.connect(path)) as db:
        assert db.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION + 1,)
