"""``ioh tree``, and ``ioh pending`` / ``approve`` / ``deny`` on a sub-agent tree.

Trees are built through the Harness with a scripted model that answers each
agent by its goal (the first user message) and its turn, as in
``test_trees.py``. What ``ioh approve`` resumes replays a cassette recorded
from the same script, named by the root's ``ioh.provider`` label as ``ioh
run`` would store it.
"""

from __future__ import annotations

import io
import re
import subprocess
import sys
from collections.abc import Mapping, Sequence
from functools import partial
from pathlib import Path

import pytest
from rich.console import Console

import support
import tree_crash_worker
from io_harness import (
    CompletionRequest,
    CompletionResponse,
    Containment,
    Harness,
    Policy,
    RunOutcome,
    Store,
)
from io_harness.cli import main
from io_harness.cli._launch import replay_label
from io_harness.cli._tree import render_tree
from io_harness.policy import ApproveAll
from io_harness.pricing import PriceTable
from io_harness.providers import Record, Replay
from io_harness.testing import ScriptedProvider, reply
from support import USAGE, child, goal_of, spawn, write

PRICES = PriceTable({"scripted": {"input": 1, "output": 2}})
"""One call of USAGE costs 100 * 1 + 10 * 2 = 120 micro-units."""
REVIEW = Policy.default().layer("review").ask_write("c.txt")


@pytest.fixture(autouse=True)
def _wide(monkeypatch: pytest.MonkeyPatch) -> None:
    # The closing lines of a resume are wrapped at the console's width; keep paths whole.
    monkeypatch.setenv("COLUMNS", "250")


def agents(scripts: Mapping[str, Sequence[CompletionResponse]]) -> ScriptedProvider:
    """A model answering each agent from its own script, by goal and turn."""

    def answer(request: CompletionRequest) -> CompletionResponse:
        turn = sum(m.role == "assistant" for m in request.messages)
        return scripts[goal_of(request)][turn]

    return ScriptedProvider(answer)


root_contract = partial(support.contract, goal="coordinate", file="root.txt", max_steps=5)
"""The root's task: done when root.txt holds ``done``."""


def folder(path: Path) -> Path:
    path.mkdir(parents=True)
    return path


def lines_of(output: str) -> dict[str, str]:
    """The lines of ``ioh tree`` that draw an agent, by its id (guides and mark stripped)."""
    drawn = {}
    for line in output.splitlines():
        found = re.match(r"^[\s│├└─]*(\S+?)(?: \*)?\s{2}", line)
        if found and found.group(1) not in {"agent", "total:"}:
            drawn[found.group(1)] = line
    return drawn


# -- ioh tree ------------------------------------------------------------------------


@pytest.fixture
def grown(tmp_path: Path) -> Path:
    """A finished tree of four agents, priced: t → t.1, t.2 → t.2.3 (which fails)."""
    scripts = {
        "coordinate": [
            reply("splitting", [spawn("write a", "a.txt"), spawn("middle", "m.txt")], USAGE),
            reply("finishing", [write("root.txt")], USAGE),
        ],
        "write a": child("a.txt"),
        "middle": [
            reply("delegating", [spawn("leaf", "leaf.txt", max_steps=1)], USAGE),
            reply("doing it myself", [write("m.txt")], USAGE),
        ],
        "leaf": [reply("I would rather not", usage=USAGE)],
    }
    db = tmp_path / "runs.db"
    with Store.open(db) as store:
        result = Harness(
            agents(scripts), store=store, prices=PRICES, containment=Containment(max_depth=2)
        ).run_sync(root_contract(folder(tmp_path / "work")), run_id="t")
        assert result.outcome is RunOutcome.SUCCESS
        assert [n.run.id for n in store.tree("t")] == ["t", "t.1", "t.2", "t.2.3"]
    return db


