"""One conformance suite every sandbox backend on this machine passes.

Each test runs real commands in the backend and checks what the operating
system let them do. A backend skips only what it cannot do, and says why.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
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
from io_harness.sandbox._linux import NOBODY
from io_harness.sandbox._spawn import ContainedSandbox

BACKENDS: dict[
    str, type[FloorSandbox | BubblewrapSandbox | LandlockSandbox | NamespacesSandbox]
] = {
    "floor": FloorSandbox,
    "bubblewrap": BubblewrapSandbox,
    "landlock": LandlockSandbox,
    "namespaces": NamespacesSandbox,
}
CONFINES_WRITES = {"bubblewrap", "landlock", "namespaces"}
DENIES_NETWORK = {"bubblewrap", "landlock", "namespaces"}


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


def _open_folder() -> Path:
    # Landlock as root runs the command as nobody: folders it could write without
    # Landlock prove that Landlock, not file modes, stops the write.
    folder = Path(tempfile.mkdtemp(prefix="ioh-conformance-"))
    folder.chmod(0o777)
    if os.geteuid() == 0:
        os.chown(folder, NOBODY, NOBODY)
    return folder


@pytest.fixture(params=sorted(BACKENDS))
def harness(request: pytest.FixtureRequest) -> Iterator[Harness]:
    name: str = request.param
    backend = BACKENDS[name]
    ok, reason = backend.available()
    if not ok:
        pytest.skip(f"{name} is not available here: {reason}")
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


def _processes_with(token: str) -> list[int]:
    """Every process on the machine whose command line holds ``token``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if token.encode() in cmdline:
            found.append(int(entry.name))
    return found


async def test_reading_the_workspace_works(harness: Harness) -> None:
    outcome = await harness.python_run("print(open('notes.txt').read(), end='')")
    assert outcome.exit_code == 0, outcome.stderr
    assert outcome.stdout == "in the workspace\n"
    assert outcome.backend == harness.name
    assert outcome.cap_hit is None


async def test_writing_the_workspace_works(harness: Harness) -> None:
    outcome = await harness.python_run("open('made.txt', 'w').write('made')")
    assert outcome.exit_code == 0, outcome.stderr
    assert (harness.workspace / "made.txt").read_text() == "made"


async def test_writes_outside_the_workspace_fail(harness: Harness) -> None:
    _skip_unless(harness, CONFINES_WRITES, "cannot confine writes (the floor has no file rules)")
    target = harness.outside / "escaped.txt"
    outcome = await harness.python_run(f"open({str(target)!r}, 'w').write('out')")
    assert outcome.exit_code != 0
    assert not target.exists()


async def test_read_only_mode_refuses_workspace_writes(harness: Harness) -> None:
    _skip_unless(harness, CONFINES_WRITES, "cannot confine writes (the floor has no file rules)")
    argv = [harness.python, "-c", "open('made.txt', 'w').write('made')"]
    outcome = await harness.sandbox().run(argv, workdir=harness.workspace, mode="read_only")
    assert outcome.exit_code != 0
    assert not (harness.workspace / "made.txt").exists()


