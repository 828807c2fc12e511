"""What a sandbox adds to one command: each available backend against a bare subprocess.

Two commands, each run R rounds per backend, the backends interleaved round
by round so that a busy moment of the machine falls on all of them alike:

    python -c pass     the interpreter's start and exit, nothing else
    pytest (3 tests)   ``python -m pytest -q -p no:cacheprovider`` over a small
                       test file in a fresh workspace

The baseline is the same command as a plain child process (``subprocess.run``
from a thread, as the sandbox's own waits run). For each backend the script
prints the median wall time per command and the median added over the
baseline. Nothing is asserted; ``docs/MEASUREMENTS.md`` records the figures.

Usage, from the repository root::

    .venv/bin/python bench/sandbox_overhead.py              # 20 rounds
    .venv/bin/python bench/sandbox_overhead.py --rounds 50
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from io_harness.sandbox import SandboxConfig, probe
from io_harness.sandbox._select import _classes
from io_harness.sandbox._spawn import ContainedSandbox

TESTS = """
def test_one():
    assert 1 + 1 == 2

def test_two():
    assert "a".upper() == "A"

def test_three():
    assert sorted([3, 1, 2]) == [1, 2, 3]
"""

Runner = Callable[[list[str], Path], Awaitable[float]]


async def _bare(argv: list[str], workdir: Path) -> float:
    started = time.perf_counter()
    done = await asyncio.to_thread(
        subprocess.run, argv, cwd=workdir, capture_output=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"baseline failed: {done.stderr.decode()[-500:]}")
    return time.perf_counter() - started


def _in(sandbox: ContainedSandbox) -> Runner:
    async def run(argv: list[str], workdir: Path) -> float:
        started = time.perf_counter()
        outcome = await sandbox.run(argv, workdir=workdir)
        if outcome.exit_code != 0:
            raise SystemExit(f"{sandbox.name} failed: {outcome.summary}\n{outcome.stderr[-500:]}")
        return time.perf_counter() - started

    return run


async def measure(rounds: int) -> None:
    config = SandboxConfig(accept_floor=True)
    classes = _classes()
    runners: dict[str, Runner] = {"bare subprocess": _bare}
    for report in probe():
        if report.available:
            runners[report.name] = _in(classes[report.name](config))
        else:
            print(f"# {report.name}: not measured ({report.reason})")
    workspace = Path(tempfile.mkdtemp(prefix="ioh-bench-"))
    workspace.chmod(0o755)
    (workspace / "test_small.py").write_text(TESTS)
    commands = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "pytest (3 tests)": [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
    }
    print(f"# {platform.platform()}, Python {platform.python_version()}, {os.cpu_count()} CPUs")
    print(f"# {rounds} rounds per command and backend, interleaved; median wall time")
    try:
        for label, argv in commands.items():
            times: dict[str, list[float]] = {name: [] for name in runners}
            for _ in range(rounds):
                for name, runner in runners.items():
                    if name == "landlock" and os.geteuid() == 0:
                        continue  # as root it runs as nobody, who cannot reach this python
                    times[name].append(await runner(argv, workspace))
            base = statistics.median(times["bare subprocess"])
            print(f"\n{label}")
            for name, samples in times.items():
                if not samples:
                    print(f"  {name:<16} not measured as root (runs as nobody)")
                    continue
                median = statistics.median(samples)
                added = (
                    "" if name == "bare subprocess" else f"  added {1000 * (median - base):6.1f} ms"
                )
                print(f"  {name:<16} {1000 * median:7.1f} ms{added}")
    finally:
        shutil.rmtree(workspace, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    asyncio.run(measure(parser.parse_args().rounds))


if __name__ == "__main__":
    main()