@pytest.mark.parametrize("given", ["t", "t.2.3"])
def test_ioh_tree_draws_every_agent_from_the_root_and_marks_the_one_given(
    grown: Path, given: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["tree", given, "--store", str(grown)]) == 0

    out = capsys.readouterr().out
    drawn = lines_of(out)
    assert list(drawn) == ["t", "t.1", "t.2", "t.2.3"], out
    with Store.open(grown) as store:
        for node in store.tree("t"):
            run = node.run
            assert run.outcome is not None
            cells = drawn[run.id].split()
            assert run.outcome in cells and str(run.steps) in cells, drawn[run.id]
            assert f"{run.tokens:,}" in cells and f"0.{run.cost_micros:06d}" in cells
        tokens, cost = store.tree_drawn("t")
    assert "step_cap_reached" in drawn["t.2.3"] and "success" in drawn["t.2"]
    assert f"{given} *" in drawn[given] and sum(" * " in line for line in drawn.values()) == 1
    assert f"total: 4 agents, {tokens:,} tokens, 0.{cost:06d}  (* marks {given})" in out
    # Children sit under their parents.
    assert drawn["t.1"].startswith("├─ t.1") and drawn["t.2"].startswith("└─ t.2")
    assert drawn["t.2.3"].startswith("   └─ t.2.3")


