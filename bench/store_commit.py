"""The durable cost of committing one step: PostgreSQL beside SQLite, the same StepRecord.

One scripted run (a ``list_dir`` call a step) is driven on an in-memory store
to capture a real step's record and the run's first row; then, for each
store, a fresh run is created from that row and the same record is committed
``--steps`` times (renumbered), under the run's lease as the loop commits it.
Each ``commit_step`` is timed on its own: one transaction with the step's
messages, provider attempt, tool call, events and permission rows, the
run's totals and (PostgreSQL) the lease's fencing check.

Stores:

    sqlite full        a file, WAL, synchronous=FULL: an fsync per commit
    sqlite normal      synchronous=NORMAL: no fsync per commit
    postgresql full    synchronous_commit=on: the server flushes its WAL per commit
    postgresql normal  synchronous_commit=off for the store's sessions

PostgreSQL is a throw-away server started for the run on loopback (fsync on,
the server's defaults otherwise), in a temporary folder, as tests/_postgres.py
starts one; ``--url`` measures an existing database instead (it must be an
empty database or an io-harness store).

Usage, from the repository root::

    .venv/bin/python bench/store_commit.py                  # 500 steps, 3 rounds
    .venv/bin/python bench/store_commit.py --steps 2000 --rounds 5
    .venv/bin/python bench/store_commit.py --url postgresql://me@db.example/ioh
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import importlib
import os
import platform
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

from io_harness import Budget, Store, TaskContract, WorkspaceFileContains, run
from io_harness.store._records import NewRun, StepRecord
from io_harness.testing import ScriptedProvider, call, reply

TESTS = Path(__file__).resolve().parent.parent / "tests"


def captured_step() -> tuple[NewRun, StepRecord]:
    """A real run's first row and its step 2 record, as the loop handed them to the store."""
    store = Store.memory()
    runs: list[NewRun] = []
    steps: list[StepRecord] = []
    create, commit = store.create_run, store.commit_step

    def create_run(new: NewRun) -> None:
        runs.append(new)
        create(new)

    def commit_step(run_id: str, record: StepRecord) -> None:
        steps.append(record)
        commit(run_id, record)

    store.create_run = create_run  # type: ignore[method-assign, assignment]
    store.commit_step = commit_step  # type: ignore[method-assign]
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "notes.txt").write_text("alpha\n")
        contract = TaskContract.workspace(
            "look around",
            folder,
            WorkspaceFileContains("never.txt", "x"),
            budget=Budget(max_steps=3),
        )
        listing = ScriptedProvider(lambda request: reply(calls=[call("list_dir")]))
        asyncio.run(run(contract, listing, store=store))
    store.close()
    (record,) = [r for r in steps if r.step == 2]
    return runs[0], record


def commit_times(
    store: Store, new: NewRun, record: StepRecord, steps: int, index: int
) -> list[int]:
    """Nanoseconds of each of ``steps`` commits of ``record`` into a fresh run."""
    run_id = f"bench-{index}-{uuid.uuid4().hex[:8]}"
    times = []
    with store.lease(run_id):
        store.create_run(dataclasses.replace(new, id=run_id))
        for number in range(1, steps + 1):
            step = dataclasses.replace(record, step=number, finish=None)
            started = time.perf_counter_ns()
            store.commit_step(run_id, step)
            times.append(time.perf_counter_ns() - started)
    return times


@contextlib.contextmanager
def postgres_server(url: str | None) -> Iterator[str]:
    """``url``, or a throw-away PostgreSQL server's database (fsync on) for the block."""
    if url is not None:
        yield url
        return
    sys.path.insert(0, str(TESTS))
    servers = importlib.import_module("_postgres")  # the tests' throw-away server
    cluster = servers.PostgresCluster(servers.postgres_binaries(), fast=False)
    try:
        yield cluster.create_database()
    finally:
        cluster.remove()


def quantile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile of ``values`` (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def report(label: str, rounds: list[list[int]]) -> None:
    """One line: the median, p90 and mean µs per committed step, over every round."""
    every = [ns / 1000 for times in rounds for ns in times]
    medians = ", ".join(f"{statistics.median(t) / 1000:.0f}" for t in rounds)
    print(
        f"  {label:<18} median {statistics.median(every):7.0f} µs   p90 {quantile(every, 0.9):7.0f}"
        f" µs   mean {statistics.fmean(every):7.0f} µs   (round medians: {medians})"
    )


def server_settings(url: str) -> str:
    """The PostgreSQL server's version and the settings that decide a commit's cost."""
    import psycopg

    with psycopg.connect(url) as conn:
        names = ("server_version", "fsync", "synchronous_commit", "wal_sync_method")
        values = [conn.execute(f"SHOW {name}").fetchone() for name in names]
    return ", ".join(f"{n}={v[0] if v else '?'}" for n, v in zip(names, values, strict=True))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--steps", type=int, default=500, help="commits per round (500)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per store (3)")
    parser.add_argument("--url", help="an existing PostgreSQL database instead of a throw-away")
    args = parser.parse_args(argv)
    new, record = captured_step()
    print(
        f"store_commit: {args.steps} commits x {args.rounds} rounds of one step "
        f"({len(record.messages)} messages, {len(record.tool_calls)} tool call, "
        f"{len(record.events)} events, {len(record.permissions)} permission rows)"
    )
    machine = f"{platform.platform()}, {os.cpu_count()} cores"
    print(f"machine: {machine}, Python {platform.python_version()}")
    durabilities: tuple[Literal["full", "normal"], ...] = ("full", "normal")
    with tempfile.TemporaryDirectory() as folder, postgres_server(args.url) as url:
        print(f"postgresql: {server_settings(url)} (loopback TCP)")
        print(f"sqlite: a file in {folder}")
        for backend, location in (("sqlite", str(Path(folder) / "runs.db")), ("postgresql", url)):
            for durability in durabilities:
                options: dict[str, Any] = {"durability": durability}
                with Store.open(location, **options) as store:
                    rounds = [
                        commit_times(store, new, record, args.steps, index)
                        for index in range(args.rounds)
                    ]
                report(f"{backend} {durability}", rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
