"""Durable trees: a three-level tree killed with SIGKILL at a random moment resumes to the same end.

The process dies at a random provider call, tool call or commit, while
concurrent children are mid-step; a new process resumes the tree from its
root. Every agent then completes exactly once, no step is missing or
repeated, and tokens and money equal an uninterrupted run's.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import tree_crash_worker as worker
from io_harness import Store

WORKER = Path(worker.__file__)
SEEDS = range(20)
AGENTS = 7
Outline = dict[str, tuple[str, int, int, int]]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, str(WORKER), *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)


def _outline(db: Path) -> Outline:
    """Per agent, by goal: outcome, steps, tokens, cost."""
    with Store.open(db) as store:
        nodes = store.tree(worker.ROOT_ID)
        outline = {
            n.run.goal: (
                n.run.outcome or n.run.status,
                n.run.steps,
                n.run.tokens,
                n.run.cost_micros,
            )
            for n in nodes
        }
        assert len(outline) == len(nodes), "an agent was created twice"
        for node in nodes:
            steps = [s.step for s in store.trace(node.run.id).steps]
            assert steps == list(range(1, node.run.steps + 1)), (node.run.id, steps)
        drawn = store.tree_drawn(worker.ROOT_ID)
    assert drawn == (sum(o[2] for o in outline.values()), sum(o[3] for o in outline.values()))
    return outline


def _files(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Outline, dict[str, str]]:
    folder = tmp_path_factory.mktemp("baseline")
    root = folder / "ws"
    root.mkdir()
    done = _run(str(folder / "runs.db"), str(root), "run", "never", "0")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["outcome"] == "success"
    outline = _outline(folder / "runs.db")
    assert len(outline) == AGENTS and all(o[0] == "success" for o in outline.values())
    return outline, _files(root)


@pytest.mark.parametrize("seed", SEEDS)
def test_a_tree_killed_at_a_random_moment_resumes_to_the_same_end(
    seed: int, tmp_path: Path, uninterrupted: tuple[Outline, dict[str, str]]
) -> None:
    rng = random.Random(seed)
    kill_at = ("call", "tool", "commit")[seed % 3]
    count = rng.randint(1, {"call": 14, "tool": 17, "commit": 17}[kill_at])  # all there are
    db, root = tmp_path / "runs.db", tmp_path / "ws"
    root.mkdir()

    killed = _run(str(db), str(root), "run", kill_at, str(count))
    assert killed.returncode == -signal.SIGKILL, (killed.stdout, killed.stderr)
    resumed = _run(str(db), str(root), "resume", "never", "0")
    assert resumed.returncode == 0, resumed.stderr

    outline, files = uninterrupted
    assert json.loads(resumed.stdout)["outcome"] == "success"
    assert _outline(db) == outline
    assert _files(root) == files


def test_a_childs_deferral_is_approved_in_a_new_process(
    tmp_path: Path, uninterrupted: tuple[Outline, dict[str, str]]
) -> None:
    db, root = tmp_path / "runs.db", tmp_path / "ws"
    root.mkdir()

    paused = _run(str(db), str(root), "run-ask", "never", "0")
    assert paused.returncode == 0, paused.stderr
    assert json.loads(paused.stdout)["outcome"] == "awaiting_approval"
    with Store.open(db) as store:
        waiting = store.approvals()
        assert [(store.load_run(w.run_id).goal, w.status) for w in waiting] == [
            ("leaf a2", "pending")
        ]
    assert not (root / worker.ASKED).exists()

    approved = _run(str(db), str(root), "approve", "never", "0")
    assert approved.returncode == 0, approved.stderr

    outline, files = uninterrupted
    assert json.loads(approved.stdout)["outcome"] == "success"
    assert _outline(db) == outline
    assert _files(root) == files
