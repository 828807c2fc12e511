"""Runs and steps per second that 1, 2 and 4 worker processes drive from one PostgreSQL queue,
and what the database holds per step afterwards.

Throughput: for each worker count W, a fresh database gets ``--runs`` scripted
runs queued (``Harness.enqueue``), each of ``--steps`` steps (every step writes
one small file; the last writes the file the criterion wants). Then W worker
processes, started and ready first, are released together and drain the queue
with ``Harness.work(concurrency=--concurrency, drain=True)``. The model is
:class:`io_harness.testing.ScriptedProvider`, answering after ``--latency``
seconds (0: only the harness, the store and the queue cost anything). The
span is the database's own record: from the first step's start to the last
step's commit, over all runs; runs/s and steps/s are counted over it.

Footprint: after the last worker count, each table's rows and bytes (indexes
and TOAST included, after a VACUUM), per step. The durable cost of one step's
commit, PostgreSQL beside SQLite, is ``bench/store_commit.py``'s.

The PostgreSQL server is a throw-away cluster in a temporary folder on
loopback, started as the tests start theirs (``tests/_postgres.py``) but with
``fsync`` on, so a commit costs what a durable one does; ``--url`` uses a
database of yours instead (it must be empty: each worker count drops and
recreates the store's and the queue's tables in it, so do not point it at
data you keep).

Usage, from the repository root::

    .venv/bin/python bench/workers.py                  # 100 runs of 5 steps, W = 1, 2, 4
    .venv/bin/python bench/workers.py --latency 0.05   # a model that takes 50 ms a call
    .venv/bin/python bench/workers.py --quick          # small, to see it works
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # tests/_postgres.py: the throw-away cluster


def _workload(steps: int, latency: float) -> Any:
    """The scripted model: a note a step, then done.txt; each answer after ``latency``."""
    from io_harness import CompletionRequest, CompletionResponse
    from io_harness.testing import ScriptedProvider, call, reply

    async def respond(request: CompletionRequest) -> CompletionResponse:
        turn = sum(m.role == "assistant" for m in request.messages)
        if latency:
            await asyncio.sleep(latency)
        if turn < steps - 1:
            return reply(f"note {turn}", [call("write_file", path=f"n{turn}.txt", content="n\n")])
        return reply("done", [call("write_file", path="done.txt", content="done\n")])

    return ScriptedProvider(respond)


def _contract(root: Path, steps: int) -> Any:
    from io_harness import Budget, TaskContract, WorkspaceFileContains

    return TaskContract.workspace(
        "write the notes, then done.txt",
        root,
        WorkspaceFileContains("done.txt", "done"),
        budget=Budget(max_steps=steps + 2),
    )


def _harness(store: Any, steps: int, latency: float) -> Any:
    from io_harness import NO_SANDBOX, Harness

    return Harness(_workload(steps, latency), store=store, sandbox=NO_SANDBOX)


# -- a worker process ---------------------------------------------------------------


def worker_main(url: str, steps: int, concurrency: int, latency: float) -> None:
    """Open the store, say ``ready``, wait for a line on stdin, then drain the queue."""
    from io_harness import Store

    with Store.open(url) as store:
        harness = _harness(store, steps, latency)
        print("ready", flush=True)
        sys.stdin.readline()
        report = asyncio.run(harness.work(concurrency=concurrency, drain=True))
    print(json.dumps(dict(report.counts)), flush=True)


# -- the measurements -----------------------------------------------------------------


@contextmanager
def _database(url: str | None) -> Iterator[tuple[str, str]]:
    """A PostgreSQL URL to measure on (and how it was got): ``url``, or a fresh cluster's."""
    if url is not None:
        yield url, "the database given (--url)"
        return
    from _postgres import PostgresCluster, postgres_binaries

    cluster = PostgresCluster(postgres_binaries(), fast=False)
    try:
        yield cluster.url(), f"a throw-away cluster (fsync on) in {cluster.folder}"
    finally:
        cluster.remove()


