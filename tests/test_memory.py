"""Durable memory from the user's side: remember, forget, the caps, the policy, the CLI.

Every test uses a real SQLite file under ``tmp_path``. The tools are driven
through ``RunTools.dispatch``, through a gate where the policy matters; the
CLI through ``io_harness.cli.main``. The end-to-end carry of memory into a
second run through the Harness is tested with the loop.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

import pytest

from io_harness.cli import main
from io_harness.errors import ConfigError
from io_harness.messages import ToolCall
from io_harness.policy import Policy
from io_harness.policy._gate import Gate
from io_harness.store import Store
from io_harness.store._memory import MemoryLimits
from io_harness.tools import RunTools, ToolContext, ToolOutcome
from io_harness.tools._memory import (
    NOTES_HEADING,
    ForgetTool,
    RememberTool,
    memory_notes,
)

WORKSPACE = str(Path("/work/project").resolve())
OTHER = str(Path("/work/other").resolve())


def box(store: Store, workspace: str = WORKSPACE) -> RunTools:
    return RunTools([RememberTool(store, workspace), ForgetTool(store, workspace)])


async def use(
    tools: RunTools, name: str, gate: Gate | None = None, **arguments: str
) -> ToolOutcome:
    context = ToolContext("r", 1, "c") if gate is None else ToolContext(gate.run_id, gate.step, "c")
    outcome = await tools.dispatch(
        ToolCall(id="c", name=name, arguments=arguments), gate=gate, context=context
    )
    assert isinstance(outcome, ToolOutcome)
    return outcome


def logged(db: Path, op: str) -> list[tuple[object, ...]]:
    """The ``memory_log`` rows of one op, read with plain SQL as an operator would."""
    with contextlib.closing(sqlite3.connect(db)) as connection:
        return connection.execute(
            "SELECT key, run_id, step, call_id FROM memory_log WHERE op = ? ORDER BY seq", (op,)
        ).fetchall()


def keys(store: Store, workspace: str = WORKSPACE) -> list[str]:
    return [entry.key for entry in store.memory_entries(workspace)]


# --- set, replace, forget ----------------------------------------------------------------


async def test_remember_stores_a_note_and_a_second_remember_replaces_it_as_the_newest(
    store: Store,
) -> None:
    tools = box(store)

    first = await use(tools, "remember", key="test-command", value="pytest -q")
    await use(tools, "remember", key="style", value="ruff")
    again = await use(tools, "remember", key="test-command", value="make test")

    assert (first.content, first.is_error) == ("remembered test-command", False)
    assert again.content == "remembered test-command"
    entries = store.memory_entries(WORKSPACE)
    assert [(e.key, e.value) for e in entries] == [("style", "ruff"), ("test-command", "make test")]


async def test_forget_removes_a_note_and_says_when_the_key_was_not_remembered(
    store: Store,
) -> None:
    tools = box(store)
    await use(tools, "remember", key="k", value="v")

    forgot = await use(tools, "forget", key="k")
    missing = await use(tools, "forget", key="k")

    assert (forgot.content, forgot.is_error) == ("forgot k", False)
    assert (missing.content, missing.is_error) == ("k was not remembered", False)
    assert keys(store) == []
    assert [(row.op, row.key, row.value) for row in store.memory_log("r")] == [
        ("set", "k", "v"),
        ("forget", "k", "v"),
    ]


# --- the caps --------------------------------------------------------------------------


async def test_past_64_entries_the_oldest_is_evicted_and_the_reply_names_it(
    store: Store,
) -> None:
    tools = box(store)
    for n in range(64):
        assert (await use(tools, "remember", key=f"k{n}", value="x")).content == f"remembered k{n}"

    reply = await use(tools, "remember", key="k64", value="x")

    assert reply.content == (
        "remembered k64; evicted the oldest: k0 (caps: 64 entries, 16,000 characters)"
    )
    assert keys(store) == [f"k{n}" for n in range(1, 65)]
    evictions = [row for row in store.memory_log("r") if row.op == "evict"]
    assert [(row.key, row.value, row.step, row.call_id) for row in evictions] == [
        ("k0", "x", 1, "c")
    ]


async def test_past_16000_characters_the_oldest_are_evicted_until_the_total_fits(
    store: Store,
) -> None:
    tools = box(store)
    for n in range(16):
        await use(tools, "remember", key=f"k{n}", value=str(n % 10) * 1000)

    reply = await use(tools, "remember", key="big", value="b" * 2000)

    assert reply.content == (
        "remembered big; evicted the oldest: k0, k1 (caps: 64 entries, 16,000 characters)"
    )
    entries = store.memory_entries(WORKSPACE)
    assert sum(len(e.value) for e in entries) == 16000
    assert [e.key for e in entries] == [f"k{n}" for n in range(2, 16)] + ["big"]
    log = store.memory_log("r")
    assert [(row.op, row.key) for row in log[-3:]] == [
        ("set", "big"),
        ("evict", "k0"),
        ("evict", "k1"),
    ]
    assert log[-2].value == "0" * 1000 and log[-1].value == "1" * 1000


async def test_replacing_a_key_counts_its_new_value_not_its_old_one(store: Store) -> None:
    tools = box(store)
    for n in range(8):
        await use(tools, "remember", key=f"k{n}", value="x" * 2000)

    reply = await use(tools, "remember", key="k0", value="y" * 2000)

    assert reply.content == "remembered k0"
    assert keys(store) == [f"k{n}" for n in range(1, 8)] + ["k0"]


async def test_a_value_over_2000_characters_is_refused_as_an_observation_stating_the_cap(
    store: Store,
) -> None:
    tools = box(store)

    refused = await use(tools, "remember", key="k", value="x" * 2001)

    assert refused.is_error
    assert "the value is 2,001 characters, over the cap of 2,000 characters per value" in (
        refused.content
    )
    assert "nothing was remembered" in refused.content
    assert keys(store) == []
    assert store.memory_log("r") == ()


async def test_smaller_limits_are_stated_in_the_tool_schema_and_enforced(store: Store) -> None:
    limits = MemoryLimits(entries=2, value_chars=5, total_chars=8)
    remember = RememberTool(store, WORKSPACE, limits=limits)
    tools = RunTools([remember])

    described = remember.spec.parameters["properties"]["value"]["description"]
    refused = await use(tools, "remember", key="a", value="123456")
    await use(tools, "remember", key="a", value="12345")
    evicting = await use(tools, "remember", key="b", value="1234")

    assert "at most 5 characters" in described and "2 notes and 8 characters" in described
    assert "over the cap of 5 characters per value" in refused.content
    assert evicting.content == "remembered b; evicted the oldest: a (caps: 2 entries, 8 characters)"


def test_limits_where_one_value_could_not_fit_in_all_are_a_config_error() -> None:
    with pytest.raises(ConfigError, match="value_chars"):
        MemoryLimits(value_chars=100, total_chars=50)
    with pytest.raises(ConfigError, match="entries"):
        MemoryLimits(entries=0)


# --- keys ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "problem"),
    [
        ("", "must not be empty or blank"),
        ("   ", "must not be empty or blank"),
        ("k" * 101, "at most 100 characters"),
        ("two\nlines", "control characters"),
        ("bell\x07", "control characters"),
        ("a/../b", "must not contain"),
        ("a//b", "must not contain"),
        ("trailing/", "must not contain"),
        ("back\\slash", "must not contain"),
    ],
)
async def test_a_bad_key_is_refused_as_an_observation_and_nothing_is_stored(
    store: Store, key: str, problem: str
) -> None:
    tools = box(store)

    remembered = await use(tools, "remember", key=key, value="v")
    forgotten = await use(tools, "forget", key=key)

    assert remembered.is_error and problem in remembered.content
    assert forgotten.is_error and problem in forgotten.content
    assert keys(store) == []


async def test_keys_with_slashes_dots_and_100_characters_are_taken(store: Store) -> None:
    tools = box(store)
    good = ["notes/test-command", "../x", ".", "v1.2", "k" * 100, "with spaces"]

    for key in good:
        assert (await use(tools, "remember", key=key, value="v")).content == f"remembered {key}"

    assert keys(store) == good


def test_the_store_refuses_a_bad_key_a_long_value_or_a_relative_workspace(store: Store) -> None:
    with pytest.raises(ConfigError, match="control characters"):
        store.remember(WORKSPACE, "a\x1bb", "v")
    with pytest.raises(ConfigError, match="empty"):
        store.forget(WORKSPACE, "")
    with pytest.raises(ConfigError, match="over the cap of 2,000"):
        store.remember(WORKSPACE, "k", "x" * 2001)
    with pytest.raises(ConfigError, match="absolute"):
        store.remember("project", "k", "v")
    assert keys(store) == []


# --- the policy --------------------------------------------------------------------------


async def test_deny_write_memory_refuses_remember_and_forget_through_the_gate(
    store: Store,
) -> None:
    store.remember(WORKSPACE, "kept", "v")
    gate = Gate(Policy.permissive().layer("x").deny_write("memory:*"), None, goal="g", run_id="r")
    tools = box(store)

    with gate.stepping(1) as step:
        remembered = await use(tools, "remember", gate=gate, key="notes/k", value="v")
        forgotten = await use(tools, "forget", gate=gate, key="kept")

    assert remembered.is_error
    assert (
        "refused by the policy: write memory:notes/k: deny (rule 'deny write memory:*' "
        "in layer 'x')" in remembered.content
    )
    assert forgotten.is_error and "write memory:kept: deny" in forgotten.content
    assert keys(store) == ["kept"]
    assert store.memory_log("r") == ()
    assert [(row.act, row.target, row.decision) for row in step.rows] == [
        ("write", "memory:notes/k", "refused"),
        ("write", "memory:kept", "refused"),
    ]


async def test_an_allowed_remember_is_a_write_of_memory_key_and_logged_with_its_call(
    store: Store,
) -> None:
    gate = Gate(Policy.permissive(), None, goal="g", run_id="r")
    tools = box(store)

    with gate.stepping(3) as step:
        reply = await use(tools, "remember", gate=gate, key="notes/k", value="v")

    assert reply.content == "remembered notes/k"
    assert [(row.act, row.target, row.decision) for row in step.rows] == [
        ("write", "memory:notes/k", "allowed")
    ]
    (row,) = store.memory_log("r")
    assert (row.op, row.key, row.value, row.step, row.call_id) == ("set", "notes/k", "v", 3, "c")
    assert row.workspace == WORKSPACE


async def test_an_approver_is_shown_the_note_as_it_is_and_as_it_will_be(store: Store) -> None:
    store.remember(WORKSPACE, "k", "old")
    remember = RememberTool(store, WORKSPACE)
    args = remember.args.model_validate({"key": "k", "value": "new"})

    assert remember.preview(args) == "remember memory:k\nwas: 'old'\nnow: 'new'"
    assert "not shown" in remember.preview(args, show_current=False)


# --- scope and durability ----------------------------------------------------------------


async def test_memory_is_kept_per_workspace(store: Store) -> None:
    await use(box(store, WORKSPACE), "remember", key="k", value="here")
    await use(box(store, OTHER), "remember", key="k", value="there")

    forgot = await use(box(store, OTHER), "forget", key="k")

    assert forgot.content == "forgot k"
    assert [(e.key, e.value) for e in store.memory_entries(WORKSPACE)] == [("k", "here")]
    assert store.memory_entries(OTHER) == []


async def test_memory_survives_closing_and_reopening_the_store_file(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    with Store.open(path) as first:
        await use(box(first), "remember", key="k", value="v")

    with Store.open(path) as second:
        entries = second.memory_entries(WORKSPACE)
        log = second.memory_log("r")

    assert [(e.key, e.value) for e in entries] == [("k", "v")]
    assert [row.op for row in log] == ["set"]


def test_a_forget_from_outside_a_run_is_logged_without_an_author(
    store: Store, tmp_path: Path
) -> None:
    store.remember(WORKSPACE, "k", "v")

    assert store.forget(WORKSPACE, "k") is True
    assert store.forget(WORKSPACE, "k") is False
    assert logged(tmp_path / "runs.db", "forget") == [("k", None, None, None)]


# --- the notes block ---------------------------------------------------------------------


def test_the_notes_block_lists_every_note_oldest_first_and_is_none_without_notes(
    store: Store,
) -> None:
    assert memory_notes(store.memory_entries(WORKSPACE)) is None
    store.remember(WORKSPACE, "test-command", "pytest -q")
    store.remember(WORKSPACE, "layout", "src/ holds the code\ntests/ the tests")

    notes = memory_notes(store.memory_entries(WORKSPACE))

    assert notes == (
        f"{NOTES_HEADING}\n"
        "- test-command: pytest -q\n"
        "- layout: src/ holds the code\n"
        "  tests/ the tests"
    )
    assert NOTES_HEADING.startswith("Notes remembered from earlier runs in this workspace")


# --- the CLI -----------------------------------------------------------------------------


def test_ioh_memory_lists_the_current_folders_notes_and_forget_removes_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.chdir(project)
    with Store.open(project / ".ioh" / "runs.db") as store:
        store.remember(str(project.resolve()), "test-command", "pytest -q")
        store.remember(str(project.resolve()), "[markup]", "not [bold]bold[/bold]")
        store.remember(str(tmp_path.resolve()), "elsewhere", "hidden")

    assert main(["memory"]) == 0
    listing = capsys.readouterr().out
    assert main(["memory", "forget", "test-command"]) == 0
    forgot = capsys.readouterr().out
    assert main(["memory", "--workspace", "."]) == 0
    after = capsys.readouterr().out

    assert "2 of 64 entries" in listing
    assert "test-command" in listing and "pytest -q" in listing
    assert "[markup]" in listing and "not [bold]bold[/bold]" in listing
    assert "elsewhere" not in listing
    assert "forgot test-command" in forgot
    assert "test-command" not in after and "[markup]" in after


def test_ioh_memory_takes_the_store_and_workspace_before_or_after_forget(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "elsewhere.db"
    project = tmp_path / "project"
    with Store.open(db) as store:
        store.remember(str(project.resolve()), "a", "1")
        store.remember(str(project.resolve()), "b", "2")

    before = main(["memory", "--store", str(db), "--workspace", str(project), "forget", "a"])
    after = main(["memory", "forget", "b", "--store", str(db), "--workspace", str(project)])

    assert (before, after) == (0, 0)
    with Store.open(db) as store:
        assert store.memory_entries(str(project.resolve())) == []
    assert logged(db, "forget") == [("a", None, None, None), ("b", None, None, None)]


def test_ioh_memory_without_a_store_says_there_is_no_memory_yet(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "none.db"

    assert main(["memory", "--store", str(missing)]) == 0
    listed = capsys.readouterr().out
    assert main(["memory", "forget", "k", "--store", str(missing)]) == 1
    forgot = capsys.readouterr().out

    assert f"no memory yet (no store at {missing})" in listed
    assert "no memory yet" in forgot
    assert not missing.exists()


def test_ioh_memory_forget_of_an_unknown_key_says_so_and_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "runs.db"
    Store.open(db).close()

    status = main(["memory", "forget", "ghost", "--store", str(db), "--workspace", str(tmp_path)])

    assert status == 1
    assert "ghost is not remembered" in capsys.readouterr().out


def test_ioh_memory_forget_of_a_bad_key_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "runs.db"
    Store.open(db).close()

    assert main(["memory", "forget", "a\x1bb", "--store", str(db)]) == 2
    assert "control characters" in capsys.readouterr().err
