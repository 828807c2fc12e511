"""A harness running as root never runs a command as the host's root (bubblewrap).

The command runs as ``nobody``; the folders it may write are idmapped so that it
writes them as itself and the files land as their owner's, and folders only root
may enter on its way are covered, with what it needs mounted back.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from io_harness.sandbox import BubblewrapSandbox, SandboxConfig, SandboxOutcome

pytestmark = [
    pytest.mark.skipif(sys.platform != "linux", reason="bubblewrap is Linux's"),
    pytest.mark.skipif(os.geteuid() != 0, reason="only a harness running as root lends its uid"),
]


async def _python(code: str, workdir: Path, **config: object) -> SandboxOutcome:
    ok, reason = BubblewrapSandbox.available()
    assert ok, reason
    sandbox = BubblewrapSandbox(SandboxConfig(**config))
    return await sandbox.run([sys.executable, "-c", code], workdir=workdir)


async def test_a_command_runs_as_nobody_and_its_files_are_the_workspace_owners(
    tmp_path: Path,
) -> None:
    (tmp_path / "private.txt").write_text("root's only")
    (tmp_path / "private.txt").chmod(0o600)
    code = (
        "import os\n"
        "print(open('private.txt').read())\n"
        "open('made.txt', 'w').write('made')\n"
        "open('private.txt', 'a').write(', edited')\n"
    )
    outcome = await _python(code, tmp_path)
    assert outcome.exit_code == 0, outcome.stderr
    assert outcome.stdout.strip() == "root's only"
    made = (tmp_path / "made.txt").stat()
    assert (made.st_uid, made.st_gid) == (0, 0)
    assert (tmp_path / "private.txt").read_text() == "root's only, edited"


async def test_a_workspace_of_another_user_is_written_as_that_user(tmp_path: Path) -> None:
    workspace = tmp_path / "alice"
    workspace.mkdir()
    os.chown(workspace, 1000, 1000)
    outcome = await _python("open('made.txt', 'w').write('made')", workspace)
    assert outcome.exit_code == 0, outcome.stderr
    made = (workspace / "made.txt").stat()
    assert (made.st_uid, made.st_gid) == (1000, 1000)


@pytest.fixture
def outside_tmp() -> Iterator[Path]:
    """A folder outside /tmp (bubblewrap gives every command a /tmp of its own)."""
    folder = Path(tempfile.mkdtemp(dir="/var/tmp", prefix="ioh-root-"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


async def test_a_folder_only_root_enters_shows_the_command_only_what_it_needs(
    outside_tmp: Path,
) -> None:
    home = outside_tmp / "home"
    home.mkdir(mode=0o700)
    (home / "secret.txt").write_text("not for commands")
    workspace = home / "project"
    workspace.mkdir()
    code = "import os\nopen('made.txt', 'w').write('made')\nprint(sorted(os.listdir('..')))\n"
    outcome = await _python(code, workspace)
    assert outcome.exit_code == 0, outcome.stderr
    assert outcome.stdout.strip() == "['project']"
    assert (workspace / "made.txt").read_text() == "made"
