"""Effects exactly once: a run SIGKILLed at a random moment repeats no edit when resumed.

Each step's edit has a replacement that holds its search text, so an edit
applied twice shows in the file (and breaks every later edit). After the
kill and a resume in a new process, the workspace equals an uninterrupted
run's, byte for byte, and no step is missing or repeated.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import effects_worker as worker
from io_harness import Store

WORKER = Path(worker.__file__)
SEEDS = range(50)
MOMENTS = {"call": worker.EDITS + 1, "tool": 2 * worker.EDITS + 1, "intent": worker.EDITS,
           "commit": 2 * worker.EDITS + 2}  # fmt: skip
"""How many of each moment an uninterrupted run has: a journal and a commit a step; an
intent stored on its own for each note (an edit's rides with its step's journal)."""


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, str(WORKER), *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)


def _files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    folder = tmp_path_factory.mktemp("baseline")
    root = folder / "ws"
    root.mkdir()
    done = _run(str(folder / "runs.db"), str(root), "run", "never", "0")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"outcome": "success", "steps": worker.EDITS + 1}
    files = _files(root)
    assert files["story.txt"] == worker.story(worker.EDITS).encode()
    return files


@pytest.mark.parametrize("seed", SEEDS)
def test_a_run_killed_at_a_random_moment_applies_each_edit_once(
    seed: int, tmp_path: Path, uninterrupted: dict[str, bytes]
) -> None:
    rng = random.Random(seed)
    kill_at = sorted(MOMENTS)[seed % len(MOMENTS)]
    count = rng.randint(1, MOMENTS[kill_at])
    db, root = tmp_path / "runs.db", tmp_path / "ws"
    root.mkdir()

    killed = _run(str(db), str(root), "run", kill_at, str(count))
    assert killed.returncode == -signal.SIGKILL, (kill_at, count, killed.stdout, killed.stderr)
    resumed = _run(str(db), str(root), "resume", "never", "0")
    assert resumed.returncode == 0, resumed.stderr

    assert json.loads(resumed.stdout)["outcome"] == "success"
    assert _files(root) == uninterrupted
    with Store.open(db) as store:
        trace = store.trace(worker.RUN_ID)
    assert [s.step for s in trace.steps] == list(range(1, worker.EDITS + 2))
