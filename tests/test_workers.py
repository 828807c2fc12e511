"""The queue: runs stored by ``enqueue`` and driven by worker processes over PostgreSQL.

Workers are real processes (``queue_worker.py``, ``ioh worker``) killed and
paused with real signals; the store's trace is the witness that every run was
driven to its end once, each step committed once.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest

import queue_worker
from _postgres import PostgresCluster
from io_harness import (
    ConfigError,
    Decision,
    Policy,
    RunOutcome,
    RunSummary,
    Store,
)
from io_harness._demo import CASSETTE, prepare
from io_harness._queue import ENTRYPOINT
from io_harness.cli import main
from io_harness.testing import ScriptedProvider

WORKER = Path(queue_worker.__file__)
IOH = Path(sys.executable).parent / "ioh"
Event = dict[str, object]


class WorkerProcess:
    """A ``queue_worker.py`` process whose stdout lines are read as they come."""

    def __init__(self, url: str, *options: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(WORKER), url, *options],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.events: list[Event] = []
        self._errors: list[str] = []
        self._arrived: queue.Queue[Event | None] = queue.Queue()
        self._readers = [
            threading.Thread(target=self._read, daemon=True),
            threading.Thread(target=self._read_errors, daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            event = json.loads(line)
            self.events.append(event)
            self._arrived.put(event)
        self._arrived.put(None)

    def _read_errors(self) -> None:
        assert self.process.stderr is not None
        self._errors.extend(self.process.stderr)

    def wait_for(self, wanted: Callable[[Event], bool], timeout: float = 60) -> Event:
        """The first event from now on that ``wanted`` accepts."""
        deadline = time.monotonic() + timeout
        while True:
            event = self._arrived.get(timeout=max(deadline - time.monotonic(), 0.01))
            assert event is not None, f"the worker ended first: {self.finish()}"
            if wanted(event):
                return event

    def finish(self, timeout: float = 120) -> str:
        """Wait for the process to end; its stderr."""
        self.process.wait(timeout)
        for reader in self._readers:
            reader.join(timeout)
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()
        return "".join(self._errors)

    def drives(self) -> list[Event]:
        return [e for e in self.events if "drive" in e]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.finish()


@pytest.fixture
def workers() -> Iterator[list[WorkerProcess]]:
    """Worker processes a test starts; any left running are killed at its end."""
    started: list[WorkerProcess] = []
    yield started
    for worker in started:
        worker.stop()


def start(started: list[WorkerProcess], url: str, *options: str) -> WorkerProcess:
    worker = WorkerProcess(url, *options)
    started.append(worker)
    return worker


def enqueue(url: str, folder: Path, count: int, policy: Policy | None = None) -> list[str]:
    """Store and queue ``count`` scripted runs, each in a workspace of its own."""

    async def queue_all(store: Store) -> list[str]:
        harness = queue_worker.harness(store, policy=policy)
        ids = []
        for number in range(count):
            root = folder / f"ws{number}"
            root.mkdir(parents=True)
            ids.append(await harness.enqueue(queue_worker.contract(root), run_id=f"run-{number}"))
        return ids

    with Store.open(url) as store:
        return asyncio.run(queue_all(store))


def jobs_left(url: str) -> int:
    """Jobs queued or being driven, in pgqueuer's table."""
    with psycopg.connect(url) as connection:
        row = connection.execute(
            "SELECT count(*) FROM pgqueuer"
            " WHERE entrypoint = %s AND status IN ('queued', 'picked')",
            (ENTRYPOINT,),
        ).fetchone()
    assert row is not None
    return int(row[0])


def assert_driven_once(url: str, run_id: str, root: Path) -> None:
    """The run succeeded with every step committed once, in order, and finished once."""
    with Store.open(url) as store:
        trace = store.trace(run_id)
    assert trace.run.outcome == RunOutcome.SUCCESS.value
    assert [s.step for s in trace.steps] == list(range(1, queue_worker.STEPS + 1))
    answers = [m.text for m in trace.messages if m.role == "assistant"]
    assert answers == queue_worker.expected_answers()
    assert [e.kind for e in trace.events].count("run_finished") == 1
    assert sorted(p.name for p in (root / "notes").iterdir()) == [
        f"{t}.txt" for t in range(queue_worker.STEPS - 1)
    ]


