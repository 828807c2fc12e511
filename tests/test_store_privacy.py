"""A SQLite store is private to the harness's user and is never reached through another's symlink.

Every file and folder the store makes is ``0600`` / ``0700`` whatever the
umask, so a command the harness runs as ``nobody`` cannot read a run's
transcript, its WAL or a lease; one the harness's user owns already is
tightened, one another user owns is left alone. A symlink another user put
where the store makes or opens something is a one-line :class:`StorageError`
naming it, and nothing is made where it leads. The attacks run for real: the
tests run as root, read as ``nobody`` and plant ``nobody``'s symlinks.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from io_harness import (
    Budget,
    RunOutcome,
    StorageError,
    Store,
    TaskContract,
    WorkspaceFileContains,
    run,
)
from io_harness.cli import main
from io_harness.testing import ScriptedProvider, call, reply

pytestmark = [
    pytest.mark.skipif(sys.platform == "win32", reason="POSIX modes, owners and symlinks"),
]
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as another user")

TRANSCRIPT = "the-transcript-marker-7f3a"


def nobody() -> pwd.struct_passwd:
    return pwd.getpwnam("nobody")


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def lease_name(run_id: str) -> str:
    return hashlib.sha256(run_id.encode("utf-8")).hexdigest()[:32] + ".lock"


@pytest.fixture
def open_folder() -> Iterator[Path]:
    """A folder every user may enter and list (``0755``), outside root's ``0700`` test folders."""
    folder = Path(tempfile.mkdtemp(dir="/var/tmp", prefix="ioh-store-"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def any_umask() -> Iterator[None]:
    """The loosest umask: what the store makes must be private all the same."""
    before = os.umask(0)
    try:
        yield
    finally:
        os.umask(before)


async def a_run(store: Store, workspace: Path, run_id: str = "r1") -> None:
    """One committed step of a run whose transcript holds :data:`TRANSCRIPT`."""
    workspace.mkdir(exist_ok=True)
    contract = TaskContract.workspace(
        f"find {TRANSCRIPT}",
        workspace,
        WorkspaceFileContains("never.txt", "x"),
        budget=Budget(max_steps=1),
    )
    result = await run(
        contract,
        ScriptedProvider([reply(TRANSCRIPT, [call("list_dir")])]),
        store=store,
        run_id=run_id,
    )
    assert result.outcome is RunOutcome.STEP_CAP_REACHED


def read_as_nobody(path: Path) -> subprocess.CompletedProcess[bytes]:
    who = nobody()
    as_nobody = ["setpriv", f"--reuid={who.pw_uid}", f"--regid={who.pw_gid}", "--clear-groups"]
    return subprocess.run(
        [*as_nobody, "cat", str(path)],
        capture_output=True,
        check=False,
        timeout=30,
    )


# -- private files ------------------------------------------------------------------------


async def test_every_file_and_folder_a_new_store_makes_is_private_whatever_the_umask(
    open_folder: Path, any_umask: None
) -> None:
    db = open_folder / "made" / "deeper" / "runs.db"
    with Store.open(db) as store:
        await a_run(store, open_folder / "ws")
        made = [
            db.parent.parent,
            db.parent,
            db,
            Path(f"{db}-wal"),
            Path(f"{db}-shm"),
            Path(f"{db}.leases"),
            Path(f"{db}.leases") / lease_name("r1"),
        ]
        modes = {path.name: oct(mode(path)) for path in made}

    assert modes == {
        "made": "0o700",
        "deeper": "0o700",
        "runs.db": "0o600",
        "runs.db-wal": "0o600",
        "runs.db-shm": "0o600",
        "runs.db.leases": "0o700",
        lease_name("r1"): "0o600",
    }


@as_root
async def test_a_command_running_as_nobody_cannot_read_the_store_its_wal_or_a_lease(
    open_folder: Path,
) -> None:
    db = open_folder / "runs.db"
    with Store.open(db) as store:
        await a_run(store, open_folder / "ws")
        with store.lease("r2"):
            attempts = {
                name: read_as_nobody(open_folder / name)
                for name in ("runs.db", "runs.db-wal", f"runs.db.leases/{lease_name('r2')}")
            }

    for name, attempt in attempts.items():
        assert attempt.returncode != 0, f"nobody read {name}"
        assert b"Permission denied" in attempt.stderr, attempt.stderr
        assert TRANSCRIPT.encode() not in attempt.stdout


async def test_an_existing_store_the_harness_owns_is_tightened(open_folder: Path) -> None:
    db = open_folder / "runs.db"
    with Store.open(db) as store:
        await a_run(store, open_folder / "ws")
    leases = Path(f"{db}.leases")
    for path, loose in ((db, 0o644), (leases, 0o755), (leases / lease_name("r1"), 0o666)):
        path.chmod(loose)

    with Store.open(db) as store:
        assert not store.driven("r1")
        assert (mode(db), mode(Path(f"{db}-wal")), mode(Path(f"{db}-shm"))) == (0o600,) * 3
    assert (mode(leases), mode(leases / lease_name("r1"))) == (0o700, 0o600)


@as_root
async def test_a_store_another_user_owns_keeps_its_modes_and_what_root_adds_is_theirs(
    open_folder: Path,
) -> None:
    db = open_folder / "runs.db"
    with Store.open(db) as store:
        await a_run(store, open_folder / "ws")
    who = nobody()
    os.chown(db, who.pw_uid, who.pw_gid)
    db.chmod(0o640)

    with Store.open(db) as store, store.lease("r2"):
        lease = Path(f"{db}.leases") / lease_name("r2")
        assert mode(db) == 0o640
        assert (lease.stat().st_uid, lease.stat().st_gid) == (who.pw_uid, who.pw_gid)
        assert mode(lease) == 0o600


# -- symlinks another user planted ------------------------------------------------------------


@pytest.fixture
def their_store(open_folder: Path) -> Iterator[tuple[Path, Path]]:
    """A store in a folder ``nobody`` owns, its database theirs too; and a path in a folder
    only root may write, where nothing must appear."""
    home = open_folder / "theirs"
    home.mkdir()
    db = home / "runs.db"
    Store.open(db).close()
    who = nobody()
    for path in (home, db):
        os.chown(path, who.pw_uid, who.pw_gid)
    roots = open_folder / "roots"
    roots.mkdir(mode=0o700)
    yield db, roots / "victim"


def planted(link: Path, target: Path) -> None:
    """A symlink at ``link`` to ``target``, made by ``nobody``."""
    link.symlink_to(target)
    who = nobody()
    os.lchown(link, who.pw_uid, who.pw_gid)


def one_line_naming(exc: BaseException, path: Path) -> None:
    message = str(exc)
    assert "\n" not in message and str(path) in message, message
    assert "symbolic link" in message, message


@as_root
def test_a_symlink_planted_where_a_lease_goes_is_refused_and_leads_nowhere(
    their_store: tuple[Path, Path],
) -> None:
    db, victim = their_store
    leases = Path(f"{db}.leases")
    leases.mkdir()
    os.chown(leases, nobody().pw_uid, nobody().pw_gid)
    planted(leases / lease_name("r1"), victim)

    with Store.open(db) as store, pytest.raises(StorageError) as refused, store.lease("r1"):
        pass
    one_line_naming(refused.value, leases / lease_name("r1"))
    assert not victim.exists()


@as_root
def test_a_symlink_planted_as_the_leases_folder_is_refused_and_leads_nowhere(
    their_store: tuple[Path, Path],
) -> None:
    db, victim = their_store
    victim.mkdir()
    planted(Path(f"{db}.leases"), victim)

    with Store.open(db) as store, pytest.raises(StorageError) as refused, store.lease("r1"):
        pass
    one_line_naming(refused.value, Path(f"{db}.leases"))
    assert list(victim.iterdir()) == []


@as_root
def test_ioh_resume_on_another_users_store_refuses_their_planted_lease_in_one_line(
    their_store: tuple[Path, Path],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    db, victim = their_store
    with Store.open(db) as store:
        asyncio.run(a_run(store, db.parent.parent / "ws"))
    leases = Path(f"{db}.leases")
    for lease in leases.iterdir():
        lease.unlink()
    planted(leases / lease_name("r1"), victim)
    capsys.readouterr()
    monkeypatch.setenv("OPENAI_API_KEY", "sk-never-used")

    status = main(["resume", "r1", "--store", str(db), "--provider", "openai:gpt-test"])

    err = capsys.readouterr().err.strip()
    assert status == 2, err
    assert err.startswith("error:") and "\n" not in err, err
    assert str(leases / lease_name("r1")) in err and "symbolic link" in err
    assert not victim.exists()


@as_root
def test_a_symlink_planted_as_the_database_is_refused_and_nothing_is_made(
    their_store: tuple[Path, Path],
) -> None:
    db, victim = their_store
    planted(db.parent / "other.db", victim)

    with pytest.raises(StorageError) as refused:
        Store.open(db.parent / "other.db")
    one_line_naming(refused.value, db.parent / "other.db")
    assert not victim.exists() and not Path(f"{victim}-wal").exists()


@as_root
def test_a_symlink_planted_as_the_wal_is_refused_by_name(
    their_store: tuple[Path, Path],
) -> None:
    db, victim = their_store
    planted(Path(f"{db}-wal"), victim)

    with pytest.raises(StorageError) as refused:
        Store.open(db)
    one_line_naming(refused.value, Path(f"{db}-wal"))
    assert not victim.exists()


@as_root
def test_a_symlink_another_user_made_on_the_way_to_the_store_is_not_followed(
    their_store: tuple[Path, Path],
) -> None:
    db, victim = their_store
    victim.mkdir()
    planted(db.parent / "link", victim)

    with pytest.raises(StorageError) as refused:
        Store.open(db.parent / "link" / "new" / "runs.db")
    one_line_naming(refused.value, db.parent / "link")
    assert list(victim.iterdir()) == []


def test_a_symlink_the_harness_user_made_on_the_way_to_the_store_is_followed(
    open_folder: Path,
) -> None:
    (open_folder / "real").mkdir()
    (open_folder / "mine").symlink_to("real")

    Store.open(open_folder / "mine" / "runs.db").close()

    assert (open_folder / "real" / "runs.db").is_file()
