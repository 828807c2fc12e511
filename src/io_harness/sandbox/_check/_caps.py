"""Cases of the caps: each one kills the command that passes it, and only that one."""

from __future__ import annotations

import os
import textwrap

from io_harness.sandbox._check._trial import Case, CaseSkipped, Trial, expect, named
from io_harness.sandbox._types import SandboxConfig, SandboxLimits

MiB = 1 << 20


def _needs_cgroups(cap: str, fallback: str) -> None:
    from io_harness.sandbox._cgroups import _parents

    if not _parents():
        raise CaseSkipped(f"no writable cgroup here: the {cap} cap falls back to {fallback}")


async def cpu_cap_kills(trial: Trial) -> None:
    outcome = await trial.python_run("while True: pass", cpu_seconds=1)
    expect(outcome.cap_hit == "cpu", "a busy loop was not killed at a 1 s CPU cap", outcome)
    expect(outcome.exit_code is None, "a command killed at a cap has an exit status")


async def wall_cap_kills(trial: Trial) -> None:
    outcome = await trial.python_run("import time; time.sleep(600)", wall_seconds=1)
    expect(outcome.cap_hit == "wall", "a sleep was not killed at a 1 s wall cap", outcome)
    expect(outcome.timed_out, "a command killed at the wall cap is not timed_out")


async def memory_cap_kills(trial: Trial) -> None:
    _needs_cgroups("memory", "RLIMIT_AS, which refuses allocations instead of killing")
    code = """
        chunks = []
        while True:
            chunks.append(bytearray(16 << 20))
        """
    outcome = await trial.python_run(code, memory_bytes=128 << 20)
    expect(outcome.cap_hit == "memory", "allocating past 128 MiB was not killed", outcome)


async def process_cap_kills(trial: Trial) -> None:
    _needs_cgroups("process", "RLIMIT_NPROC, which refuses forks instead of killing")
    code = """
        import os, time
        for _ in range(200):
            if os.fork() == 0:
                time.sleep(600)
                os._exit(0)
        time.sleep(600)
        """
    outcome = await trial.python_run(code, processes=16)
    expect(outcome.cap_hit == "processes", "forking past 16 processes was not killed", outcome)


async def a_single_process_cap_still_runs_the_command(trial: Trial) -> None:
    # A wrapper's own processes (a launcher, a guard) may live in the groups too:
    # the cap is the command's own.
    outcome = await trial.python_run("print('ran')", processes=1)
    expect(outcome.exit_code == 0, "a one-process command did not run at processes=1", outcome)
    expect(outcome.stdout == "ran\n", "the command said wrong", outcome)


async def output_cap_kills(trial: Trial) -> None:
    code = """
        import sys
        while True:
            sys.stdout.write("x" * 65536)
        """
    outcome = await trial.python_run(code, output_bytes=MiB)
    expect(outcome.cap_hit == "output", "endless output was not killed at 1 MiB", outcome)
    expect(outcome.truncated, "the cut output is not marked truncated")
    expect("bytes of output cut here" in outcome.stdout, "the output does not say where it was cut")


async def file_size_cap_kills(trial: Trial) -> None:
    # dd, not Python: CPython ignores SIGXFSZ and sees EFBIG instead of being killed.
    argv = ["dd", "if=/dev/zero", "of=big.bin", "bs=65536", "count=64"]
    outcome = await trial.sandbox(file_size_bytes=MiB).run(argv, workdir=trial.workspace)
    expect(outcome.cap_hit == "file_size", "a 4 MiB file was not killed at 1 MiB", outcome)
    big = trial.workspace / "big.bin"
    expect(not big.exists() or big.stat().st_size <= MiB, "big.bin grew past the cap")


_FOLDERS = {"workdir": "os.getcwd()", "tmpdir": "tempfile.gettempdir()", "tmp": "'/tmp'"}
"""Where a command writes, as the Python expression it finds the folder by."""


def _writes(files: int, folder: str, *, then_wait: bool = False) -> str:
    """Code that writes ``files`` files of 1 MiB in ``folder`` (a key of :data:`_FOLDERS`),
    stopping at the first refused write, and with ``then_wait`` waits to be killed."""
    return textwrap.dedent(
        f"""
        import os, tempfile, time
        folder = {_FOLDERS[folder]}
        for i in range({files}):
            try:
                with open(os.path.join(folder, f"disk-{{i}}.bin"), "wb") as out:
                    out.write(b"x" * {MiB})
            except OSError as refused:  # a private /tmp may fill up at the cap
                print(refused)
                break
        if {then_wait}:
            time.sleep(600)
        """
    )


