"""Every sandbox backend on this machine keeps the sandbox protocol's promises.

The promises any sandbox makes are tried by :func:`io_harness.testing.check_sandbox`,
the check a user holds a sandbox of their own to, one case a test; what only this
project's backends do (the launcher's guard, cgroups swept, ``/run`` hidden, files
that run code later undone, the store hidden) is tried here. Each test runs real
commands and checks what the operating system let them do. A backend skips only
what it cannot do, and says why.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from io_harness import Store
from io_harness.sandbox import (
    BubblewrapSandbox,
    FloorSandbox,
    LandlockSandbox,
    NamespacesSandbox,
    Sandbox,
    SandboxConfig,
    SandboxLimits,
    SandboxOutcome,
)
from io_harness.sandbox._check._trial import linger as _linger
from io_harness.sandbox._check._trial import open_folder as _open_folder
from io_harness.sandbox._check._trial import processes_with as _processes_with
from io_harness.sandbox._linux import NOBODY
from io_harness.sandbox._spawn import ContainedSandbox
from io_harness.testing import SANDBOX_CASES, check_sandbox

BACKENDS: dict[
    str, type[FloorSandbox | BubblewrapSandbox | LandlockSandbox | NamespacesSandbox]
] = {
    "floor": FloorSandbox,
    "bubblewrap": BubblewrapSandbox,
    "landlock": LandlockSandbox,
    "namespaces": NamespacesSandbox,
}
CONFINES_WRITES = {"bubblewrap", "landlock", "namespaces"}


def _available(name: str) -> type[ContainedSandbox]:
    backend = BACKENDS[name]
    ok, reason = backend.available()
    if not ok:
        pytest.skip(f"{name} is not available here: {reason}")
    return backend


@pytest.mark.parametrize("case", SANDBOX_CASES)
@pytest.mark.parametrize("backend", sorted(BACKENDS))
async def test_the_backend_keeps_the_promise_of_the_sandbox_check(backend: str, case: str) -> None:
    sandbox = _available(backend)
    check = await check_sandbox(
        sandbox,
        confines_writes=backend in CONFINES_WRITES,
        denies_network=sandbox.denies_network,
        cases=[case],
    )
    (result,) = check.cases
    if result.status == "skipped":
        pytest.skip(f"{backend} {result.detail}")
    assert result.status == "passed", result.detail


@dataclass
class Harness:
    """A backend, a workspace it may write, a folder outside it, and the python to run."""

    name: str
    backend: type[ContainedSandbox]
    workspace: Path
    outside: Path
    python: str

    def sandbox(self, **limits: float) -> Sandbox:
        config = SandboxConfig(
            limits=SandboxLimits(**{"wall_seconds": 60, **limits}), accept_floor=True
        )
        sandbox: Sandbox = self.backend(config)
        return sandbox

    async def python_run(self, code: str, **limits: float) -> SandboxOutcome:
        argv = [self.python, "-c", textwrap.dedent(code)]
        return await self.sandbox(**limits).run(argv, workdir=self.workspace)


@pytest.fixture(params=sorted(BACKENDS))
def harness(request: pytest.FixtureRequest) -> Iterator[Harness]:
    name: str = request.param
    backend = _available(name)
    python = sys.executable  # as root, under /root or not: the launcher lends it to nobody
    workspace, outside = _open_folder(), _open_folder()
    (workspace / "notes.txt").write_text("in the workspace\n")
    try:
        yield Harness(name, backend, workspace, outside, python)
    finally:
        shutil.rmtree(workspace, ignore_errors=True)
        shutil.rmtree(outside, ignore_errors=True)


def _skip_unless(harness: Harness, names: set[str], why: str) -> None:
    if harness.name not in names:
        pytest.skip(f"{harness.name} {why}")


# --- Adversarial regressions: what a hostile command tried, and must not manage. ---


async def test_a_unix_socket_of_a_host_daemon_under_run_is_unreachable(harness: Harness) -> None:
    # As root the command is the host's root to a daemon checking SO_PEERCRED.
    _skip_unless(harness, {"bubblewrap"}, "cannot hide /run (no mount namespace of its own)")
    run = Path("/run")
    if not os.access(run, os.W_OK):
        pytest.skip("this test needs to listen on a socket under /run")
    path = run / f"ioh-daemon-{uuid.uuid4().hex}.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen()
    try:
        outcome = await harness.python_run(
            f"""
            import socket
            client = socket.socket(socket.AF_UNIX)
            try:
                client.connect({str(path)!r})
            except OSError as exc:
                print("refused", exc.errno)
            else:
                print("reached")
            """
        )
    finally:
        server.close()
        path.unlink()
    assert outcome.exit_code == 0, outcome.stderr
    assert outcome.stdout.startswith("refused"), outcome.stdout


_HARNESS_THAT_DIES = """
import asyncio, sys
from pathlib import Path
from io_harness.sandbox import SandboxConfig
from io_harness.sandbox._linux import {cls}