def test_three_workers_drive_sixty_runs_once_each_while_one_is_killed(
    postgres_url: str, tmp_path: Path, workers: list[WorkerProcess]
) -> None:
    ids = enqueue(postgres_url, tmp_path, 60)
    options = ("--concurrency", "2", "--delay", "0.02", "--drain")
    victim, *others = (start(workers, postgres_url, *options) for _ in range(3))

    victim.wait_for(lambda e: int(str(e.get("call", 0))) >= 2)  # mid-run: a step committed
    victim.process.send_signal(signal.SIGKILL)
    victim.finish()
    for worker in others:
        err = worker.finish()
        assert worker.process.returncode == 0, err

    ended = Counter(
        str(d["drive"]) for w in (victim, *others) for d in w.drives() if d["kind"] == "ended"
    )
    assert ended == Counter(ids)  # every run driven to its end by one worker, once
    assert not [d for w in others for d in w.drives() if d["kind"] == "failed"]
    for number, run_id in enumerate(ids):
        assert_driven_once(postgres_url, run_id, tmp_path / f"ws{number}")
    # The runs the killed worker had committed steps of were started again by another,
    # from their last commit: each drive of a run stores its own run_started.
    with Store.open(postgres_url) as store:
        drives = {run_id: store.trace(run_id).events for run_id in ids}
    taken_over = [
        r for r, events in drives.items() if [e.kind for e in events].count("run_started") > 1
    ]
    assert taken_over
    assert jobs_left(postgres_url) == 0


def test_a_paused_worker_past_its_lease_cannot_commit_once_continued(
    postgres_url: str, tmp_path: Path, workers: list[WorkerProcess]
) -> None:
    (run_id,) = enqueue(postgres_url, tmp_path, 1)
    slow = ("--concurrency", "1", "--heartbeat", "2", "--lease", "2", "--drain")
    paused = start(workers, postgres_url, *slow, "--delay", "1.5")
    paused.wait_for(lambda e: e.get("call") == 2)  # two steps committed, the third's call waits
    paused.process.send_signal(signal.SIGSTOP)

    taker = start(workers, postgres_url, *slow)  # takes the job once the paused one is stale
    err = taker.finish()
    assert taker.process.returncode == 0, err
    assert [(d["drive"], d["kind"]) for d in taker.drives()][-1] == (run_id, "ended")
    assert_driven_once(postgres_url, run_id, tmp_path / "ws0")

    paused.process.send_signal(signal.SIGCONT)  # its third step's answer comes, too late
    err = paused.finish()
    assert paused.process.returncode == 0, err
    (lost,) = paused.drives()
    assert lost["kind"] == "retried" and "lost its lease" in str(lost["error"])
    assert_driven_once(postgres_url, run_id, tmp_path / "ws0")  # nothing it did was committed
    assert jobs_left(postgres_url) == 0


def test_a_run_awaiting_approval_leaves_the_queue_and_is_queued_again_when_decided(
    postgres_url: str, tmp_path: Path
) -> None:
    asks = Policy.default().layer("review").ask_write("done.txt")
    (run_id,) = enqueue(postgres_url, tmp_path, 1, policy=asks)
    heard: list[tuple[str, str]] = []

    async def drain(store: Store) -> None:
        report = await queue_worker.harness(store).work(
            concurrency=1,
            drain=True,
            heartbeat_timeout=3,
            on_drive=lambda d: heard.append((d.kind, d.result.outcome.value if d.result else "")),
        )
        assert report.total == 1

    with Store.open(postgres_url) as store:
        asyncio.run(drain(store))  # returns: the awaiting run is out of the queue
        assert heard == [("ended", RunOutcome.AWAITING_APPROVAL.value)]
        assert store.load_run(run_id).status == "awaiting"
        assert jobs_left(postgres_url) == 0

        asyncio.run(queue_worker.harness(store).requeue(run_id))  # no decision yet
        asyncio.run(drain(store))
        assert heard[-1] == ("awaiting", "")
        assert jobs_left(postgres_url) == 0

        asyncio.run(queue_worker.harness(store).requeue(run_id, decision=Decision.approve()))
        assert jobs_left(postgres_url) == 1
        asyncio.run(drain(store))
    assert heard[-1] == ("ended", RunOutcome.SUCCESS.value)
    assert_driven_once(postgres_url, run_id, tmp_path / "ws0")


