"""The disk cap beyond the conformance suite: how the meter counts, where it is configured,
what ``ioh doctor`` says, and the check a Job Object gets after its command ends.

The conformance suite (``test_sandbox_conformance.py``) runs the cap's kill on every
backend of this machine; these tests pin down the rest.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from io_harness._contract_toml import sandbox_config
from io_harness.cli import main
from io_harness.errors import ConfigError
from io_harness.sandbox import SandboxConfig, SandboxLimits, _jobobject_ctypes, probe
from io_harness.sandbox import _disk as disk_module
from io_harness.sandbox._disk import DiskMeter
from io_harness.sandbox._jobobject import JobObjectSandbox
from io_harness.sandbox._jobobject_ctypes import JobRun

MiB = 1 << 20


def _fill(path: Path, mebibytes: int = 1) -> None:
    path.write_bytes(b"x" * (mebibytes * MiB))


@pytest.fixture
def whole_looks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each look walks a whole pass of a tiny folder, however busy the machine."""
    monkeypatch.setattr(disk_module, "_LOOK_INTERVAL", 0.0)
    monkeypatch.setattr(disk_module, "_SLICE_SECONDS", 60.0)


@pytest.fixture
def folders(tmp_path: Path) -> tuple[Path, Path]:
    """A workdir and a scratch folder, empty."""
    work, scratch = tmp_path / "work", tmp_path / "scratch"
    work.mkdir()
    scratch.mkdir()
    return work, scratch


def test_a_file_deleted_after_the_meter_saw_it_still_counts(
    folders: tuple[Path, Path], whole_looks: None
) -> None:
    work, scratch = folders
    meter = DiskMeter([work, scratch], cap=4 * MiB, stamp_in=scratch)
    for name in ("a", "b", "c"):
        _fill(work / name)
    assert not meter.look()
    for name in ("a", "b", "c"):
        (work / name).unlink()
    # A new file may take a deleted one's inode, and then counts only what it holds beyond.
    _fill(work / "d", 3)

    assert meter.look()
    assert meter.written >= 5 * MiB


def test_what_was_there_before_the_command_does_not_count(
    folders: tuple[Path, Path], whole_looks: None
) -> None:
    work, scratch = folders
    _fill(work / "before.bin", 8)
    time.sleep(0.1)  # past the clock tick the meter's start is stamped in
    meter = DiskMeter([work, work / "inside", scratch], cap=4 * MiB, stamp_in=scratch)

    assert not meter.look()
    assert not meter.finish()
    assert meter.written == 0


def test_a_file_the_command_changes_counts_whole(
    folders: tuple[Path, Path], whole_looks: None
) -> None:
    work, scratch = folders
    _fill(work / "log.bin", 8)
    time.sleep(0.1)  # past the clock tick the meter's start is stamped in
    meter = DiskMeter([work, scratch], cap=4 * MiB, stamp_in=scratch)
    with open(work / "log.bin", "ab") as log:
        log.write(b"one more line\n")

    assert meter.finish()
    assert meter.written >= 8 * MiB


def test_the_harness_s_own_files_in_the_scratch_folder_count_only_their_growth(
    folders: tuple[Path, Path], whole_looks: None
) -> None:
    work, scratch = folders
    _fill(scratch / ".confine.code", 3)  # written by the harness just before the command
    meter = DiskMeter([work, scratch], cap=4 * MiB, stamp_in=scratch)
    assert not meter.look()
    with open(scratch / ".confine.code", "ab") as grown:
        grown.write(b"x" * (2 * MiB))

    assert not meter.look()
    assert 2 * MiB <= meter.written < 3 * MiB


def test_the_toml_limits_take_a_disk_cap_or_false_for_none(tmp_path: Path) -> None:
    contract = tmp_path / "contract.toml"
    base = 'goal = "g"\nroot = "."\n[verify]\nkind = "command"\nargv = ["true"]\n'
    contract.write_text(base + "[sandbox.limits]\ndisk_bytes = 4194304\n")
    capped = sandbox_config(contract)
    contract.write_text(base + "[sandbox.limits]\ndisk_bytes = false\n")
    uncapped = sandbox_config(contract)

    assert capped is not None and capped.limits.disk_bytes == 4 * MiB
    assert uncapped is not None and uncapped.limits.disk_bytes is None
    assert SandboxLimits().disk_bytes == 1 << 30
    contract.write_text(base + "[sandbox.limits]\ndisk_bytes = true\n")
    with pytest.raises(ConfigError, match=r"sandbox\.limits\.disk_bytes: .*false for no total cap"):
        sandbox_config(contract)


def test_ioh_doctor_says_how_each_backend_holds_the_disk_cap(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["doctor"]) == 0

    shown = " ".join(capsys.readouterr().out.split())
    reports = {report.name: report.disk_cap for report in probe()}
    assert all(reports.values())
    assert reports["job_object"].startswith("not enforced")
    assert "disk cap" in shown


async def test_a_job_object_reports_a_command_found_past_the_disk_cap_when_it_ended(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The job's runner is replaced by a plain child process (off Windows there is no job):
    # what is tested is the check after the command, the Job Object's only hold on the cap.
    async def run_plainly(
        argv: Sequence[str],
        workdir: Path,
        env: Mapping[str, str],
        limits: SandboxLimits,
        stdin: bytes | None,
    ) -> JobRun:
        done = await asyncio.to_thread(
            subprocess.run, list(argv), cwd=workdir, env={**os.environ, **env}, check=False
        )
        return JobRun(done.returncode, None, "", "", False, 0.0, None)

    monkeypatch.setattr(_jobobject_ctypes, "run_in_job", run_plainly)
    config = SandboxConfig(limits=SandboxLimits(disk_bytes=4 * MiB), accept_floor=True)
    code = "for i in range(40): open(f'disk-{i}.bin', 'wb').write(b'x' * (1 << 20))"

    outcome = await JobObjectSandbox(config).run([sys.executable, "-c", code], workdir=tmp_path)

    assert (outcome.cap_hit, outcome.exit_code) == ("disk", 0)
    assert outcome.summary == "over the disk cap when it ended (exit status 0)"
    assert outcome.written_bytes is not None and outcome.written_bytes >= 40 * MiB
    assert [event.kind for event in outcome.events] == ["create", "exec", "cap_hit", "destroy"]