code = sys.argv[2]
sandbox = {cls}(SandboxConfig(accept_floor=True))
asyncio.run(sandbox.run([sys.argv[1], "-c", code], workdir=Path(sys.argv[3])))
"""


async def test_nothing_survives_the_harness_being_killed(harness: Harness) -> None:
    # The harness cannot tear down what it started if it is SIGKILLed mid-command; the
    # launcher's guard must, for every backend (bubblewrap's --die-with-parent alone
    # covered only bubblewrap).
    if sys.platform != "linux":
        pytest.skip("the launcher's guard watches the harness through a pidfd (Linux)")
    token = f"ioh-orphan-{uuid.uuid4().hex}"
    started = harness.workspace / "started"
    code = (
        "import os, sys, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        f"    {_linger(token)}\n"
        f"open({str(started)!r}, 'w').write(os.environ['HOME'])\n"
        "time.sleep(600)"
    )
    script = _HARNESS_THAT_DIES.format(cls=harness.backend.__name__)
    dying = await asyncio.create_subprocess_exec(
        sys.executable, "-c", script, harness.python, code, str(harness.workspace)
    )
    try:
        for _ in range(600):
            if started.exists() and started.read_text() and _processes_with(token):
                break
            await asyncio.sleep(0.05)
        assert _processes_with(token), "the command never started"
    finally:
        dying.kill()
        await dying.wait()
    home = Path(started.read_text())
    guarded = harness.name != "bubblewrap"  # which ends the tree itself: no guard is left
    for _ in range(200):  # the guard needs a moment to see the harness gone
        if not _processes_with(token) and not (guarded and home.exists()):
            break
        await asyncio.sleep(0.05)
    assert _processes_with(token) == []
    if not guarded:  # its folder goes at the next harness's first command
        await _first_command_of_a_new_harness(harness)
    assert not home.exists()


async def _first_command_of_a_new_harness(harness: Harness) -> None:
    script = (
        "import asyncio, sys\n"
        "from pathlib import Path\n"
        f"from io_harness.sandbox import {harness.backend.__name__} as Backend\n"
        "asyncio.run(Backend().run([sys.executable, '-c', 'pass'], workdir=Path(sys.argv[1])))\n"
    )
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", script, str(harness.workspace)
    )
    assert await process.wait() == 0


def test_the_groups_of_a_dead_harness_are_emptied_and_removed() -> None:
    # A harness killed mid-command leaves its groups; the next one kills what runs there.
    from io_harness.sandbox._cgroups import _parents, _sweep

    parents = _parents()
    if not parents:
        pytest.skip("no writable cgroup hierarchy here")
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    controller, parent = next(iter(parents.items()))
    folder = parent / f"ioh-{gone.pid}-0"
    folder.mkdir()
    left = subprocess.Popen(["sleep", "600"])
    try:
        (folder / "cgroup.procs").write_text(str(left.pid))
        _sweep({controller: parent})
        assert left.wait(timeout=30) != 0
        assert not folder.exists()
    finally:
        left.kill()
        left.wait()
        with contextlib.suppress(OSError):
            folder.rmdir()


# --- what runs code later, and the harness's own files --------------------------------------

MAKES_CODE_LATER = """
import os, subprocess
os.makedirs('.vscode', exist_ok=True); os.makedirs('sub/.git/hooks', exist_ok=True)
made = ('.bashrc', '.envrc', '.vscode/tasks.json', 'sub/.git/hooks/pre-commit', 'sub/.profile')
for path in made:
    open(path, 'w').write('touch pwned')
"""


async def test_a_file_that_runs_code_later_made_by_a_command_is_removed_and_said(
    harness: Harness,
) -> None:
    outcome = await harness.python_run(MAKES_CODE_LATER)

    assert outcome.exit_code == 0, outcome.stderr
    for made in (".bashrc", ".envrc", ".vscode/tasks.json", "sub/.git", "sub/.profile"):
        assert not (harness.workspace / made).exists(), made
        assert any(line.startswith(made + " (made by the command)") for line in outcome.undone)
    assert (harness.workspace / ".vscode").is_dir() and (harness.workspace / "sub").is_dir()
    (event,) = [e for e in outcome.events if e.kind == "undone"]
    assert event.detail["undone"] == list(outcome.undone)


CHANGES_GIT = """
import os, shutil
for step in (
    lambda: open('.git/config', 'a').write('[core]\\n\\tfsmonitor = touch pwned\\n'),
    lambda: open('.git/hooks/pre-commit', 'w').write('touch pwned'),
    lambda: os.unlink('.git/hooks/post-checkout'),
    lambda: open('.bashrc', 'w').write('touch pwned'),
    lambda: os.rename('.git', 'moved-git'),
    lambda: (os.makedirs('.git/hooks', exist_ok=True), open('.git/HEAD', 'w').write('x')),
):
    try:
        step()
        print('did')
    except OSError as exc:
        print('refused', exc.errno)
