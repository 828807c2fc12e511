"""The benchmark scripts keep running as the code changes (figures are not asserted)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).parent.parent / "bench"


def test_the_step_overhead_benchmark_runs_and_prints_its_figures() -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH / "step_overhead.py"), "--steps", "12", "--runs", "1"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )

    assert done.returncode == 0, done.stdout + done.stderr
    for label in ("[full]", "[normal]", "[memory]", "harness cost per step", "split commit"):
        assert label in done.stdout


def test_the_sandbox_overhead_benchmark_runs_and_prints_its_figures() -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH / "sandbox_overhead.py"), "--rounds", "1"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )

    assert done.returncode == 0, done.stdout + done.stderr
    for label in ("python -c pass", "pytest (3 tests)", "bare subprocess", "floor"):
        assert label in done.stdout


def test_the_store_commit_benchmark_runs_and_prints_its_figures() -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH / "store_commit.py"), "--steps", "20", "--rounds", "1"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )

    assert done.returncode == 0, done.stdout + done.stderr
    for label in ("sqlite full", "postgresql full"):
        assert label in done.stdout


def test_the_tree_spawn_benchmark_runs_and_prints_its_figures() -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH / "tree_spawn.py"), "--quick", "--split"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )

    assert done.returncode == 0, done.stdout + done.stderr
    for label in ("[spawn cost]", "per child", "target:", "[fan-out]", "max RSS", "[split]"):
        assert label in done.stdout