def test_ioh_approve_of_a_queued_run_queues_it_again_for_a_worker(
    postgres_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    asks = Policy.default().layer("review").ask_write("done.txt")
    (run_id,) = enqueue(postgres_url, tmp_path, 1, policy=asks)

    async def drain(store: Store) -> list[str]:
        heard: list[str] = []
        await queue_worker.harness(store).work(
            concurrency=1,
            drain=True,
            on_drive=lambda d: heard.append(d.result.outcome.value if d.result else d.kind),
        )
        return heard

    with Store.open(postgres_url) as store:
        assert asyncio.run(drain(store)) == [RunOutcome.AWAITING_APPROVAL.value]
        assert main(["approve", run_id, "--store", postgres_url]) == 0
        said = capsys.readouterr().out
        assert f"queued {run_id} again" in said
        assert jobs_left(postgres_url) == 1
        assert asyncio.run(drain(store)) == [RunOutcome.SUCCESS.value]
    assert_driven_once(postgres_url, run_id, tmp_path / "ws0")


def test_a_job_delivered_twice_drives_its_run_once(postgres_url: str, tmp_path: Path) -> None:
    (run_id,) = enqueue(postgres_url, tmp_path, 1)
    heard: list[str] = []
    with Store.open(postgres_url) as store:
        harness = queue_worker.harness(store)
        asyncio.run(harness.requeue(run_id))  # a second job for the same run
        assert jobs_left(postgres_url) == 2
        report = asyncio.run(
            harness.work(concurrency=1, drain=True, on_drive=lambda d: heard.append(d.kind))
        )
    assert heard == ["ended", "finished"]
    assert report.counts == Counter({"ended": 1, "finished": 1})
    assert_driven_once(postgres_url, run_id, tmp_path / "ws0")


def test_a_queued_runs_wall_budget_counts_from_its_first_drive_not_its_wait(
    postgres_url: str, tmp_path: Path
) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    task = queue_worker.contract(root)
    task = task.model_copy(
        update={"budget": task.budget.model_copy(update={"max_wall_seconds": 600})}
    )
    with Store.open(postgres_url) as store:
        harness = queue_worker.harness(store)
        run_id = asyncio.run(harness.enqueue(task))
        # An hour in the queue, far past its 600 s budget, before a worker takes it.
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute("UPDATE runs SET started_at = started_at - 3600 WHERE id = %s", (run_id,))
        queued_at = store.load_run(run_id).started_at
        report = asyncio.run(harness.work(concurrency=1, drain=True))
        run = store.load_run(run_id)
    assert report.counts == Counter({"ended": 1})
    assert run.outcome == RunOutcome.SUCCESS.value
    assert run.started_at > queued_at + 3000  # its clock started when a worker took it
    assert "ioh.queue.waiting" not in run.labels


def test_provider_for_gives_each_queued_run_the_model_its_labels_name(
    postgres_url: str, tmp_path: Path
) -> None:
    with Store.open(postgres_url) as store:
        harness = queue_worker.harness(store)
        for model in ("small", "large"):
            root = tmp_path / model
            root.mkdir()
            contract = queue_worker.contract(root)
            coroutine = harness.enqueue(contract, run_id=model, labels={"model": model})
            asyncio.run(coroutine)

        def provider_for(run: RunSummary) -> ScriptedProvider:
            scripted = queue_worker.provider()
            scripted.model = run.labels["model"]
            return scripted

        asyncio.run(harness.work(drain=True, provider_for=provider_for))
        for model in ("small", "large"):
            calls = store.trace(model).provider_calls
            assert {call.model for call in calls} == {model}
            assert store.trace(model).run.outcome == RunOutcome.SUCCESS.value


def test_a_fleet_limit_holds_across_workers(postgres_url: str, tmp_path: Path) -> None:
    ids = enqueue(postgres_url, tmp_path, 4)

    async def two_workers(store: Store) -> None:
        harness = queue_worker.harness(store, delay=0.05)
        await asyncio.gather(
            *(harness.work(concurrency=2, drain=True, fleet_limit=1) for _ in range(2))
        )

    with Store.open(postgres_url) as store:
        asyncio.run(two_workers(store))
        spans = sorted(
            (steps[0].started_at, steps[-1].finished_at)
            for steps in (store.trace(run_id).steps for run_id in ids)
        )
    # one run at a time across both workers: each run's steps end before the next's begin
    assert all(ended <= begun for (_, ended), (begun, _) in itertools.pairwise(spans))
    for number, run_id in enumerate(ids):
        assert_driven_once(postgres_url, run_id, tmp_path / f"ws{number}")


def test_a_stopped_worker_hands_its_runs_back_to_the_queue(
    postgres_url: str, tmp_path: Path, workers: list[WorkerProcess]
) -> None:
    (run_id,) = enqueue(postgres_url, tmp_path, 1)
    stopped = start(workers, postgres_url, "--concurrency", "1", "--delay", "0.5")
    stopped.wait_for(lambda e: e.get("call") == 1)
    stopped.process.send_signal(signal.SIGINT)
    stopped.finish()
    assert [(d["drive"], d["kind"]) for d in stopped.drives()] == [(run_id, "handed_back")]
    assert jobs_left(postgres_url) == 1  # queued again at once, not when a heartbeat times out

    taker = start(workers, postgres_url, "--drain")
    err = taker.finish()
    assert taker.process.returncode == 0, err
    assert_driven_once(postgres_url, run_id, tmp_path / "ws0")


def test_a_worker_reconnects_across_a_database_restart_and_each_run_finishes_once(
    postgres_cluster: PostgresCluster,
    postgres_url: str,
    tmp_path: Path,
    workers: list[WorkerProcess],
) -> None:
    ids = enqueue(postgres_url, tmp_path, 4)
    options = ("--heartbeat", "3", "--lease", "3", "--delay", "0.3", "--drain")
    worker = start(workers, postgres_url, *options)
    worker.wait_for(lambda e: e.get("call") == 1)
    postgres_cluster.restart()  # the queue's connections and the store's pool are cut
    err = worker.finish()
    assert worker.process.returncode == 0, err
    ended = Counter(str(d["drive"]) for d in worker.drives() if d["kind"] == "ended")
    assert ended == Counter(ids)
    for number, run_id in enumerate(ids):
        assert_driven_once(postgres_url, run_id, tmp_path / f"ws{number}")
    assert jobs_left(postgres_url) == 0


# -- the command line ---------------------------------------------------------------


def _ioh(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{IOH.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run(
        [str(IOH), *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=300,
        check=False,
    )


def test_ioh_enqueue_then_ioh_worker_drain_drives_the_runs(
    postgres_url: str, tmp_path: Path
) -> None:
    contracts = [prepare(tmp_path / f"demo{n}") for n in range(2)]
    for number, contract in enumerate(contracts):
        queued = _ioh(
            "enqueue", str(contract), "--provider", f"replay:{CASSETTE}",
            "--store", postgres_url, "--run-id", f"demo-{number}", "--no-sandbox",
            cwd=tmp_path,
        )  # fmt: skip
        assert queued.returncode == 0, queued.stderr
        assert f"queued demo-{number}" in queued.stdout

    worked = _ioh("worker", "--store", postgres_url, "--drain", "--concurrency", "2", cwd=tmp_path)
    assert worked.returncode == 0, worked.stderr
    assert sorted(line for line in worked.stdout.splitlines() if ": success" in line) == [
        "demo-0: success (4 steps)",
        "demo-1: success (4 steps)",
    ]
    with Store.open(postgres_url) as store:
        assert {r.id: r.outcome for r in store.runs()} == {"demo-0": "success", "demo-1": "success"}
    assert jobs_left(postgres_url) == 0


@pytest.mark.parametrize("command", ["enqueue", "worker"])
def test_the_queue_on_a_sqlite_store_is_a_one_line_config_error(
    command: str, tmp_path: Path
) -> None:
    contract = prepare(tmp_path / "demo")
    args = [str(contract), "--provider", f"replay:{CASSETTE}"] if command == "enqueue" else []
    done = _ioh(command, *args, "--store", str(tmp_path / "runs.db"), cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.startswith(f"error: ioh {command}: the queue needs PostgreSQL")
    assert len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "runs.db").exists()


@pytest.mark.parametrize("command", ["enqueue", "worker"])
def test_an_unreachable_queue_database_is_a_clean_storage_error(
    command: str, tmp_path: Path
) -> None:
    contract = prepare(tmp_path / "demo")
    args = [str(contract), "--provider", f"replay:{CASSETTE}"] if command == "enqueue" else []
    nowhere = "postgresql://nobody:secret@127.0.0.1:1/runs"
    done = _ioh(command, *args, "--store", nowhere, cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.startswith("error: ")
    assert len(done.stderr.strip().splitlines()) == 1
    assert "secret" not in done.stderr
    assert "Traceback" not in done.stderr


def test_the_api_refuses_a_queue_on_a_sqlite_store(tmp_path: Path) -> None:
    with Store.open(tmp_path / "runs.db") as store:
        harness = queue_worker.harness(store)
        contract = queue_worker.contract(tmp_path)
        with pytest.raises(ConfigError, match="the queue needs a PostgreSQL store"):
            asyncio.run(harness.enqueue(contract))
        with pytest.raises(ConfigError, match="the queue needs a PostgreSQL store"):
            asyncio.run(harness.work(drain=True))
        assert store.runs() == []


def test_the_workers_benchmark_runs_and_prints_its_figures(postgres_url: str) -> None:
    bench = Path(__file__).parent.parent / "bench" / "workers.py"
    done = subprocess.run(
        [sys.executable, str(bench), "--quick", "--url", postgres_url],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    for label in ("[throughput]", "1 worker", "2 workers", "runs/s", "steps/s", "[footprint]"):
        assert label in done.stdout
