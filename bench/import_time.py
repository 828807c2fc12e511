"""How long a fresh interpreter takes to ``import io_harness`` and to run ``ioh --help``.

Each figure is the median wall time of N fresh subprocesses (``sys.executable``),
measured from this process, so it includes starting the interpreter; the
``python -c pass`` row is that start alone. ``ioh --help`` is run the way the
console script runs it (``io_harness.cli:entry``), with its output discarded.
Then one ``-X importtime`` run of each prints the entries with the largest
cumulative time (a module's own time plus its imports'; nested entries count
again inside their parents), and the heavy dependencies each one loaded.

Compiled bytecode is cached, as in any installed copy: the interpreters run
with ``PYTHONPYCACHEPREFIX`` set to a temporary directory (removed at the end)
and ``PYTHONDONTWRITEBYTECODE`` unset, so an environment that disables
``.pyc`` files does not charge recompiling every module to each import, and
the repository's tree is not written to. ``--as-is`` keeps the environment
unchanged instead.

Usage, from the repository root::

    .venv/bin/python bench/import_time.py            # 7 runs each, top 10
    .venv/bin/python bench/import_time.py --runs 30 --top 25
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

_HELP = (
    "import sys\n"
    "from io_harness.cli import entry\n"
    "sys.argv = ['ioh', '--help']\n"
    "try:\n"
    "    entry()\n"
    "except SystemExit as stop:\n"
    "    assert stop.code in (0, None), stop.code\n"
)
_REPORT_HEAVY = (
    "import sys\n"
    "heavy = ('anthropic', 'openai', 'httpx2', 'httpx', 'mcp', 'psycopg', 'opentelemetry',"
    " 'rich', 'yaml', 'docstring_parser')\n"
    "print('HEAVY ' + ' '.join(m for m in heavy if m in sys.modules), file=sys.stderr)\n"
)
CASES = {
    "python -c pass": "pass",
    "import io_harness": "import io_harness",
    "ioh --help": _HELP,
}


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo, else what :mod:`platform` says."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def wall_seconds(code: str, env: Mapping[str, str]) -> float:
    """One fresh interpreter running ``code``, timed from here."""
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", code],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
        check=True,
    )
    return time.perf_counter() - started


def importtime(code: str, env: Mapping[str, str]) -> tuple[list[tuple[int, int, str]], str]:
    """``-X importtime`` rows of one run of ``code`` (cumulative µs, self µs, name), and
    the heavy modules it left loaded."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code + "\n" + _REPORT_HEAVY],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        check=True,
    )
    rows: list[tuple[int, int, str]] = []
    heavy = ""
    for line in done.stderr.splitlines():
        if line.startswith("HEAVY"):
            heavy = line.removeprefix("HEAVY").strip()
            continue
        if not line.startswith("import time:"):
            continue
        own, total, name = line.removeprefix("import time:").split("|")
        if own.strip().isdigit():  # skip the header row
            rows.append((int(total), int(own), name.rstrip()))
    return rows, heavy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=7, help="fresh interpreters per case")
    parser.add_argument("--top", type=int, default=10, help="-X importtime entries shown")
    parser.add_argument(
        "--as-is", action="store_true", help="keep the environment's bytecode settings"
    )
    args = parser.parse_args()
    if args.as_is:
        measure(dict(os.environ), args.runs, args.top, "as the environment says")
        return
    with tempfile.TemporaryDirectory(prefix="ioh-pyc-") as cache:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = cache
        measure(env, args.runs, args.top, "cached (a temporary PYTHONPYCACHEPREFIX)")


def measure(env: Mapping[str, str], runs: int, top: int, bytecode: str) -> None:
    """Print the machine, the median wall times and the ``-X importtime`` tops."""
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"machine: {usable} usable CPUs (nproc), {cpu_model()}")
    print(f"python:  {platform.python_implementation()} {platform.python_version()}")
    print(f"bytecode: {bytecode}")
    print(f"runs:    {runs} fresh interpreters per case, after one warm-up\n")

    for label, code in CASES.items():
        wall_seconds(code, env)  # warm the file cache and write the .pyc files
        times = [wall_seconds(code, env) for _ in range(runs)]
        print(
            f"{label:<20} median {statistics.median(times) * 1000:7.1f} ms"
            f"   min {min(times) * 1000:7.1f} ms   max {max(times) * 1000:7.1f} ms"
        )

    for label in ("import io_harness", "ioh --help"):
        rows, heavy = importtime(CASES[label], env)
        print(f"\n-X importtime, {label}: top {top} by cumulative time")
        print(f"{'cumulative':>12} {'self':>9}  module")
        for total, own, name in sorted(rows, reverse=True)[:top]:
            print(f"{total / 1000:9.1f} ms {own / 1000:6.1f} ms {name}")
        print(f"heavy dependencies loaded: {heavy or 'none'}")


if __name__ == "__main__":
    main()
