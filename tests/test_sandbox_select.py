"""Choosing a backend, copying results back, and the limits' own checks."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from io_harness.errors import ConfigError, SandboxError
from io_harness.sandbox import (
    FloorSandbox,
    SandboxConfig,
    SandboxLimits,
    probe,
    select,
)

linux_only = pytest.mark.skipif(sys.platform != "linux", reason="the Linux chain")


@linux_only
def test_the_default_is_the_first_available_backend_that_denies_the_network() -> None:
    available = {r.name for r in probe() if r.available}
    sandbox = select()
    assert sandbox.name in {"bubblewrap", "namespaces", "landlock"}
    if "bubblewrap" in available:
        assert sandbox.name == "bubblewrap"


def test_every_backend_is_reported_with_a_reason() -> None:
    reports = probe()
    assert {r.name for r in reports} == {
        "bubblewrap",
        "landlock",
        "namespaces",
        "seatbelt",
        "job_object",
        "floor",
    }
    assert all(r.reason for r in reports)


def test_the_floor_is_refused_when_the_network_must_be_denied() -> None:
    with pytest.raises(SandboxError, match="floor: cannot deny the network"):
        select(SandboxConfig(backends=("floor",)))


def test_the_floor_is_taken_when_the_caller_accepts_it() -> None:
    sandbox = select(SandboxConfig(backends=("floor",), accept_floor=True))
    assert sandbox.name == "floor"


def test_the_floor_is_taken_for_an_open_network() -> None:
    assert select(SandboxConfig(backends=("floor",), network="open")).name == "floor"


def test_what_select_passed_by_is_kept_with_its_reason() -> None:
    sandbox = select(SandboxConfig(backends=("seatbelt", "job_object", "floor"), accept_floor=True))
    if sys.platform not in ("darwin", "win32"):
        assert sandbox.name == "floor"
        assert isinstance(sandbox, FloorSandbox)
        assert [why.split(":")[0] for why in sandbox.selection] == ["seatbelt", "job_object"]


def test_an_unknown_backend_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="unknown backends"):
        SandboxConfig(backends=("docker",))


def test_limits_are_checked() -> None:
    with pytest.raises(ConfigError, match="cpu_seconds"):
        SandboxLimits(cpu_seconds=0)
    with pytest.raises(ConfigError, match="surprise"):
        SandboxLimits(surprise=1)  # type: ignore[call-arg]


@linux_only
def test_a_harness_process_leaves_no_cgroup_behind(tmp_path: Path) -> None:
    from io_harness.sandbox._cgroups import _parents

    if not _parents():
        pytest.skip("no writable cgroup hierarchy here: nothing to leave behind")
    code = (
        "import asyncio, os, sys\n"
        "from io_harness.sandbox import FloorSandbox, SandboxConfig\n"
        "sandbox = FloorSandbox(SandboxConfig(accept_floor=True))\n"
        f"done = asyncio.run(sandbox.run(['true'], workdir={str(tmp_path)!r}))\n"
        "print(os.getpid(), done.exit_code)\n"
    )
    child = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    pid, exit_code = child.stdout.split()
    assert exit_code == "0"
    left = [
        folder
        for parent in _parents().values()
        for folder in parent.iterdir()
        if folder.name.startswith(f"ioh-{pid}-")
    ]
    assert left == []