async def _private_tmp(trial: Trial) -> None:
    """Skip unless the command's ``/tmp`` is writable and its own."""
    probe = f"ioh-check-probe-{trial.workspace.name}"
    code = f"open('/tmp/{probe}', 'w').write('x'); print('written')"
    outcome = await trial.python_run(code)
    if outcome.stdout.strip() != "written":
        raise CaseSkipped("gives the command no /tmp it may write")
    shared = f"/tmp/{probe}"
    if os.path.exists(shared):
        os.unlink(shared)
        raise CaseSkipped("gives no private /tmp (the command writes the host's)")


def _disk_cap_in(folder: str) -> Case:
    async def case(trial: Trial) -> None:
        if folder == "tmp":
            await _private_tmp(trial)
        # Forty files of 1 MiB, each under the per-file cap, 40 MiB in all; then a wait
        # that only a kill ends (the wall cap's, were the disk cap not held meanwhile).
        code = _writes(40, folder, then_wait=True)
        outcome = await trial.python_run(
            code, disk_bytes=4 * MiB, file_size_bytes=2 * MiB, wall_seconds=30
        )
        expect(outcome.cap_hit == "disk", "40 MiB of writes passed a 4 MiB disk cap", outcome)
        expect(outcome.exit_code is None, "the command was not killed at the disk cap", outcome)
        expect(outcome.summary == "killed at the disk cap", f"it says {outcome.summary!r}")
        written = outcome.written_bytes
        expect(written is not None and written > 4 * MiB, "written_bytes is not past the cap")
        capped = [event for event in outcome.events if event.kind == "cap_hit"]
        expect(
            [event.detail for event in capped] == [{"cap": "disk", "written_bytes": written}],
            f"the cap_hit events are {[event.detail for event in capped]}",
        )

    case.__name__ = f"the_disk_cap_kills_a_command_whose_files_pass_it_in_total_in_{folder}"
    return case


async def a_command_writing_under_the_disk_cap_is_untouched(trial: Trial) -> None:
    code = _writes(2, "workdir") + _writes(1, "tmpdir") + "print(len(os.listdir()))"
    outcome = await trial.python_run(code, disk_bytes=4 * MiB, file_size_bytes=2 * MiB)
    expect(
        (outcome.exit_code, outcome.cap_hit) == (0, None), "3 MiB under 4 MiB was killed", outcome
    )
    expect(outcome.stdout.split()[-1:] == ["3"], "the workdir does not hold 3 files", outcome)
    expect(outcome.written_bytes is None, "written_bytes is set with no disk cap hit")


async def a_sparse_file_counts_by_its_allocated_blocks(trial: Trial) -> None:
    code = "open('sparse.bin', 'wb').truncate(64 << 20)"
    outcome = await trial.python_run(code, disk_bytes=4 * MiB)
    expect((outcome.exit_code, outcome.cap_hit) == (0, None), "a sparse file was killed", outcome)
    expect((trial.workspace / "sparse.bin").stat().st_size == 64 * MiB, "sparse.bin is wrong")


async def without_a_disk_cap_only_the_per_file_cap_holds(trial: Trial) -> None:
    limits = SandboxLimits(disk_bytes=None, file_size_bytes=2 * MiB, wall_seconds=60)
    sandbox = trial.factory(SandboxConfig(limits=limits, accept_floor=True))
    argv = [trial.python, "-c", _writes(40, "workdir")]
    outcome = await sandbox.run(argv, workdir=trial.workspace)
    ended = (outcome.exit_code, outcome.cap_hit, outcome.written_bytes)
    expect(ended == (0, None, None), "40 MiB with no disk cap did not end well", outcome)
    files = len(list(trial.workspace.glob("disk-*.bin")))
    expect(files == 40, f"{files} of the 40 files were written")


CASES = named(
    cpu_cap_kills,
    wall_cap_kills,
    memory_cap_kills,
    process_cap_kills,
    a_single_process_cap_still_runs_the_command,
    output_cap_kills,
    file_size_cap_kills,
    *(_disk_cap_in(folder) for folder in _FOLDERS),
    a_command_writing_under_the_disk_cap_is_untouched,
    a_sparse_file_counts_by_its_allocated_blocks,
    without_a_disk_cap_only_the_per_file_cap_holds,
)
