"""macOS and Windows backends: what they build is tested everywhere, what they run where they run.

The seatbelt profile and command line, and the Job Object's limit values and cap
mapping, are plain Python and are tested on every platform. The seatbelt wiring
through the shared runner is exercised on POSIX through a stand-in for ``sandbox-exec`` that records
the profile and runs the command unconfined. The live tests need macOS or
Windows and say so when they skip.
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import stat
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from io_harness.errors import SandboxError
from io_harness.sandbox._jobobject import (
    JOB_OBJECT_LIMIT_ACTIVE_PROCESS,
    JOB_OBJECT_LIMIT_JOB_MEMORY,
    JOB_OBJECT_LIMIT_JOB_TIME,
    JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE,
    JOB_OBJECT_MSG_ACTIVE_PROCESS_LIMIT,
    JOB_OBJECT_MSG_END_OF_JOB_TIME,
    JOB_OBJECT_MSG_JOB_MEMORY_LIMIT,
    JobObjectSandbox,
    cap_from_job,
    job_limits,
)
from io_harness.sandbox._jobobject_ctypes import (
    ExtendedLimitInformation,
    extended_limit_information,
)
from io_harness.sandbox._seatbelt import (
    SANDBOX_EXEC,
    SeatbeltSandbox,
    sbpl_string,
    seatbelt_argv,
    seatbelt_profile,
)
from io_harness.sandbox._types import (
    Network,
    Sandbox,
    SandboxConfig,
    SandboxLimits,
    SandboxMode,
)

macos_only = pytest.mark.skipif(
    sys.platform != "darwin", reason="sandbox-exec exists only on macOS"
)
windows_only = pytest.mark.skipif(
    sys.platform != "win32", reason="Job Objects exist only on Windows"
)
posix_only = pytest.mark.skipif(
    sys.platform == "win32", reason="the sandbox-exec stand-in is a POSIX shell script"
)


def profile_for(
    tmp_path: Path,
    *,
    mode: SandboxMode = "workspace_write",
    network: Network = "deny",
    readable: Sequence[Path] = (),
    writable: Sequence[Path] = (),
    proxy_socket: Path | None = None,
) -> tuple[str, Path, Path]:
    workdir, scratch = tmp_path / "work", tmp_path / "scratch"
    workdir.mkdir(exist_ok=True)
    scratch.mkdir(exist_ok=True)
    profile = seatbelt_profile(
        workdir=workdir,
        scratch=scratch,
        mode=mode,
        readable=readable,
        writable=writable,
        network=network,
        proxy_socket=proxy_socket,
    )
    return profile, Path(os.path.realpath(workdir)), Path(os.path.realpath(scratch))


def write_rule(profile: str) -> str:
    [rule] = [line for line in profile.splitlines() if line.startswith("(allow file-write* ")]
    return rule


# --- the seatbelt profile -------------------------------------------------------------------


def test_the_profile_denies_by_default_and_lets_the_tree_run(tmp_path: Path) -> None:
    profile, _, _ = profile_for(tmp_path)
    lines = profile.splitlines()
    assert lines[:2] == ["(version 1)", "(deny default)"]
    for rule in (
        "(allow process-exec)",
        "(allow process-fork)",
        "(allow signal (target same-sandbox))",
        "(allow sysctl-read)",
        "(allow file-read*)",
    ):
        assert rule in lines
    assert "(allow default)" not in profile


def test_workspace_write_lets_the_workdir_and_scratch_be_written(tmp_path: Path) -> None:
    profile, workdir, scratch = profile_for(tmp_path, mode="workspace_write")
    rule = write_rule(profile)
    assert f'(subpath "{workdir}")' in rule
    assert f'(subpath "{scratch}")' in rule
    assert "(allow file-write*)" not in profile.splitlines()


def test_read_only_lets_only_the_scratch_folder_be_written(tmp_path: Path) -> None:
    profile, workdir, scratch = profile_for(tmp_path, mode="read_only")
    rule = write_rule(profile)
    assert f'(subpath "{scratch}")' in rule
    assert str(workdir) not in rule


def test_full_access_lets_anything_be_written(tmp_path: Path) -> None:
    profile, _, _ = profile_for(tmp_path, mode="full_access")
    assert "(allow file-write*)" in profile.splitlines()


def test_extra_writable_and_readable_folders_are_named(tmp_path: Path) -> None:
    record, runner = tmp_path / "record", tmp_path / "runner"
    record.mkdir()
    runner.mkdir()
    profile, _, _ = profile_for(tmp_path, mode="read_only", readable=[runner], writable=[record])
    assert f'(subpath "{record}")' in write_rule(profile)
    assert f'(allow file-read* (subpath "{runner}"))' in profile.splitlines()


def test_only_dev_null_and_its_kind_are_writable_devices(tmp_path: Path) -> None:
    profile, _, _ = profile_for(tmp_path, mode="read_only")
    [devices] = [line for line in profile.splitlines() if "file-write-data" in line]
    assert '(literal "/dev/null")' in devices
    assert "/dev/tty" not in profile


def test_paths_are_canonical_so_links_like_macos_var_match(tmp_path: Path) -> None:
    real = tmp_path / "private-work"
    real.mkdir()
    link = tmp_path / "work-link"
    link.symlink_to(real)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    profile = seatbelt_profile(
        workdir=link,
        scratch=scratch,
        mode="workspace_write",
        readable=(),
        writable=(),
        network="deny",
        proxy_socket=None,
    )
    assert f'(subpath "{os.path.realpath(real)}")' in write_rule(profile)
    assert str(link) not in profile


def test_a_quote_or_backslash_in_a_path_is_escaped(tmp_path: Path) -> None:
    odd = tmp_path / 'we"ird\\name'
    odd.mkdir()
    profile, _, _ = profile_for(tmp_path, writable=[odd])
    escaped = str(Path(os.path.realpath(odd)).parent) + '/we\\"ird\\\\name'
    assert f'(subpath "{escaped}")' in write_rule(profile)


def test_sbpl_strings_escape_and_refuse_control_characters() -> None:
    assert sbpl_string("/a/b") == '"/a/b"'
    assert sbpl_string('/a") (allow default) ("') == '"/a\\") (allow default) (\\""'
    assert sbpl_string("C:\\x") == '"C:\\\\x"'
    with pytest.raises(SandboxError, match="control character"):
        sbpl_string("/a\nb")


def test_a_denied_network_opens_nothing_but_sockets_in_writable_folders(tmp_path: Path) -> None:
    profile, _, scratch = profile_for(tmp_path, network="deny")
    assert "network*" not in profile
    assert "path-literal" not in profile
    assert "(allow system-socket)" not in profile.splitlines()
    [outbound] = [line for line in profile.splitlines() if "network-outbound" in line]
    assert outbound.startswith("(allow network-outbound (remote unix-socket (subpath ")
    assert f'(subpath "{scratch}")' in outbound


def test_an_allow_list_opens_only_the_proxy_socket(tmp_path: Path) -> None:
    sockets = tmp_path / "sockets"
    sockets.mkdir()
    proxy = sockets / "proxy.sock"
    profile, _, _ = profile_for(tmp_path, network="allow_list", proxy_socket=proxy)
    real = os.path.realpath(proxy)
    assert f'(allow network-outbound (remote unix-socket (path-literal "{real}")))' in profile
    assert "network*" not in profile


def test_an_allow_list_without_a_proxy_socket_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SandboxError, match="proxy"):
        profile_for(tmp_path, network="allow_list")


def test_an_open_network_allows_every_connection(tmp_path: Path) -> None:
    profile, _, _ = profile_for(tmp_path, network="open")
    assert "(allow network*)" in profile.splitlines()


def test_the_command_line_runs_the_fixed_sandbox_exec_with_the_profile() -> None:
    argv = seatbelt_argv("(version 1)", ["python", "-c", "pass"])
    assert argv == [SANDBOX_EXEC, "-p", "(version 1)", "python", "-c", "pass"]
    assert SANDBOX_EXEC == "/usr/bin/sandbox-exec"


# --- the seatbelt backend -------------------------------------------------------------------


def test_seatbelt_is_offered_only_on_macos() -> None:
    ok, reason = SeatbeltSandbox.available()
    if sys.platform != "darwin":
        assert not ok
        assert "macOS" in reason
    assert SeatbeltSandbox.denies_network
    assert isinstance(SeatbeltSandbox(SandboxConfig()), Sandbox)


@pytest.fixture
def fake_sandbox_exec(tmp_path: Path) -> tuple[str, Path]:
    """A stand-in for sandbox-exec: records the profile, then runs the command unconfined."""
    record = tmp_path / "profile.sb"
    script = tmp_path / "sandbox-exec"
    script.write_text(
        f'#!/bin/sh\n[ "$1" = -p ] || exit 97\nprintf %s "$2" > "{record}"\nshift 2\nexec "$@"\n'
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script), record


def seatbelt_with(fake: tuple[str, Path], **limits: Any) -> SeatbeltSandbox:
    config = SandboxConfig(limits=SandboxLimits(**limits))
    return SeatbeltSandbox(config, sandbox_exec=fake[0])


@posix_only
async def test_the_shared_runner_runs_in_a_scratch_folder_it_then_removes(
    tmp_path: Path, fake_sandbox_exec: tuple[str, Path]
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    code = (
        "import os; open(os.path.join(os.environ['TMPDIR'], 'f'), 'w').write('x'); "
        "print(os.environ['TMPDIR'])"
    )
    outcome = await seatbelt_with(fake_sandbox_exec).run([sys.executable, "-c", code], workdir=work)
    assert (outcome.exit_code, outcome.cap_hit, outcome.backend) == (0, None, "seatbelt")
    scratch = Path(outcome.stdout.strip())
    assert not scratch.exists()
    profile = fake_sandbox_exec[1].read_text()
    assert f'(subpath "{scratch}")' in write_rule(profile)
    assert f'(subpath "{os.path.realpath(work)}")' in write_rule(profile)
    assert [event.kind for event in outcome.events] == ["create", "exec", "destroy"]


@posix_only
async def test_the_shared_runner_kills_at_the_cpu_cap(
    tmp_path: Path, fake_sandbox_exec: tuple[str, Path]
) -> None:
    sandbox = seatbelt_with(fake_sandbox_exec, cpu_seconds=1)
    outcome = await sandbox.run([sys.executable, "-c", "while True: pass"], workdir=tmp_path)
    assert outcome.cap_hit == "cpu"
    if sys.platform != "win32":  # SIGXCPU is a POSIX signal
        assert outcome.signal == signal.SIGXCPU
    assert [event.kind for event in outcome.events] == ["create", "exec", "cap_hit", "destroy"]


@posix_only
async def test_the_shared_runner_kills_at_the_file_size_cap(
    tmp_path: Path, fake_sandbox_exec: tuple[str, Path]
) -> None:
    sandbox = seatbelt_with(fake_sandbox_exec, file_size_bytes=4096)
    argv = ["dd", "if=/dev/zero", "of=big", "bs=1024", "count=64"]
    outcome = await sandbox.run(argv, workdir=tmp_path)
    assert outcome.cap_hit == "file_size"
    assert (tmp_path / "big").stat().st_size <= 4096


@posix_only
async def test_the_shared_runner_kills_at_the_disk_cap(
    tmp_path: Path, fake_sandbox_exec: tuple[str, Path]
) -> None:
    sandbox = seatbelt_with(
        fake_sandbox_exec, disk_bytes=4 << 20, file_size_bytes=2 << 20, wall_seconds=30
    )
    code = (
        "import time\n"
        "for i in range(40): open(f'disk-{i}.bin', 'wb').write(b'x' * (1 << 20))\n"
        "time.sleep(600)"
    )
    outcome = await sandbox.run([sys.executable, "-c", code], workdir=tmp_path)
    assert outcome.cap_hit == "disk", (outcome.summary, outcome.stderr[-300:])
    assert [event.kind for event in outcome.events] == ["create", "exec", "cap_hit", "destroy"]


@posix_only
async def test_the_shared_runner_kills_at_the_wall_clock(
    tmp_path: Path, fake_sandbox_exec: tuple[str, Path]
) -> None:
    sandbox = seatbelt_with(fake_sandbox_exec, wall_seconds=0.3)
    outcome = await sandbox.run(["sleep", "30"], workdir=tmp_path)
    assert outcome.cap_hit == "wall"


@posix_only
async def test_the_shared_runner_cuts_output_at_the_cap(
    tmp_path: Path, fake_sandbox_exec: tuple[str, Path]
) -> None:
    sandbox = seatbelt_with(fake_sandbox_exec, output_bytes=1000)
    outcome = await sandbox.run([sys.executable, "-c", "print('x' * 100000)"], workdir=tmp_path)
    assert (outcome.cap_hit, outcome.truncated) == ("output", True)
    assert len(outcome.stdout) < 2000


@posix_only
async def test_the_command_gets_back_the_signals_python_ignores(
    tmp_path: Path, fake_sandbox_exec: tuple[str, Path]
) -> None:
    # With SIGPIPE left ignored, `yes` would see EPIPE and complain instead of dying quietly.
    outcome = await seatbelt_with(fake_sandbox_exec).run(
        ["sh", "-c", "yes | head -c 4"], workdir=tmp_path
    )
    assert (outcome.exit_code, outcome.stdout, outcome.stderr) == (0, "y\ny\n", "")


# --- seatbelt on macOS ----------------------------------------------------------------------


@macos_only
def test_sandbox_exec_is_available_on_this_mac() -> None:
    ok, reason = SeatbeltSandbox.available()
    assert ok, reason


@macos_only
async def test_macos_a_write_outside_the_workdir_fails(tmp_path: Path) -> None:
    work, outside = tmp_path / "work", tmp_path / "outside"
    work.mkdir()
    outside.mkdir()
    code = f"open({str(outside / 'f')!r}, 'w')"
    outcome = await SeatbeltSandbox(SandboxConfig()).run([sys.executable, "-c", code], workdir=work)
    assert outcome.exit_code != 0
    assert "PermissionError" in outcome.stderr or "Operation not permitted" in outcome.stderr
    assert not (outside / "f").exists()


@macos_only
async def test_macos_the_workdir_is_writable_only_in_workspace_write(tmp_path: Path) -> None:
    code = "open('f', 'w').write('x')"
    sandbox = SeatbeltSandbox(SandboxConfig())
    written = await sandbox.run([sys.executable, "-c", code], workdir=tmp_path)
    assert written.exit_code == 0
    assert (tmp_path / "f").read_text() == "x"
    (tmp_path / "f").unlink()
    refused = await sandbox.run([sys.executable, "-c", code], workdir=tmp_path, mode="read_only")
    assert refused.exit_code != 0
    assert not (tmp_path / "f").exists()


@macos_only
async def test_macos_the_scratch_folder_is_writable_in_read_only(tmp_path: Path) -> None:
    code = "import os, tempfile; tempfile.NamedTemporaryFile(dir=os.environ['TMPDIR']).write(b'x')"
    sandbox = SeatbeltSandbox(SandboxConfig(mode="read_only"))
    outcome = await sandbox.run([sys.executable, "-c", code], workdir=tmp_path)
    assert outcome.exit_code == 0, outcome.stderr


def _loopback_server() -> tuple[socket.socket, int]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()  # the kernel completes a connection before any accept
    return server, server.getsockname()[1]


@macos_only
async def test_macos_a_loopback_server_is_unreachable_unless_the_network_is_open(
    tmp_path: Path,
) -> None:
    server, port = _loopback_server()
    code = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=5)"
    try:
        denied = await SeatbeltSandbox(SandboxConfig()).run(
            [sys.executable, "-c", code], workdir=tmp_path
        )
        opened = await SeatbeltSandbox(SandboxConfig(network="open")).run(
            [sys.executable, "-c", code], workdir=tmp_path
        )
    finally:
        server.close()
    assert denied.exit_code != 0
    assert opened.exit_code == 0, opened.stderr


# --- the Job Object's values ----------------------------------------------------------------


def test_the_job_limits_carry_every_cap_a_job_can_hold() -> None:
    limits = SandboxLimits(cpu_seconds=1.5, memory_bytes=256 << 20, processes=12)
    values = job_limits(limits)
    for flag in (
        JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE,
        JOB_OBJECT_LIMIT_JOB_MEMORY,
        JOB_OBJECT_LIMIT_ACTIVE_PROCESS,
        JOB_OBJECT_LIMIT_JOB_TIME,
    ):
        assert values["LimitFlags"] & flag
    assert values["JobMemoryLimit"] == 256 << 20
    assert values["ActiveProcessLimit"] == 12
    assert values["PerJobUserTimeLimit"] == 15_000_000


def test_the_limit_structure_has_the_windows_layout_and_values() -> None:
    info = extended_limit_information(SandboxLimits(cpu_seconds=2, memory_bytes=1 << 30))
    basic = info.BasicLimitInformation
    assert basic.PerJobUserTimeLimit == 20_000_000
    assert basic.LimitFlags == job_limits(SandboxLimits())["LimitFlags"]
    assert basic.ActiveProcessLimit == SandboxLimits().processes
    assert info.JobMemoryLimit == 1 << 30
    if (
        ctypes.sizeof(ctypes.c_void_p) == 8
    ):  # the x64 layout of JOBOBJECT_EXTENDED_LIMIT_INFORMATION
        assert ctypes.sizeof(ExtendedLimitInformation) == 144
        assert ExtendedLimitInformation.JobMemoryLimit.offset == 120


def test_the_cap_is_the_first_limit_message_the_job_posted() -> None:
    limits = SandboxLimits(cpu_seconds=1)
    new_process = 6
    assert cap_from_job([new_process], user_time=0, limits=limits) is None
    assert cap_from_job([JOB_OBJECT_MSG_END_OF_JOB_TIME], user_time=0, limits=limits) == "cpu"
    assert (
        cap_from_job([new_process, JOB_OBJECT_MSG_JOB_MEMORY_LIMIT], user_time=0, limits=limits)
        == "memory"
    )
    assert (
        cap_from_job([JOB_OBJECT_MSG_ACTIVE_PROCESS_LIMIT], user_time=0, limits=limits)
        == "processes"
    )
    both = [JOB_OBJECT_MSG_ACTIVE_PROCESS_LIMIT, JOB_OBJECT_MSG_JOB_MEMORY_LIMIT]
    assert cap_from_job(both, user_time=0, limits=limits) == "processes"


def test_spent_user_time_is_the_cpu_cap_when_its_message_was_lost() -> None:
    limits = SandboxLimits(cpu_seconds=1)
    assert cap_from_job([], user_time=10_000_000, limits=limits) == "cpu"
    assert cap_from_job([], user_time=9_999_999, limits=limits) is None


def test_a_job_object_cannot_deny_the_network_so_it_needs_the_floor_accepted() -> None:
    assert not JobObjectSandbox.denies_network
    with pytest.raises(SandboxError, match="accept_floor"):
        JobObjectSandbox(SandboxConfig())
    assert isinstance(JobObjectSandbox(SandboxConfig(accept_floor=True)), Sandbox)
    JobObjectSandbox(SandboxConfig(network="open"))


def test_job_objects_are_offered_only_on_windows() -> None:
    ok, reason = JobObjectSandbox.available()
    assert ok == (sys.platform == "win32")
    if not ok:
        assert "Windows" in reason


@pytest.mark.skipif(sys.platform == "win32", reason="off Windows only: the job refuses to run")
async def test_off_windows_a_job_object_refuses_to_run(tmp_path: Path) -> None:
    sandbox = JobObjectSandbox(SandboxConfig(accept_floor=True))
    with pytest.raises(SandboxError, match="Windows"):
        await sandbox.run([sys.executable, "-c", "pass"], workdir=tmp_path)


# --- Job Objects on Windows -----------------------------------------------------------------


def _job(**limits: Any) -> JobObjectSandbox:
    return JobObjectSandbox(SandboxConfig(limits=SandboxLimits(**limits), accept_floor=True))


@windows_only
async def test_windows_a_command_runs_in_a_job(tmp_path: Path) -> None:
    outcome = await _job().run([sys.executable, "-c", "print('hi')"], workdir=tmp_path)
    assert (outcome.exit_code, outcome.stdout.strip(), outcome.backend) == (0, "hi", "job_object")
    assert [event.kind for event in outcome.events] == ["create", "exec", "destroy"]


@windows_only
async def test_windows_output_is_truncated_when_cut_not_when_it_shows_the_marker(
    tmp_path: Path,
) -> None:
    marker = "[... 12 bytes of output cut here ...]"
    printed = await _job().run([sys.executable, "-c", f"print({marker!r})"], workdir=tmp_path)
    flooded = await _job(output_bytes=1000).run(
        [sys.executable, "-c", "print('x' * 100000)"], workdir=tmp_path
    )
    assert (printed.exit_code, printed.truncated) == (0, False)
    assert printed.stdout.strip() == marker
    assert (flooded.cap_hit, flooded.truncated) == ("output", True)


@windows_only
async def test_windows_the_cpu_cap_kills(tmp_path: Path) -> None:
    outcome = await _job(cpu_seconds=1).run(
        [sys.executable, "-c", "while True: pass"], workdir=tmp_path
    )
    assert outcome.cap_hit == "cpu"


@windows_only
async def test_windows_the_memory_cap_kills(tmp_path: Path) -> None:
    code = "b = bytearray(512 << 20)"
    outcome = await _job(memory_bytes=128 << 20).run([sys.executable, "-c", code], workdir=tmp_path)
    assert outcome.cap_hit == "memory"


@windows_only
async def test_windows_the_process_cap_kills(tmp_path: Path) -> None:
    code = (
        "import subprocess, sys\n"
        "kids = [subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)'])"
        " for _ in range(6)]\n"
    )
    outcome = await _job(processes=3).run([sys.executable, "-c", code], workdir=tmp_path)
    assert outcome.cap_hit == "processes"


@windows_only
async def test_windows_the_wall_clock_kills_a_detached_child_too(tmp_path: Path) -> None:
    code = (
        "import subprocess, sys, time\n"
        "kid = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'],"
        " creationflags=subprocess.DETACHED_PROCESS)\n"
        "print(kid.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    outcome = await _job(wall_seconds=2).run([sys.executable, "-c", code], workdir=tmp_path)
    assert outcome.cap_hit == "wall"
    kid = int(outcome.stdout.split()[0])
    kernel32 = ctypes.WinDLL("kernel32")  # type: ignore[attr-defined,unused-ignore]
    handle = kernel32.OpenProcess(0x1000, False, kid)  # PROCESS_QUERY_LIMITED_INFORMATION
    if handle:
        code_out = ctypes.c_ulong()
        kernel32.GetExitCodeProcess(handle, ctypes.byref(code_out))
        kernel32.CloseHandle(handle)
        assert code_out.value != 259  # STILL_ACTIVE
