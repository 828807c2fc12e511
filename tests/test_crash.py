"""Crash safety: a run killed with SIGKILL at a random step resumes in a new process.

After the resume, no step is missing or repeated and the token total equals
that of an uninterrupted run.
"""

from __future__ import annotations

import contextlib
import json
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

import crash_worker
from io_harness import RunOutcome, Store, run_sync

WORKER = Path(crash_worker.__file__)
SEEDS = range(24)


def _worker(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(WORKER), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _committed_steps(db: Path) -> int:
    """Steps the run has committed, read by another process; -1 before the run exists."""
    try:
        with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as reader:
            row = reader.execute("SELECT steps FROM runs").fetchone()
    except sqlite3.OperationalError:
        return -1
    return row[0] if row else -1


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, int]:
    root = tmp_path_factory.mktemp("baseline")
    result = run_sync(crash_worker.contract(root), crash_worker.provider(0, "none"))
    assert result.outcome is RunOutcome.SUCCESS
    return result.steps, result.usage.total_tokens


@pytest.mark.parametrize("seed", SEEDS)
def test_a_run_killed_at_a_random_step_resumes_to_the_same_result(
    seed: int, tmp_path: Path, uninterrupted: tuple[int, int]
) -> None:
    rng = random.Random(seed)
    kill_step = rng.randint(1, crash_worker.STEPS)
    kill_at = ("call", "tool", "observer", "never")[seed % 4]
    db, root = tmp_path / "runs.db", tmp_path / "ws"
    root.mkdir()

    child = _worker(str(db), str(root), "run", "crashy", str(kill_step), kill_at)
    if kill_at == "never":
        while _committed_steps(db) < max(kill_step - 1, 0) and child.poll() is None:
            time.sleep(0.001)
        time.sleep(rng.uniform(0, 0.006))
        child.send_signal(signal.SIGKILL)
    _, err = child.communicate(timeout=60)
    if kill_at != "never":
        assert child.returncode == -signal.SIGKILL, err

    resumed = _worker(str(db), str(root), "resume", "crashy", "0", "none")
    out, err = resumed.communicate(timeout=60)
    assert resumed.returncode == 0, err
    result = json.loads(out)

    steps, tokens = uninterrupted
    assert result == {"outcome": "success", "steps": steps, "tokens": tokens}
    with Store.open(db) as store:
        trace = store.trace("crashy")
    assert [s.step for s in trace.steps] == list(range(1, steps + 1))
    answers = [m.text for m in trace.messages if m.role == "assistant"]
    assert answers == [f"writing note {t}" for t in range(steps - 1)] + ["finishing"]
    assert sum(s.input_tokens + s.output_tokens for s in trace.steps) == tokens
    assert sorted(p.name for p in (root / "notes").iterdir()) == [
        f"{t}.txt" for t in range(steps - 1)
    ]
