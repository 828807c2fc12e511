"""Any content of a store ends as one line naming the table and the row, never a crash.

A real store is made by real scripted runs (one finished, with tool calls and
a check; one awaiting approval; one that remembered a note and ran a
command); each test copies it and damages one row with ``sqlite3`` the way a
broken disk, a hand edit or a crafted file would. Then the real ``ioh``
commands and the ``Store`` methods read it: each must end with a
:class:`StorageError` whose one line names the run, the table, the row and
the column, and ``ioh`` must print that line and exit 2, without a traceback
or an "internal error".
"""

from __future__ import annotations

import asyncio
import re
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import get_args

import pytest

from io_harness import (
    Budget,
    FileContains,
    Harness,
    Policy,
    RunOutcome,
    RunSummary,
    StorageError,
    Store,
    TaskContract,
    WorkspaceFileContains,
)
from io_harness.cli import main
from io_harness.store._rows import RunOutcomeWord
from io_harness.testing import ScriptedProvider, call, reply

FINISHED, AWAITING, REMEMBERED = "done1", "wait1", "mem1"
IOH = Path(sys.executable).with_name("ioh")


async def make_runs(folder: Path) -> None:
    with Store.open(folder / "runs.db") as store:
        greeting = TaskContract.file("greet", folder / "hi.txt", FileContains("hello"))
        writes = ScriptedProvider(
            [reply(calls=[call("read_file")]), reply(calls=[call("write_file", content="hello")])]
        )
        await Harness(writes, store=store).run(greeting, run_id=FINISHED, labels={"suite": "a"})
        asked = TaskContract.file("b", folder / "b.txt", FileContains("b"))
        asks = ScriptedProvider([reply(calls=[call("write_file", content="b")])])
        await Harness(asks, store=store, policy=Policy.guarded()).run(asked, run_id=AWAITING)
        (folder / "ws").mkdir()
        noting = TaskContract.workspace(
            "note",
            folder / "ws",
            WorkspaceFileContains("x.txt", "never"),
            budget=Budget(max_steps=2),
            tools=["exec"],
        )
        notes = ScriptedProvider(
            [
                reply(calls=[call("remember", key="k", value="v"), call("exec", argv=["true"])]),
                reply("done"),
            ]
        )
        await Harness(notes, store=store, memory=True).run(noting, run_id=REMEMBERED)


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder of a store the three runs wrote (left as they wrote it)."""
    folder = tmp_path_factory.mktemp("made")
    asyncio.run(make_runs(folder))
    return folder


@pytest.fixture
def damaged(made: Path, tmp_path: Path) -> Callable[[str, str, object, str], Path]:
    """A copy of the made store with one column of one row of ``run_id`` set to ``value``."""

    def damage(table: str, column: str, value: object, run_id: str) -> Path:
        path = tmp_path / "runs.db"
        shutil.copy(made / "runs.db", path)
        with sqlite3.connect(path) as db:
            without_constraints(db, table)  # NULL and any type, as a crafted file holds them
            key = "id" if table == "runs" else "run_id"
            first = f"SELECT min(rowid) FROM {table} WHERE {key} = ?"
            if table == "memory":
                first = f"SELECT min(rowid) FROM {table} WHERE ? IS NOT NULL"
            changed = db.execute(
                f"UPDATE {table} SET {column} = ? WHERE rowid = ({first})", (value, run_id)
            ).rowcount
            assert changed == 1, (table, run_id)
        return path

    return damage


def without_constraints(db: sqlite3.Connection, table: str) -> None:
    columns = ", ".join(row[1] for row in db.execute(f"PRAGMA table_info({table})"))
    db.execute(f"CREATE TABLE loose AS SELECT rowid AS old_rowid, * FROM {table}")
    db.execute(f"DROP TABLE {table}")
    db.execute(f"CREATE TABLE {table} ({columns})")
    db.execute(f"INSERT INTO {table} (rowid, {columns}) SELECT old_rowid, {columns} FROM loose")
    db.execute("DROP TABLE loose")


DEEP = "[" * 100_000 + "]" * 100_000
HUGE = "x" * 3_000_000 + "{"

# table, column, the stored value, the run whose row it is, what the line says after the column
DAMAGE: dict[str, tuple[str, str, object, str, str]] = {
    "text in a count": ("runs", "steps", "abc", FINISHED, "Input should be a valid integer"),
    "a negative count": ("runs", "input_tokens", -5, FINISHED, "greater than or equal to 0"),
    "NULL in a name": ("runs", "goal", None, FINISHED, "Input should be a valid string"),
    "a number in a name": ("runs", "model", 12345, FINISHED, "Input should be a valid string"),
    "a status not known": ("runs", "status", "bogus", FINISHED, "Input should be 'running',"),
    "an outcome not known": ("runs", "outcome", "exploded", FINISHED, "Input should be 'success"),
    "a time no calendar has": ("runs", "started_at", 1e300, FINISHED, "less than or equal to"),
    "an infinite time": ("runs", "finished_at", float("inf"), FINISHED, "finite number"),
    "labels not JSON": ("runs", "labels", "garbage{", FINISHED, "Invalid JSON"),
    "labels not text": ("runs", "labels", 12345, FINISHED, "JSON input should be string"),
    "labels of numbers": ("runs", "labels", '{"a": 1}', FINISHED, "Input should be a valid string"),
    "a contract nested deep": ("runs", "contract", DEEP, FINISHED, "nests deeper than 128"),
    "tools of the wrong shape": ("runs", "tools", '{"x": 1}', FINISHED, "an object, not an array"),
    "prices huge and broken": ("runs", "prices", HUGE, FINISHED, "Expecting value"),
    "a journal not JSON": ("runs", "journal", "{", AWAITING, "Expecting property name"),
    "a message not JSON": ("messages", "body", "garbage{", FINISHED, "Invalid JSON"),
    "a message of the wrong shape": ("messages", "body", '{"role": 5}', FINISHED, "'user'"),
    "a message nested deep": ("messages", "body", DEEP, FINISHED, "recursion limit exceeded"),
    "a last check not an object": ("verifications", "result", "[1]", FINISHED, "an array"),
    "a request of the wrong shape": ("approvals", "request", "{}", AWAITING, "ApprovalRequest"),
    "an approval status not known": ("approvals", "status", "maybe", AWAITING, "'pending'"),
    "an open approval of no step": ("approvals", "step", "one", AWAITING, "valid integer"),
    "a decision not JSON": ("approvals", "decision", "yes", AWAITING, "Expecting value"),
    "a flag that is text": ("tool_calls", "is_error", "perhaps", FINISHED, "valid boolean"),
    "changed paths nested deep": ("tool_calls", "changed", DEEP, FINISHED, "nests deeper"),
    "arguments not JSON": ("tool_calls", "arguments", "{'a': 1}", FINISHED, "Expecting property"),
    "event data not an object": ("events", "data", '"x"', FINISHED, "valid dictionary"),
    "a step time NULL": ("steps", "started_at", None, FINISHED, "Input should be a valid number"),
    "a latency of NaN text": ("provider_calls", "latency", "NaN", FINISHED, "finite number"),
    "an argv of the wrong shape": ("permissions", "argv", '{"x": 1}', FINISHED, "valid tuple"),
    "sandbox detail not JSON": ("sandbox_events", "detail", "{", REMEMBERED, "Expecting"),
    "a memory change of no time": ("memory_log", "at", "then", REMEMBERED, "valid number"),
}

LOADED_WITH_THE_RUN = {"runs", "messages", "verifications", "approvals"}
"""Tables ``load_run`` reads: every command that names the run meets them, ``ioh runs`` too
(of ``approvals``, the open rows only: a status not known is met by the trace alone)."""


def commands(case: str, table: str, run_id: str, path: Path) -> list[list[str]]:
    store = ["--store", str(path)]
    shown = [
        ["show", run_id, *store],
        ["show", run_id, "--json", *store],
        ["report", run_id, "-o", str(path.with_name("report.html")), *store],
    ]
    if table in LOADED_WITH_THE_RUN and case != "an approval status not known":
        shown.append(["runs", *store])
        if run_id == AWAITING:
            shown.append(["pending", *store])
    return shown


def one_line_naming(table: str, column: str, run_id: str, said: str) -> re.Pattern[str]:
    row = f"its row of {table}" if table == "runs" else rf"a row of {table} \([^)]+\)"
    return re.compile(
        rf"error: run '{run_id}' holds {row} that does not load: "
        rf"{column}(\.\S+)?: .*{re.escape(said)}.*"
    )


@pytest.mark.parametrize("case", DAMAGE)
def test_every_ioh_command_says_what_is_damaged_in_one_line(
    case: str,
    damaged: Callable[[str, str, object, str], Path],
    capsys: pytest.CaptureFixture[str],
) -> None:
    table, column, value, run_id, said = DAMAGE[case]
    path = damaged(table, column, value, run_id)
    expected = one_line_naming(table, column, run_id, said)

    for argv in commands(case, table, run_id, path):
        status = main(argv)
        out, err = capsys.readouterr()
        assert status == 2, (argv, out, err)
        lines = err.splitlines()
        assert len(lines) == 1 and expected.fullmatch(lines[0]), (argv, err)


def test_a_damaged_note_is_one_line_from_ioh_memory(
    damaged: Callable[[str, str, object, str], Path],
    made: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = damaged("memory", "updated_at", 1e300, REMEMBERED)
    workspace = str((made / "ws").resolve())

    status = main(["memory", "--store", str(path), "--workspace", workspace])

    _, err = capsys.readouterr()
    assert status == 2
    assert err.splitlines() == [
        f"error: workspace {workspace!r} holds a row of memory (key 'k') that does not load: "
        "updated_at: Input should be less than or equal to 253402300799"
    ]


RUNNING = RunSummary(
    id=AWAITING,
    goal="b",
    status="running",
    outcome=None,
    steps=0,
    tokens=0,
    cost_micros=0,
    unpriced_calls=0,
    provider="scripted",
    model="scripted",
    started_at=0.0,
    finished_at=None,
)
"""A run as a listing showed it before its row was damaged: running, and driven by nobody."""
STORE_READS: dict[str, Callable[[Store], object]] = {
    "load_run": lambda store: store.load_run(FINISHED),
    "runs": lambda store: store.runs(),
    "trace": lambda store: store.trace(FINISHED),
    "status_now": lambda store: store.status_now(RUNNING),
    "approvals": lambda store: store.approvals(),
    "root_of": lambda store: store.root_of(AWAITING),
    "memory_log": lambda store: store.memory_log(REMEMBERED),
}
"""Each method of ``Store`` that reads rows, called as a reader calls it."""
READ_DAMAGE: dict[str, tuple[str, str, object, str, str]] = {
    "load_run": ("messages", "body", "[", FINISHED, "EOF while parsing"),
    "runs": ("runs", "unpriced_calls", 1.5, AWAITING, "fractional part"),
    "trace": ("permissions", "at", "soon", FINISHED, "valid number"),
    "status_now": ("runs", "tree", "[]", AWAITING, "an array, not an object"),
    "approvals": ("approvals", "step", None, AWAITING, "valid integer"),
    "root_of": ("runs", "depth", "deep", AWAITING, "valid integer"),
    "memory_log": ("memory_log", "value", 7, REMEMBERED, "valid string"),
}
"""Each read, and the row it meets damaged: (table, column, value, run, what is said)."""


@pytest.mark.parametrize("read", STORE_READS)
def test_every_store_read_of_a_damaged_row_is_one_storage_error(
    read: str, damaged: Callable[[str, str, object, str], Path]
) -> None:
    table, column, value, run_id, said = READ_DAMAGE[read]
    path = damaged(table, column, value, run_id)
    with Store.open(path) as store, pytest.raises(StorageError) as raised:
        STORE_READS[read](store)

    message = str(raised.value)
    assert "\n" not in message
    assert one_line_naming(table, column, run_id, said).fullmatch(f"error: {message}"), message


def test_ioh_runs_on_a_damaged_store_exits_2_without_a_traceback(
    damaged: Callable[[str, str, object, str], Path],
) -> None:
    path = damaged("runs", "cost_micros", "a lot", FINISHED)

    done = subprocess.run(
        [str(IOH), "runs", "--store", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"error: run '{FINISHED}' holds its row of runs that does not load: cost_micros: "
        "Input should be a valid integer, unable to parse string as an integer"
    ]
    assert "Traceback" not in done.stdout + done.stderr


def test_the_outcomes_a_store_accepts_are_the_run_outcomes() -> None:
    assert set(get_args(RunOutcomeWord)) == {outcome.value for outcome in RunOutcome}