@pytest.fixture
def loopback_server() -> Iterator[tuple[int, list[str]]]:
    """A TCP server on the host's loopback that records each connection it accepts."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.1)
    seen: list[str] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            seen.append("connected")
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1], seen
    finally:
        stop.set()
        thread.join()
        server.close()


async def test_a_loopback_server_on_the_host_is_unreachable(
    harness: Harness, loopback_server: tuple[int, list[str]]
) -> None:
    _skip_unless(harness, DENIES_NETWORK, "cannot deny the network")
    port, seen = loopback_server
    outcome = await harness.python_run(
        f"""
        import socket
        socket.create_connection(("127.0.0.1", {port}), timeout=5).close()
        print("reached")
        """
    )
    assert outcome.exit_code != 0
    assert "reached" not in outcome.stdout
    assert seen == []


async def test_dns_fails(harness: Harness) -> None:
    _skip_unless(harness, DENIES_NETWORK, "cannot deny the network")
    outcome = await harness.python_run(
        """
        import socket
        socket.getaddrinfo("pypi.org", 443)
        print("resolved")
        """
    )
    assert outcome.exit_code != 0
    assert "resolved" not in outcome.stdout


async def test_cpu_cap_kills(harness: Harness) -> None:
    outcome = await harness.python_run("while True: pass", cpu_seconds=1)
    assert outcome.cap_hit == "cpu"
    assert outcome.exit_code is None


async def test_wall_cap_kills(harness: Harness) -> None:
    outcome = await harness.python_run("import time; time.sleep(600)", wall_seconds=1)
    assert outcome.cap_hit == "wall"
    assert outcome.timed_out


def _skip_without_cgroups(cap: str, fallback: str) -> None:
    from io_harness.sandbox._cgroups import _parents

    if not _parents():
        pytest.skip(f"no writable cgroup here: the {cap} cap falls back to {fallback}")


async def test_memory_cap_kills(harness: Harness) -> None:
    _skip_without_cgroups("memory", "RLIMIT_AS, which refuses allocations instead of killing")
    outcome = await harness.python_run(
        """
        chunks = []
        while True:
            chunks.append(bytearray(16 << 20))
        """,
        memory_bytes=128 << 20,
    )
    assert outcome.cap_hit == "memory", (outcome.summary, outcome.stderr[-300:])


async def test_process_cap_kills(harness: Harness) -> None:
    _skip_without_cgroups("process", "RLIMIT_NPROC, which refuses forks instead of killing")
    outcome = await harness.python_run(
        """
        import os, time
        for _ in range(200):
            if os.fork() == 0:
                time.sleep(600)
                os._exit(0)
        time.sleep(600)
        """,
        processes=16,
    )
    assert outcome.cap_hit == "processes", (outcome.summary, outcome.stderr[-300:])


async def test_output_cap_kills(harness: Harness) -> None:
    outcome = await harness.python_run(
        """
        import sys
        while True:
            sys.stdout.write("x" * 65536)
        """,
        output_bytes=1 << 20,
    )
    assert outcome.cap_hit == "output"
    assert outcome.truncated
    assert "bytes of output cut here" in outcome.stdout


async def test_file_size_cap_kills(harness: Harness) -> None:
    # dd, not Python: CPython ignores SIGXFSZ and sees EFBIG instead of being killed.
    argv = ["dd", "if=/dev/zero", "of=big.bin", "bs=65536", "count=64"]
    sandbox = harness.sandbox(file_size_bytes=1 << 20)
    outcome = await sandbox.run(argv, workdir=harness.workspace)
    assert outcome.cap_hit == "file_size", (outcome.summary, outcome.stderr)
    assert (harness.workspace / "big.bin").stat().st_size <= 1 << 20


MiB = 1 << 20
FOLDERS = {"workdir": "os.getcwd()", "TMPDIR": "tempfile.gettempdir()", "/tmp": "'/tmp'"}
"""Where a command writes, as the Python expression it finds the folder by."""


def _writes(files: int, folder: str, *, then_wait: bool = False) -> str:
    """Code that writes ``files`` files of 1 MiB in ``folder`` (a key of :data:`FOLDERS`),
    stopping at the first refused write, and with ``then_wait`` waits to be killed."""
    return textwrap.dedent(
        f"""
        import os, tempfile, time
        folder = {FOLDERS[folder]}
        for i in range({files}):
            try:
                with open(os.path.join(folder, f"disk-{{i}}.bin"), "wb") as out:
                    out.write(b"x" * {MiB})
            except OSError as refused:  # bubblewrap's /tmp fills up at the cap
                print(refused)
                break
        if {then_wait}:
            time.sleep(600)
        """
    )


@pytest.mark.parametrize("folder", sorted(FOLDERS))
async def test_the_disk_cap_kills_a_command_whose_files_pass_it_in_total(
    harness: Harness, folder: str
) -> None:
    if folder == "/tmp":
        _skip_unless(harness, {"bubblewrap"}, "gives no private /tmp (TMPDIR is its own)")
    # Forty files of 1 MiB, each under the per-file cap, 40 MiB in all; then a wait that only
    # a kill ends (the wall cap's, were the disk cap not held while the command runs).
    outcome = await harness.python_run(
        _writes(40, folder, then_wait=True),
        disk_bytes=4 * MiB,
        file_size_bytes=2 * MiB,
        wall_seconds=30,
    )
    assert outcome.cap_hit == "disk", (outcome.summary, outcome.stderr[-300:])
    assert outcome.exit_code is None and outcome.summary == "killed at the disk cap"
    assert outcome.written_bytes is not None and outcome.written_bytes > 4 * MiB
    [capped] = [event for event in outcome.events if event.kind == "cap_hit"]
    assert capped.detail == {"cap": "disk", "written_bytes": outcome.written_bytes}


async def test_a_command_writing_under_the_disk_cap_is_untouched(harness: Harness) -> None:
    code = _writes(2, "workdir") + _writes(1, "TMPDIR") + "print(len(os.listdir()))"
    outcome = await harness.python_run(code, disk_bytes=4 * MiB, file_size_bytes=2 * MiB)
    assert (outcome.exit_code, outcome.cap_hit) == (0, None), outcome.stderr[-300:]
    assert outcome.stdout.split()[-1] == "3"  # notes.txt and two files of 1 MiB
    assert outcome.written_bytes is None


async def test_a_sparse_file_counts_by_its_allocated_blocks(harness: Harness) -> None:
    code = "open('sparse.bin', 'wb').truncate(64 << 20)"
    outcome = await harness.python_run(code, disk_bytes=4 * MiB)
    assert (outcome.exit_code, outcome.cap_hit) == (0, None), outcome.stderr[-300:]
    assert (harness.workspace / "sparse.bin").stat().st_size == 64 * MiB


async def test_without_a_disk_cap_only_the_per_file_cap_holds(harness: Harness) -> None:
    sandbox = harness.backend(
        SandboxConfig(
            limits=SandboxLimits(disk_bytes=None, file_size_bytes=2 * MiB, wall_seconds=60),
            accept_floor=True,
        )
    )
    argv = [harness.python, "-c", _writes(40, "workdir")]
    outcome = await sandbox.run(argv, workdir=harness.workspace)
    assert (outcome.exit_code, outcome.cap_hit, outcome.written_bytes) == (0, None, None)
    assert len(list(harness.workspace.glob("disk-*.bin"))) == 40


def _linger(token: str) -> str:
    """Code that re-executes Python with ``token`` in its command line, so it can be found."""
    return (
        "os.execv(sys.executable, "
        f"[sys.executable, '-c', 'import time; time.sleep(600)', {token!r}])"
    )


@pytest.mark.parametrize("escape", ["setsid", "double-fork"])
async def test_escapers_are_killed(harness: Harness, escape: str) -> None:
    token = f"ioh-escaper-{uuid.uuid4().hex}"
    linger = _linger(token)
    if escape == "setsid":
        body = f"if os.fork() == 0:\n    os.setsid()\n    {linger}"
    else:
        body = (
            f"if os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n        {linger}\n"
            "    os._exit(0)"
        )
    code = f"import os, sys, time\n{body}\ntime.sleep(0.5)\nprint('leader done')"
    outcome = await harness.sandbox().run([harness.python, "-c", code], workdir=harness.workspace)
    assert outcome.exit_code == 0, outcome.stderr
    assert outcome.stdout == "leader done\n"
    assert _processes_with(token) == []


async def test_nothing_survives_a_cap_kill(harness: Harness) -> None:
    token = f"ioh-survivor-{uuid.uuid4().hex}"
    code = (
        "import os, sys, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        f"    {_linger(token)}\n"
        "time.sleep(600)"
    )
    sandbox = harness.sandbox(wall_seconds=2)
    outcome = await sandbox.run([harness.python, "-c", code], workdir=harness.workspace)
    assert outcome.cap_hit == "wall"
    assert _processes_with(token) == []


async def test_the_scratch_folder_is_gone(harness: Harness) -> None:
    outcome = await harness.python_run(
        "import os; home = os.environ['HOME']; open(home + '/x', 'w').write('x'); print(home)"
    )
    assert outcome.exit_code == 0, outcome.stderr
    scratch = Path(outcome.stdout.strip())
    assert scratch.name.startswith("ioh-sandbox-")
    assert not scratch.exists()


async def test_a_missing_program_is_a_spawn_error(harness: Harness) -> None:
    outcome = await harness.sandbox().run(["no-such-program-ioh"], workdir=harness.workspace)
    assert outcome.spawn_error is not None
    assert "not found" in outcome.spawn_error
    assert outcome.exit_code is None


async def test_the_harness_environment_does_not_leak(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("IOH_SECRET_KEY", "sk-not-for-commands")
    outcome = await harness.python_run("import os; print(os.environ.get('IOH_SECRET_KEY'))")
    assert outcome.stdout == "None\n"


async def test_events_trace_the_command(harness: Harness) -> None:
    outcome = await harness.python_run("import time; time.sleep(600)", wall_seconds=1)
    kinds = [event.kind for event in outcome.events]
    assert kinds == ["create", "exec", "cap_hit", "destroy"]
    assert outcome.events[0].detail["limits"]["wall_seconds"] == 1
    assert outcome.events[2].detail == {"cap": "wall"}


async def test_the_allow_list_proxy_lets_through_only_what_is_allowed(
    harness: Harness, loopback_server: tuple[int, list[str]]
) -> None:
    _skip_unless(harness, DENIES_NETWORK, "cannot deny the network, so has no allow-list")
    port, seen = loopback_server
    asked: list[str] = []

    async def net_check(host: str, wanted: int) -> bool:
        asked.append(f"{host}:{wanted}")
        return wanted == port

    code = f"""
        import os, socket
        def connect(target):
            client = socket.socket(socket.AF_UNIX)
            client.connect(os.environ["IOH_PROXY_SOCKET"])
            client.sendall(f"CONNECT {{target}} HTTP/1.1\\r\\n\\r\\n".encode())
            answer = client.recv(200).decode().splitlines()[0]
            client.close()
            return answer
        print(connect("127.0.0.1:{port}"))
        print(connect("127.0.0.1:{port + 1 if port < 65535 else port - 1}"))
        print(connect("pypi.org:443"))
        """
    config = SandboxConfig(network="allow_list", allow_hosts=("127.0.0.1",))
    sandbox = harness.backend(config)
    argv = [harness.python, "-c", textwrap.dedent(code)]
    outcome = await sandbox.run(argv, workdir=harness.workspace, net_check=net_check)
    assert outcome.exit_code == 0, outcome.stderr
    first, second, third = outcome.stdout.splitlines()
    assert " 200 " in first
    assert " 403 " in second
    assert " 403 " in third
    assert seen == ["connected"]
    nets = [event.detail for event in outcome.events if event.kind == "net"]
    assert [(n["allowed"]) for n in nets] == [True, False, False]


async def test_a_cancelled_run_leaves_nothing_behind(harness: Harness) -> None:
    token = f"ioh-cancelled-{uuid.uuid4().hex}"
    started = harness.workspace / "started"
    code = (
        "import os, sys, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        f"    {_linger(token)}\n"
        f"open({str(started)!r}, 'w').write(os.environ['HOME'])\n"
        "time.sleep(600)"
    )
    run = asyncio.ensure_future(
        harness.sandbox().run([harness.python, "-c", code], workdir=harness.workspace)
    )
    while not started.exists() or not started.read_text():
        assert not run.done(), run.result()
        await asyncio.sleep(0.05)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    assert _processes_with(token) == []
    assert not Path(started.read_text()).exists()


# --- Adversarial regressions: what a hostile command tried, and must not manage. ---


async def test_the_kernels_global_settings_are_not_writable(harness: Harness) -> None:
    # bubblewrap as root maps the command's uid to the host's root, and its own /proc
    # left /proc/sys writable: core_pattern runs a program as root on the next crash.
    # The value written is the one already there, so a failure of this test harms nothing.
    _skip_unless(harness, CONFINES_WRITES, "cannot confine writes (the floor has no file rules)")
    outcome = await harness.python_run(
        """
        path = "/proc/sys/kernel/core_pattern"
        value = open(path).read()
        try:
            with open(path, "w") as handle:
                handle.write(value)
        except OSError as exc:
            print("refused", exc.errno)
        else:
            print("written")
        """
    )
    assert outcome.exit_code == 0, outcome.stderr
    assert outcome.stdout.startswith("refused"), outcome.stdout


async def test_an_abstract_unix_socket_on_the_host_is_unreachable(harness: Harness) -> None:
    # Landlock shares the host's network namespace, where daemons listen on abstract
    # sockets; its abstract-socket scope must keep the command out of them.
    _skip_unless(harness, DENIES_NETWORK, "cannot deny the network")
    name = f"ioh-abstract-{uuid.uuid4().hex}"
    server = socket.socket(socket.AF_UNIX)
    server.bind("\0" + name)
    server.listen()
    try:
        outcome = await harness.python_run(
            f"""
            import socket
            client = socket.socket(socket.AF_UNIX)
            try:
                client.connect("\\0{name}")
            except OSError as exc:
                print("refused", exc.errno)
            else:
                print("reached")
            """
        )
    finally:
        server.close()
    assert outcome.exit_code == 0, outcome.stderr
    assert outcome.stdout.startswith("refused"), outcome.stdout


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


async def test_a_single_process_cap_still_runs_the_command(harness: Harness) -> None:
    # The launcher's guard and a wrapper's own processes live in the groups too;
    # the cap is the command's own.
    outcome = await harness.python_run("print('ran')", processes=1)
    assert outcome.exit_code == 0, (outcome.summary, outcome.stderr)
    assert outcome.stdout == "ran\n"


@pytest.mark.parametrize(
    ("argv", "env", "why"),
    [
        (["python3", "-c", "print(1)", "a\0b"], None, "NUL byte"),
        (["python3", "-c", "print(1)"], {"KEY": "a\0b"}, "cannot be passed"),
        (["python3", "-c", "print(1)"], {"A=B": "c"}, "cannot be passed"),
        (["python3", "-c", "print(1)", *(["x" * 100_000] * 40)], None, "too long"),
        ([], None, "no command"),
    ],
    ids=["nul-in-argv", "nul-in-env", "equals-in-env-name", "argv-too-long", "empty-argv"],
)
async def test_an_argv_that_cannot_be_executed_is_a_spawn_error(
    harness: Harness, argv: list[str], env: dict[str, str] | None, why: str
) -> None:
    # The exec tool's argv comes from the model: a bad one is an outcome, never a raise.
    outcome = await harness.sandbox().run(argv, workdir=harness.workspace, env=env)
    assert outcome.spawn_error is not None
    assert why in outcome.spawn_error
    assert outcome.exit_code is None


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


async def test_a_program_in_a_folder_the_sandbox_makes_private_still_runs(
    harness: Harness,
) -> None:
    # A clone (and its virtualenv) under /tmp: bubblewrap gives the command a /tmp of
    # its own, and must bind the program back.
    folder = _open_folder()
    try:
        program = folder / "say-hello"
        program.write_text("#!/bin/sh\necho hello from $0\n")
        program.chmod(0o755)
        outcome = await harness.sandbox().run([str(program)], workdir=harness.workspace)
        assert outcome.exit_code == 0, (outcome.summary, outcome.stderr)
        assert outcome.stdout == f"hello from {program}\n"
    finally:
        shutil.rmtree(folder, ignore_errors=True)


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