def test_ioh_tree_of_a_run_in_no_tree_says_so_and_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "runs.db"
    with Store.open(db) as store:
        Harness(ScriptedProvider([reply("done", [write("root.txt")])]), store=store).run_sync(
            root_contract(folder(tmp_path / "work")), run_id="alone"
        )

    assert main(["tree", "alone", "--store", str(db)]) == 1
    said = capsys.readouterr().out
    assert said == "run alone is in no sub-agent tree (ioh show alone shows its trace)\n"

    assert main(["tree", "ghost", "--store", str(db)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: no run 'ghost'") and len(err.splitlines()) == 1


def test_ioh_tree_fits_a_terminal_of_80_columns_and_keeps_piped_lines_whole(
    grown: Path,
) -> None:
    with Store.open(grown) as store:
        nodes = store.tree("t")
        long_goal = nodes[1].run.model_copy(update={"goal": "write a " + "very " * 30 + "long"})
        nodes[1] = nodes[1].model_copy(update={"run": long_goal})
        drawn = render_tree(nodes, "t.1", drawn=store.tree_drawn("t"), priced=True)

    terminal = io.StringIO()
    Console(file=terminal, width=80, force_terminal=True, color_system=None).print(
        drawn, soft_wrap=True
    )
    shown = terminal.getvalue().splitlines()
    assert all(len(line) <= 80 for line in shown), shown
    assert any(line.startswith("├─ t.1 *") and line.endswith("very…") for line in shown), shown

    piped = io.StringIO()
    Console(file=piped, width=40).print(drawn, soft_wrap=True)
    whole = lines_of(piped.getvalue())
    assert list(whole) == ["t", "t.1", "t.2", "t.2.3"]  # one line an agent, never wrapped
    assert whole["t.1"].endswith("write a " + "very " * 10 + "v…")  # the goal's 60 characters


# -- a child's ask, decided from the CLI -------------------------------------------------

ASKING = {
    "coordinate": [
        reply("delegating", [spawn("careful", "c.txt")], USAGE),
        reply("finishing", [write("root.txt")], USAGE),
    ],
    "careful": child("c.txt"),
}


def paused_tree(tmp_path: Path) -> tuple[Path, Path]:
    """A tree whose child's write of c.txt awaits approval; the store and the workspace.

    The cassette is recorded from a run of the same script in another folder,
    its ask approved; the paused tree (and the resume ``ioh approve`` makes)
    replays it, as ``ioh run --provider replay:CASSETTE`` would.
    """
    cassette = tmp_path / "tree.jsonl"
    recorder = Record(agents(ASKING), cassette)
    recorded = Harness(
        recorder, policy=REVIEW, approver=ApproveAll(), containment=Containment(max_depth=1)
    ).run_sync(root_contract(folder(tmp_path / "recording")), run_id="t")
    assert recorded.outcome is RunOutcome.SUCCESS

    db, work = tmp_path / "runs.db", folder(tmp_path / "work")
    with Store.open(db) as store:
        paused = Harness(
            Replay(cassette), store=store, policy=REVIEW, containment=Containment(max_depth=1)
        ).run_sync(root_contract(work), run_id="t", labels=replay_label(cassette))
        assert paused.outcome is RunOutcome.AWAITING_APPROVAL
        assert [row.run_id for row in store.approvals()] == ["t.1"]
    return db, work


@pytest.mark.parametrize("typed", ["t", "t.1"])
def test_a_childs_ask_pauses_the_tree_and_ioh_approve_resumes_it_to_success(
    tmp_path: Path, typed: str, capsys: pytest.CaptureFixture[str]
) -> None:
    db, work = paused_tree(tmp_path)
    store = ["--store", str(db)]

    assert main(["pending", *store]) == 0
    assert "t.1 (tree t) step 1: write c.txt (write_file)" in capsys.readouterr().out
    assert main(["tree", "t", *store]) == 0
    out = capsys.readouterr().out
    assert "awaiting" in lines_of(out)["t.1"]
    assert "t.1 awaits approval: write c.txt (write_file)" in out
    assert f"decide: ioh approve t --store {db} [--remember]" in out

    assert main(["approve", typed, *store]) == 0

    out = capsys.readouterr().out
    assert "approved: write c.txt (write_file)" in out
    assert "outcome: success" in out and f"trace: ioh show t --store {db}" in out
    assert (work / "c.txt").read_text() == (work / "root.txt").read_text() == "done\n"
    assert main(["tree", typed, *store]) == 0
    drawn = lines_of(capsys.readouterr().out)
    assert [line.split()[-5:] for line in drawn.values()] == [
        ["success", "2", "220", "unpriced", "coordinate"],
        ["success", "1", "110", "unpriced", "careful"],
    ]
    assert main(["pending", *store]) == 0
    assert "no actions are awaiting approval" in capsys.readouterr().out


def test_a_decision_on_a_tree_names_the_childs_request_and_the_resume_goes_on_from_the_root(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, work = paused_tree(tmp_path)
    store = ["--store", str(db)]
    with Store.open(db) as opened:
        (row,) = opened.approvals("t.1")

    assert main(["approve", "t", "--request", "0123abcd", "--no-resume", *store]) == 2
    assert f"run 't.1' now awaits request {row.id}" in capsys.readouterr().err
    with Store.open(db) as opened, opened.lease("t"):  # a resume of the tree holds its root
        assert main(["approve", "t.1", "--request", row.id, "--no-resume", *store]) == 2
    assert "is being driven" in capsys.readouterr().err

    assert main(["approve", "t.1", "--request", row.id, "--no-resume", *store]) == 0
    out = capsys.readouterr().out
    assert f"the next resume performs it: ioh resume t --store {db}" in out
    assert main(["tree", "t.1", *store]) == 0
    assert "is decided; ioh resume t" in capsys.readouterr().out
    assert main(["approve", "t", *store]) == 2
    assert "already decided" in capsys.readouterr().err

    assert main(["resume", "t", *store]) == 0
    assert (work / "c.txt").exists() and (work / "root.txt").exists()
    assert main(["deny", "t", "--reason", "no", *store]) == 2
    assert "nor does any other agent of its tree" in capsys.readouterr().err


def test_ioh_runs_shows_a_paused_trees_agents_as_awaiting_not_interrupted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, root = tmp_path / "runs.db", tmp_path / "ws"
    root.mkdir()
    paused = subprocess.run(
        [sys.executable, tree_crash_worker.__file__, str(db), str(root), "run-ask", "never", "0"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert paused.returncode == 0, paused.stderr

    assert main(["runs", "--store", str(db)]) == 0

    out = capsys.readouterr().out
    assert "interrupted" not in out
    assert out.count("awaiting") >= 3  # the root, the middle agent above the child, the child
