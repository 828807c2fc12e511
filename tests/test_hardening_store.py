"""Hardening of the store (issue 24): a store on a read-only filesystem is read (item 7), memory
names a workspace one way whatever way it is written (item 8), and generated run ids do not
collide however many runs start at once (item 20)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import re
import shlex
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import support
from io_harness import (
    ConfigError,
    Harness,
    Store,
    run,
)
from io_harness._preflight import new_run_id
from io_harness.store._schema import MIGRATIONS, SCHEMA_VERSION
from io_harness.testing import ScriptedProvider, call, reply

LISTING = reply(calls=[call("list_dir")])


contract = functools.partial(
    support.contract, goal="look around", file="never.txt", needle="x", max_steps=1
)
"""A task that never succeeds (nothing writes never.txt): it runs its steps."""


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "notes.txt").write_text("alpha\n")
    return root


# -- item 7: a store on a read-only filesystem ---------------------------------------------

CLI = "import sys; from io_harness.cli import main; sys.exit(main(sys.argv[1:]))"


@functools.cache
def _read_only_mounts() -> str | None:
    """Why a folder cannot be mounted read-only for a command here, or ``None`` if it can."""
    if not sys.platform.startswith("linux") or shutil.which("unshare") is None:
        return "read-only bind mounts need Linux and unshare"
    probe = subprocess.run(
        ["unshare", "--mount", "--map-root-user", "true"],
        capture_output=True,
        timeout=60,
        check=False,
    )
    return None if probe.returncode == 0 else "no mount namespace may be made here"


def read_only(folder: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` where ``folder`` is mounted read-only (its own mount namespace)."""
    why = _read_only_mounts()
    if why is not None:
        pytest.skip(why)
    place = shlex.quote(str(folder))
    script = (
        f"mount --bind {place} {place} && mount -o remount,bind,ro {place} && "
        f"exec {shlex.join(argv)}"
    )
    return subprocess.run(
        ["unshare", "--mount", "--map-root-user", "sh", "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def ioh_read_only(folder: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    return read_only(folder, sys.executable, "-c", CLI, *arguments)


@pytest.fixture(params=["closed", "open-elsewhere"])
def read_only_store(
    request: pytest.FixtureRequest, workspace: Path, tmp_path: Path
) -> Iterator[Path]:
    """A store holding a finished run ``done`` and an interrupted one ``cut``, in a folder the
    test mounts read-only: closed (no -wal left), or held open by this process meanwhile
    (its -wal and -shm beside it, the runs' commits in the -wal)."""
    path = tmp_path / "stores" / "runs.db"
    store = Store.open(path)
    asyncio.run(run(contract(workspace), ScriptedProvider([LISTING]), store=store, run_id="done"))
    with pytest.raises(KeyboardInterrupt):
        stopped = ScriptedProvider([LISTING, KeyboardInterrupt()])
        asyncio.run(run(contract(workspace, max_steps=3), stopped, store=store, run_id="cut"))
    if request.param == "closed":
        store.close()
        assert not path.with_name("runs.db-wal").exists()
    try:
        yield path
    finally:
        store.close()


def test_a_store_on_a_read_only_filesystem_is_listed_shown_and_reported(
    read_only_store: Path, tmp_path: Path
) -> None:
    store, folder = str(read_only_store), read_only_store.parent
    listed = ioh_read_only(folder, "runs", "--store", store)
    assert listed.returncode == 0, listed.stderr
    assert "done" in listed.stdout and "cut" in listed.stdout
    assert re.search(r"cut\b.*interrupted", listed.stdout), listed.stdout

    shown = ioh_read_only(folder, "show", "done", "--store", store)
    assert shown.returncode == 0, shown.stderr
    assert "list_dir" in shown.stdout

    page = tmp_path / "done.html"
    reported = ioh_read_only(folder, "report", "done", "--store", store, "-o", str(page))
    assert reported.returncode == 0, reported.stderr
    assert "list_dir" in page.read_text()


WRITES = """
import asyncio, sys
from io_harness import Decision, StorageError, Store, resume
from io_harness.testing import ScriptedProvider

store = Store.open(sys.argv[1])
print("read_only", store.read_only, [run.id for run in store.runs()])
attempts = {
    "lease": lambda: store.lease("cut"),
    "resume": lambda: asyncio.run(resume("cut", ScriptedProvider([]), store=store)),
    "remember": lambda: store.remember("/somewhere", "k", "v"),
}
for name, attempt in attempts.items():
    try:
        attempt()
    except StorageError as exc:
        print(name, "refused:", exc)
    else:
        print(name, "done")
"""


def test_a_write_to_a_store_on_a_read_only_filesystem_says_it_is_read_only(
    read_only_store: Path,
) -> None:
    folder = read_only_store.parent
    done = read_only(folder, sys.executable, "-c", WRITES, str(read_only_store))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "read_only True ['cut', 'done']"
    said = f"the store {read_only_store} is read-only (its filesystem is mounted read-only)"
    for name, line in zip(["lease", "resume", "remember"], lines[1:], strict=True):
        assert line.startswith(f"{name} refused: {said}: nothing can be written"), line

    forget = ioh_read_only(folder, "memory", "forget", "k", "--store", str(read_only_store))
    assert forget.returncode == 2 and "Traceback" not in forget.stderr
    assert f"{said}: nothing can be written" in forget.stderr


@pytest.mark.parametrize("version", [0, 4])
def test_a_read_only_store_that_would_need_its_tables_made_or_upgraded_says_so(
    tmp_path: Path, version: int
) -> None:
    folder = tmp_path / "stores"
    folder.mkdir()
    path = folder / "runs.db"
    with contextlib.closing(sqlite3.connect(path)) as db:  # a store of an earlier version
        for script in MIGRATIONS[:version]:
            db.executescript(script)
        db.execute(f"PRAGMA user_version = {version}")
    listed = ioh_read_only(folder, "runs", "--store", str(path))
    assert listed.returncode == 2 and "Traceback" not in listed.stderr
    said = f"the store {path} is read-only (its filesystem is mounted read-only) and"
    if version:
        assert f"{said} in an older format (v4; this version reads v{SCHEMA_VERSION})" in (
            listed.stderr
        )
    else:
        assert f"{said} empty: it holds no runs" in listed.stderr


def test_a_writable_store_is_not_read_only(tmp_path: Path) -> None:
    with Store.open(tmp_path / "runs.db") as store, Store.memory() as memory:
        assert not store.read_only and not memory.read_only


# -- item 8: memory names a workspace one way ----------------------------------------------


def test_memory_is_one_workspaces_however_its_path_is_written(
    workspace: Path, tmp_path: Path
) -> None:
    link = tmp_path / "link"
    link.symlink_to(workspace)
    spellings: list[str | Path] = [
        workspace,
        str(workspace),
        f"{workspace}/",
        f"{workspace}//",
        f"{workspace}/./sub/..",
        Path(f"{workspace}/."),
        link,
        f"{link}/",
    ]
    with Store.open(tmp_path / "runs.db") as store:
        assert store.remember(Path(f"{workspace}/"), "tests", "python -m pytest") == ()
        for spelling in spellings:
            (entry,) = store.memory_entries(spelling)
            assert (entry.key, entry.value) == ("tests", "python -m pytest"), spelling
        assert store.forget(f"{link}/", "tests")
        assert all(store.memory_entries(spelling) == [] for spelling in spellings)


async def test_a_note_remembered_through_a_path_reaches_a_run_on_that_workspace(
    workspace: Path, tmp_path: Path
) -> None:
    store = Store.open(tmp_path / "runs.db")
    store.remember(Path(f"{workspace}/"), "layout", "notes.txt holds the notes")
    provider = ScriptedProvider([LISTING])
    await Harness(provider, store=store, memory=True).run(contract(workspace))
    assert "- layout: notes.txt holds the notes" in str(provider.requests[0])
    store.close()


@pytest.mark.parametrize(
    "workspace_name", ["project", "project/", Path("project"), "", 3, b"/tmp", None, "/tmp/a\x00b"]
)
def test_a_relative_workspace_or_one_that_is_no_path_is_a_config_error_everywhere(
    workspace_name: object,
) -> None:
    with Store.memory() as store:
        attempts: list[Callable[[], object]] = [
            lambda: store.memory_entries(workspace_name),  # type: ignore[arg-type]
            lambda: store.remember(workspace_name, "k", "v"),  # type: ignore[arg-type]
            lambda: store.forget(workspace_name, "k"),  # type: ignore[arg-type]
        ]
        for attempt in attempts:
            with pytest.raises(ConfigError, match="memory's workspace"):
                attempt()


# -- item 20: generated run ids ------------------------------------------------------------

ID_SHAPE = re.compile(r"\d{8}-\d{6}-\d{3}-[0-9a-f]{20}")
"""UTC start to the millisecond, then 80 random bits."""


def test_generated_run_ids_made_at_once_never_collide_and_keep_their_order() -> None:
    # The old per-second stamp and 24 random bits collided hundreds of times in 100,000.
    made = [new_run_id() for _ in range(100_000)]
    assert len(set(made)) == len(made)
    assert made == sorted(made)
    assert all(ID_SHAPE.fullmatch(run_id) for run_id in made[:1000])


async def test_runs_started_together_get_distinct_ids_that_sort_as_they_started(
    workspace: Path,
) -> None:
    store = Store.memory()
    harness = Harness(ScriptedProvider(lambda request: reply("looked")), store=store)
    together = await asyncio.gather(*(harness.run(contract(workspace)) for _ in range(200)))
    ids = [result.run_id for result in together]
    assert len(set(ids)) == 200 and all(ID_SHAPE.fullmatch(run_id) for run_id in ids)
    one_by_one = [(await harness.run(contract(workspace))).run_id for _ in range(5)]
    assert one_by_one == sorted(one_by_one) and one_by_one[0] > max(ids)
    newest_first = [summary.id for summary in store.runs(limit=5)]
    assert newest_first == sorted(one_by_one, reverse=True)
    store.close()


async def test_an_explicit_run_id_already_stored_stays_a_clear_error(workspace: Path) -> None:
    store = Store.memory()
    harness = Harness(ScriptedProvider(lambda request: reply("looked")), store=store)
    await harness.run(contract(workspace), run_id="mine")
    with pytest.raises(ConfigError, match="a run with id 'mine' is already in the store"):
        await harness.run(contract(workspace), run_id="mine")
    assert [summary.id for summary in store.runs()] == ["mine"]
    store.close()
