"""``ioh runs --label KEY=VALUE --status STATUS`` and ``ioh show RUN_ID --json``."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
from functools import partial
from pathlib import Path

import pytest

import support
from io_harness import (
    CompletionRequest,
    CompletionResponse,
    Harness,
    Store,
)
from io_harness.cli import main
from io_harness.testing import ScriptedProvider, call, reply

contract = partial(
    support.contract,
    goal="write hello to out.txt",
    file="out.txt",
    needle="hello",
    max_steps=1,
    max_retries=0,
)
"""The task of every run here, in a folder of its own (made by the caller)."""


def solves() -> ScriptedProvider:
    return ScriptedProvider([reply(calls=[call("write_file", path="out.txt", content="hello")])])


def idles() -> ScriptedProvider:
    return ScriptedProvider([reply("nothing to do")])


async def hangs_until_cancelled(store: Store, folder: Path, run_id: str) -> None:
    """A run stopped part-way, its process gone in effect: ``running``, and nobody drives it."""
    asked = asyncio.Event()

    async def never(_request: CompletionRequest) -> CompletionResponse:
        asked.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    harness = Harness(ScriptedProvider(never), store=store)
    folder.mkdir(exist_ok=True)
    task = asyncio.create_task(harness.run(contract(folder), run_id=run_id, labels={"team": "a"}))
    await asked.wait()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


@pytest.fixture
def stored(tmp_path: Path) -> Path:
    """A store of runs, oldest first: a1-a3 (team a; a2 not verified), b1-b3 (team b), and
    a4 (team a, interrupted)."""
    path = tmp_path / "runs.db"

    async def fill() -> None:
        with Store.open(path) as store:
            for run_id, team, provider in [
                ("a1", "a", solves()),
                ("a2", "a", idles()),
                ("a3", "a", solves()),
                ("b1", "b", solves()),
                ("b2", "b", solves()),
                ("b3", "b", idles()),
            ]:
                (tmp_path / run_id).mkdir(exist_ok=True)
                await Harness(provider, store=store).run(
                    contract(tmp_path / run_id),
                    run_id=run_id,
                    labels={"team": team, "kind": "odd" if run_id[1] in "13" else "even"},
                )
            await hangs_until_cancelled(store, tmp_path / "a4", "a4")

    asyncio.run(fill())
    return path


def listed(path: Path, capsys: pytest.CaptureFixture[str], *words: str) -> list[str]:
    """The run ids ``ioh runs`` lists, newest first."""
    assert main(["runs", "--store", str(path), *words]) == 0
    return ids(capsys.readouterr().out)


def ids(listing: str) -> list[str]:
    """The run ids of a listing: the first word of each line under the header, but the note
    on interrupted runs."""
    lines = listing.splitlines()[1:]
    return [line.split()[0] for line in lines if not line.startswith("interrupted:")]


def test_label_filters_apply_before_the_limit(
    stored: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The newest two runs are team a's a4 and team b's b3: filtering after the limit
    # would list one run of team a, or none of team b's odd ones.
    assert listed(stored, capsys, "--label", "team=a", "--limit", "2") == ["a4", "a3"]
    assert listed(stored, capsys, "--label", "team=b", "--label", "kind=odd") == ["b3", "b1"]
    assert listed(stored, capsys, "--label", "team=b", "--limit", "1") == ["b3"]


@pytest.mark.parametrize(
    ("status", "runs"),
    [
        ("success", ["b2", "b1", "a3", "a1"]),
        ("verified", ["b2", "b1", "a3", "a1"]),
        ("step_cap_reached", ["b3", "a2"]),
        ("not_verified", ["b3", "a2"]),
        ("finished", ["b3", "b2", "b1", "a3", "a2", "a1"]),
        ("interrupted", ["a4"]),
        ("running", []),
    ],
)
def test_a_status_filter_keeps_the_runs_in_that_status_or_with_that_outcome(
    stored: Path, capsys: pytest.CaptureFixture[str], status: str, runs: list[str]
) -> None:
    assert main(["runs", "--store", str(stored), "--status", status]) == 0
    out = capsys.readouterr().out
    if not runs:
        assert out == f"no runs match --status {status}\n"
    else:
        assert ids(out) == runs


def test_status_and_labels_combine_and_the_limit_counts_what_matches(
    stored: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    words = ["--status", "success", "--label", "team=a", "--limit", "1"]
    assert main(["runs", "--store", str(stored), *words]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines[1:]] == ["a3"]

    assert (
        main(["runs", "--store", str(stored), "--status", "interrupted", "--label", "team=b"]) == 0
    )
    assert capsys.readouterr().out == "no runs match --label team=b --status interrupted\n"


@pytest.mark.parametrize(
    ("words", "said"),
    [
        (["--label", "team"], "error: --label takes KEY=VALUE (a label and its value), not 'team'"),
        (["--label", "=a"], "error: --label takes KEY=VALUE"),
        (["--label", "t=a", "--label", "t=b"], "error: --label t is given twice with two values"),
        (["--status", "sucess"], "error: --status 'sucess' is not a status or an outcome"),
    ],
)
def test_a_bad_filter_is_one_line_and_status_2(
    stored: Path, capsys: pytest.CaptureFixture[str], words: list[str], said: str
) -> None:
    assert main(["runs", "--store", str(stored), *words]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith(said) and err.count("\n") == 1


def test_show_json_prints_the_whole_trace_and_nothing_else(
    stored: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["show", "a1", "--json", "--store", str(stored)]) == 0
    out, err = capsys.readouterr()

    shown = json.loads(out)
    with Store.open(stored) as store:
        assert shown == store.trace("a1").model_dump(mode="json")
    assert err == ""
    assert shown["run"]["labels"] == {"team": "a", "kind": "odd"}
    assert [call["name"] for call in shown["tool_calls"]] == ["write_file"]
    assert [check["passed"] for check in shown["verifications"]] == [True]


def test_show_json_of_a_damaged_store_is_still_json_with_the_warning_on_stderr(
    stored: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with contextlib.closing(sqlite3.connect(stored)) as db:
        db.execute("UPDATE tool_calls SET result = CAST(X'ff6f6b' AS TEXT) WHERE run_id = 'a1'")
        db.commit()

    assert main(["show", "a1", "--json", "--store", str(stored)]) == 0
    out, err = capsys.readouterr()

    assert json.loads(out)["tool_calls"][0]["result"] == "\ufffdok"
    assert err.startswith("warning: ") and "not UTF-8" in err