"""


async def test_a_command_cannot_leave_a_change_to_what_runs_code_later(harness: Harness) -> None:
    git = harness.workspace / ".git"
    (git / "hooks").mkdir(parents=True)
    (git / "config").write_text("[core]\n")
    (git / "hooks" / "post-checkout").write_text("#!/bin/sh\n")
    (git / "HEAD").write_text("ref: refs/heads/main\n")
    (harness.workspace / ".bashrc").write_text("# mine\n")
    for path in (git, git / "hooks", harness.workspace):
        path.chmod(0o777)
    before = {
        p: p.read_bytes() for p in (*git.rglob("*"), harness.workspace / ".bashrc") if p.is_file()
    }

    outcome = await harness.python_run(CHANGES_GIT)

    assert outcome.exit_code == 0, outcome.stderr
    after = {
        p: p.read_bytes() for p in (*git.rglob("*"), harness.workspace / ".bashrc") if p.is_file()
    }
    assert after == before
    assert not (harness.workspace / "moved-git").exists()
    if harness.name in {"bubblewrap"} or (harness.backend.hides_paths and os.geteuid() == 0):
        # Bound read-only: each change was refused as it was made.
        assert outcome.stdout.split().count("refused") >= 5, outcome.stdout


async def test_a_store_is_hidden_from_a_command_or_the_command_is_refused(
    harness: Harness,
) -> None:
    from io_harness.sandbox._shield import keeping_private

    db = harness.workspace / ".ioh" / "runs.db"
    store = Store.open(db)
    probe = f"""
import os
for path in {[str(p) for p in store.files()]!r}:
    try:
        if os.path.isdir(path):
            print(path, 'listed', os.listdir(path))
        elif os.path.exists(path):
            print(path, 'read', len(open(path, 'rb').read()))
            open(path, 'ab').write(b'pwned')
    except OSError as exc:
        print(path, 'refused', exc.errno)
"""
    with store.lease("r"):  # the leases folder exists while a run is driven
        # Given to the command's user, so only hiding keeps it from them (as the idmapped
        # workspace of a root harness would).
        for path in (db.parent, *store.files()):
            if os.geteuid() == 0 and path.exists():
                os.chown(path, NOBODY, NOBODY)
        before = {p: p.read_bytes() for p in store.files() if p.is_file()}
        try:
            with keeping_private(store.files()):
                outcome = await harness.python_run(probe)
            after = {p: p.read_bytes() for p in before}
        finally:
            store.close()

    if not harness.backend.hides_paths:
        assert outcome.spawn_error is not None and "cannot hide it" in outcome.spawn_error
        return
    assert outcome.exit_code == 0, outcome.stderr
    reads = [line.split()[-1] for line in outcome.stdout.splitlines() if " read " in line]
    assert all(size == "0" for size in reads), outcome.stdout
    assert "listed []" in outcome.stdout or "listed" not in outcome.stdout, outcome.stdout
    assert after == before
    with Store.open(db) as again:
        assert again.runs() == []


async def test_a_hook_made_where_git_has_no_hooks_folder_is_refused_or_undone(
    harness: Harness,
) -> None:
    # The hooks folder a clone may lack: creating it and a hook in it must not last.
    git = harness.workspace / ".git"
    git.mkdir()
    (git / "HEAD").write_text("ref: refs/heads/main\n")
    git.chmod(0o777)
    code = """
import os
try:
    os.makedirs('.git/hooks', exist_ok=True)
    open('.git/hooks/pre-commit', 'w').write('touch pwned')
    print('made')
except OSError as exc:
    print('refused', exc.errno)
"""
    outcome = await harness.python_run(code)

    assert outcome.exit_code == 0, outcome.stderr
    assert not (git / "hooks" / "pre-commit").exists()
    if outcome.stdout.startswith("made"):
        assert any(line.startswith(".git/hooks/pre-commit (made") for line in outcome.undone)
    else:
        assert outcome.stdout.startswith("refused"), outcome.stdout
