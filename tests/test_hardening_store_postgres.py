"""Hardening of the PostgreSQL store's leases (issue 24, item 5): a driver that died gives its
run up at once, and a live one is named, with its lease's expiry, to whoever asks for it."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from _postgres import PostgresCluster
from io_harness import (
    Budget,
    ResumeError,
    RunOutcome,
    StorageError,
    Store,
    TaskContract,
    WorkspaceFileContains,
    resume,
    run,
)
from io_harness.testing import ScriptedProvider, call, reply
from support import line_from

LONG_LEASE = 600.0
"""Far longer than any wait here: a lease that must expire first would fail the test."""


@pytest.fixture
def opened() -> Iterator[list[Store]]:
    """Stores a test opens, closed after it (before its database is dropped)."""
    stores: list[Store] = []
    yield stores
    for store in stores:
        store.close()


def open_store(stores: list[Store], url: str, **options: float) -> Store:
    store = Store.open(url, **options)  # type: ignore[arg-type]
    stores.append(store)
    return store


def within(condition: Callable[[], bool], seconds: float = 30.0) -> bool:
    """Whether ``condition`` holds at some point in the next ``seconds`` (polled)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if condition():
                return True
        except StorageError:  # a store reconnecting after a restart answers again soon
            pass
        time.sleep(0.05)
    return False


CRASHING_DRIVER = """
import asyncio, sys
from io_harness import Budget, Store, TaskContract, WorkspaceFileContains, run
from io_harness.testing import ScriptedProvider, call, reply

store = Store.open({url!r}, lease_seconds={lease})

def answer(request):
    print("asking", flush=True)
    sys.stdin.readline()  # the test kills this process here, its lease unexpired
    return reply(calls=[call("list_dir")])

contract = TaskContract.workspace(
    "look around", {root!r}, WorkspaceFileContains("never.txt", "x"), budget=Budget(max_steps=3)
)
asyncio.run(run(contract, ScriptedProvider([reply(calls=[call("list_dir")]), answer]),
                store=store, run_id="r"))
"""


def test_a_killed_drivers_run_is_interrupted_and_resumed_at_once_not_after_its_lease(
    tmp_path: Path, postgres_url: str, opened: list[Store]
) -> None:
    root = tmp_path / "project"
    root.mkdir()
    script = CRASHING_DRIVER.format(url=postgres_url, lease=LONG_LEASE, root=str(root))
    with subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as driver:
        try:
            assert line_from(driver) == "asking\n"
            store = open_store(opened, postgres_url, lease_seconds=LONG_LEASE)
            assert store.driven("r")
        finally:
            driver.kill()  # SIGKILL: nothing of it runs to give its lease back
            driver.wait(timeout=60)

    # Its lease row has ten minutes to run, but its session died with it.
    assert within(lambda: not store.driven("r"))
    (summary,) = store.runs()
    assert summary.status == "running" and store.status_now(summary) == "interrupted"
    done = asyncio.run(
        resume("r", ScriptedProvider([reply(calls=[call("list_dir")])] * 2), store=store)
    )
    assert done.outcome is RunOutcome.STEP_CAP_REACHED
    assert [step.step for step in store.trace("r").steps] == [1, 2, 3]


def test_a_live_holder_is_named_with_its_lease_expiry_to_a_writer_it_refuses(
    postgres_url: str, opened: list[Store]
) -> None:
    holder = open_store(opened, postgres_url, lease_seconds=LONG_LEASE)
    other = open_store(opened, postgres_url, lease_seconds=LONG_LEASE)
    with holder.lease("r"):
        assert other.driven("r")
        with pytest.raises(ResumeError) as refused, other.lease("r"):
            pass
    said = str(refused.value)
    assert "is being driven by another writer" in said
    assert f"{socket.gethostname()}:{os.getpid()}:" in said  # host:pid:token
    assert "database session is open" in said
    assert " UTC (in " in said and "its lease runs to 2" in said and "\n" not in said
    with other.lease("r"):  # given back: taken at once
        assert holder.driven("r")


def test_a_second_hold_of_one_run_through_one_store_names_this_process(
    postgres_url: str, opened: list[Store]
) -> None:
    store = open_store(opened, postgres_url)
    with (
        store.lease("r"),
        pytest.raises(ResumeError, match="this process") as refused,
        store.lease("r"),
    ):
        pass
    assert f":{os.getpid()}:" in str(refused.value)


def test_a_paused_holders_expired_lease_is_taken_though_its_session_is_open(
    postgres_url: str, opened: list[Store]
) -> None:
    """The session says a holder lives, not that it still renews: an expired lease is
    taken whoever still has a session, and the taker's own lease then stands for it."""
    late = open_store(opened, postgres_url, lease_seconds=0.5, heartbeat_seconds=3600)
    taker = open_store(opened, postgres_url, lease_seconds=LONG_LEASE)
    third = open_store(opened, postgres_url, lease_seconds=LONG_LEASE)
    with late.lease("r"):
        assert within(lambda: not taker.driven("r"))
        with taker.lease("r"):
            assert third.driven("r")
            with pytest.raises(ResumeError, match="database session is open"), third.lease("r"):
                pass


def test_a_holder_whose_session_a_restart_cut_holds_its_run_again_from_its_heartbeat(
    postgres_url: str, postgres_cluster: PostgresCluster, opened: list[Store]
) -> None:
    holder = open_store(opened, postgres_url, lease_seconds=LONG_LEASE, heartbeat_seconds=0.2)
    other = open_store(opened, postgres_url, lease_seconds=LONG_LEASE)
    with holder.lease("r"):
        postgres_cluster.restart()  # every session is cut, the holder's lease session too
        assert within(lambda: other.driven("r"))
        with pytest.raises(ResumeError, match="database session is open"), other.lease("r"):
            pass


def test_a_finished_runs_lease_given_back_is_not_driven(
    tmp_path: Path, postgres_url: str, opened: list[Store]
) -> None:
    store = open_store(opened, postgres_url)
    contract = TaskContract.workspace(
        "look around", tmp_path, WorkspaceFileContains("never.txt", "x"), budget=Budget(max_steps=1)
    )
    result = asyncio.run(
        run(contract, ScriptedProvider([reply(calls=[call("list_dir")])]), store=store)
    )
    assert not store.driven(result.run_id)
    (summary,) = store.runs()
    assert store.status_now(summary) == "finished"