def _fresh(url: str) -> None:
    """Empty the database of ``url``: the store's tables and the queue's go."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute("DROP SCHEMA public CASCADE")
        admin.execute("CREATE SCHEMA public")


def _queue_runs(url: str, folder: Path, runs: int, steps: int) -> None:
    from io_harness import Store

    async def queue_all(store: Any) -> None:
        harness = _harness(store, steps, 0.0)
        for number in range(runs):
            root = folder / f"ws{number}"
            root.mkdir(parents=True)
            await harness.enqueue(_contract(root, steps), run_id=f"run-{number:05d}")

    with Store.open(url) as store:
        asyncio.run(queue_all(store))


def _span(url: str) -> tuple[float, int, int]:
    """Seconds from the first step's start to the last commit, the steps, the finished runs."""
    import psycopg

    with psycopg.connect(url) as connection:
        row = connection.execute(
            "SELECT min(started_at), max(finished_at), count(*) FROM steps"
        ).fetchone()
        done = connection.execute("SELECT count(*) FROM runs WHERE outcome = 'success'").fetchone()
    assert row is not None and done is not None
    return float(row[1]) - float(row[0]), int(row[2]), int(done[0])


def footprint(url: str) -> list[tuple[str, int, int]]:
    """Each table of the database: its rows and its bytes (with indexes and TOAST)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute("VACUUM ANALYZE")
        tables = [
            str(row[0])
            for row in connection.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename"
            )
        ]
        sizes = []
        for table in tables:
            row = connection.execute(
                f"SELECT count(*), pg_total_relation_size('{table}') FROM {table}"
            ).fetchone()
            assert row is not None
            sizes.append((table, int(row[0]), int(row[1])))
    return sizes


def throughput(url: str, workers: int, args: argparse.Namespace) -> dict[str, float]:
    _fresh(url)
    with tempfile.TemporaryDirectory(prefix="ioh-bench-workers-") as scratch:
        _queue_runs(url, Path(scratch), args.runs, args.steps)
        command = [
            sys.executable, __file__, "--worker", url, "--steps", str(args.steps),
            "--concurrency", str(args.concurrency), "--latency", str(args.latency),
        ]  # fmt: skip
        processes = [
            subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            for _ in range(workers)
        ]
        for process in processes:
            assert process.stdout is not None
            assert process.stdout.readline().strip() == "ready"
        started = time.perf_counter()
        for process in processes:
            assert process.stdin is not None
            process.stdin.write("go\n")
            process.stdin.flush()
        for process in processes:
            process.communicate(timeout=1800)
            assert process.returncode == 0, f"a worker failed ({process.returncode})"
        wall = time.perf_counter() - started
    span, steps, done = _span(url)
    assert done == args.runs, f"{done} of {args.runs} runs succeeded"
    return {"runs_per_s": done / span, "steps_per_s": steps / span, "span": span, "wall": wall}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=100, help="runs queued per worker count")
    parser.add_argument("--steps", type=int, default=5, help="steps of each run")
    parser.add_argument("--concurrency", type=int, default=4, help="runs at once per worker")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds a model call takes")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--url", help="an empty PostgreSQL database to use (it is wiped)")
    parser.add_argument("--quick", action="store_true", help="20 runs, 1 and 2 workers")
    parser.add_argument("--worker", metavar="URL", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker is not None:
        worker_main(args.worker, args.steps, args.concurrency, args.latency)
        return
    if args.quick:
        args.runs, args.workers = 20, [1, 2]

    python = platform.python_version()
    print(f"machine: {platform.platform()}, {os.cpu_count()} CPUs, Python {python}")
    with _database(args.url) as (url, where):
        print(f"PostgreSQL: {where}")
        print(
            f"\n[throughput] {args.runs} runs of {args.steps} steps, {args.concurrency} runs at "
            f"once per worker, model latency {args.latency * 1000:.0f} ms"
        )
        for workers in args.workers:
            got = throughput(url, workers, args)
            print(
                f"  {workers} worker{'s' if workers != 1 else ' '}: "
                f"{got['runs_per_s']:7.1f} runs/s  {got['steps_per_s']:7.1f} steps/s  "
                f"(span {got['span']:.2f} s, wall {got['wall']:.2f} s)"
            )

        steps = args.runs * args.steps
        print(f"\n[footprint] after {args.runs} runs of {args.steps} steps ({steps} steps)")
        for table, rows, size in footprint(url):
            if rows:
                print(
                    f"  {table:<20} {rows:7d} rows ({rows / steps:5.2f} a step)  "
                    f"{size / 1024:8.0f} KiB ({size / steps:6.0f} B a step)"
                )


if __name__ == "__main__":
    main()
