"""Windows: each command runs in a Job Object whose limits kill the whole tree.

The job caps the tree's committed memory, its live process count and its
user-mode CPU time, and kills every process in it when the job is closed, so a
child that detaches from its parent still dies. A job confines no file and no
socket: :attr:`JobObjectSandbox.denies_network` is false, and ``select()`` must
refuse this backend for a run that denies the network unless the caller accepts
the floor (``accept_floor``).

What is portable (the limit values, the cap read back from the job's messages)
is plain Python here; the ctypes part (the job's structures, the kernel32 calls
and the runner that makes them) is :mod:`io_harness.sandbox._jobobject_ctypes`,
which ``make typecheck`` checks as Windows code, and which loads only when a
command runs in a job.
"""

from __future__ import annotations

import math
import shutil
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import ClassVar

from io_harness._process import in_thread
from io_harness.errors import SandboxError
from io_harness.sandbox._command import command_env
from io_harness.sandbox._disk import DiskMeter
from io_harness.sandbox._types import (
    Cap,
    NetCheck,
    SandboxConfig,
    SandboxEvent,
    SandboxLimits,
    SandboxMode,
    SandboxOutcome,
    ended_events,
)

__all__ = [
    "JOB_OBJECT",
    "JOB_OBJECT_MSG_ACTIVE_PROCESS_ZERO",
    "MESSAGE_CAPS",
    "JobObjectSandbox",
    "cap_from_job",
    "job_limits",
]

JOB_OBJECT = "job_object"
"""The backend's name in the trace."""

# LimitFlags bits (winnt.h).
JOB_OBJECT_LIMIT_JOB_TIME = 0x0004
JOB_OBJECT_LIMIT_ACTIVE_PROCESS = 0x0008
JOB_OBJECT_LIMIT_JOB_MEMORY = 0x0200
JOB_OBJECT_LIMIT_DIE_ON_UNHANDLED_EXCEPTION = 0x0400
JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE = 0x2000

# Messages the job posts to its completion port (winnt.h).
JOB_OBJECT_MSG_END_OF_JOB_TIME = 1
JOB_OBJECT_MSG_ACTIVE_PROCESS_LIMIT = 3
JOB_OBJECT_MSG_ACTIVE_PROCESS_ZERO = 4
JOB_OBJECT_MSG_PROCESS_MEMORY_LIMIT = 9
JOB_OBJECT_MSG_JOB_MEMORY_LIMIT = 10

MESSAGE_CAPS: dict[int, Cap] = {
    JOB_OBJECT_MSG_END_OF_JOB_TIME: "cpu",
    JOB_OBJECT_MSG_ACTIVE_PROCESS_LIMIT: "processes",
    JOB_OBJECT_MSG_PROCESS_MEMORY_LIMIT: "memory",
    JOB_OBJECT_MSG_JOB_MEMORY_LIMIT: "memory",
}
"""The messages that say the job hit a limit, and the cap each is."""

_TICKS_PER_SECOND = 10_000_000
"""Job times count 100-nanosecond ticks."""


def job_limits(limits: SandboxLimits) -> dict[str, int]:
    """The job's limit fields for ``limits``, named as in ``JOBOBJECT_EXTENDED_LIMIT_INFORMATION``.

    CPU is the tree's user-mode time (a job has no cap on kernel time); file
    size and open files have no job limit. Unhandled exceptions end the process
    at once instead of waiting on an error-report dialog.
    """
    return {
        "LimitFlags": JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE
        | JOB_OBJECT_LIMIT_JOB_MEMORY
        | JOB_OBJECT_LIMIT_ACTIVE_PROCESS
        | JOB_OBJECT_LIMIT_JOB_TIME
        | JOB_OBJECT_LIMIT_DIE_ON_UNHANDLED_EXCEPTION,
        "JobMemoryLimit": limits.memory_bytes,
        "ActiveProcessLimit": limits.processes,
        "PerJobUserTimeLimit": math.ceil(limits.cpu_seconds * _TICKS_PER_SECOND),
    }


def cap_from_job(messages: Sequence[int], *, user_time: int, limits: SandboxLimits) -> Cap | None:
    """The cap the job hit: the first limit message it posted, else CPU if its user time is spent.

    ``user_time`` is ``TotalUserTime`` from the job's accounting, in 100 ns ticks;
    it covers a CPU kill whose message was lost (the port may drop messages).
    """
    for message in messages:
        if message in MESSAGE_CAPS:
            return MESSAGE_CAPS[message]
    if user_time >= job_limits(limits)["PerJobUserTimeLimit"]:
        return "cpu"
    return None


class JobObjectSandbox:
    """The Windows backend: a Job Object per command, limits that kill, nothing outlives it.

    It caps CPU (user time), memory, processes, wall clock and output, and
    tears the tree down; it does not confine files or the network, so it is
    built only for ``network="open"`` or with ``accept_floor``. The disk cap is
    not enforced while the command runs: what its writes added to the workdir,
    its scratch folder and ``writable`` is counted after it ends, and a command
    found over the cap is reported so (``cap_hit="disk"``).
    """

    disk_cap: ClassVar[str] = "not enforced: counted after the command ends, reported if over"

    denies_network: ClassVar[bool] = False
    """A job cannot close sockets: ``select()`` must refuse it for a run that denies the
    network, unless the caller accepts the floor (``accept_floor``)."""
    confines_writes: ClassVar[bool] = False

    def __init__(self, config: SandboxConfig) -> None:
        if config.network != "open" and not config.accept_floor:
            raise SandboxError(
                "a Windows Job Object cannot deny the network; pass accept_floor=True to accept it"
            )
        self._config = config

    @property
    def name(self) -> str:
        """``job_object``, as the trace records it."""
        return JOB_OBJECT

    @property
    def config(self) -> SandboxConfig:
        """The configuration this sandbox enforces."""
        return self._config

    @staticmethod
    def available() -> tuple[bool, str]:
        """Whether this machine has Job Objects, and why not when it does not."""
        if sys.platform != "win32":
            return False, "Job Objects exist only on Windows"
        return True, "Job Objects with kill-on-close"

    async def run(
        self,
        argv: Sequence[str],
        *,
        workdir: Path,
        env: Mapping[str, str] | None = None,
        limits: SandboxLimits | None = None,
        mode: SandboxMode | None = None,
        readable: Sequence[Path] = (),
        writable: Sequence[Path] = (),
        stdin: bytes | None = None,
        net_check: NetCheck | None = None,
    ) -> SandboxOutcome:
        """Run ``argv`` in ``workdir`` inside a new job (see :class:`Sandbox`).

        ``mode``, ``readable`` and ``writable`` are recorded, not enforced; the disk cap is
        checked after the command ends.
        """
        # Here, not at the top: ctypes and kernel32 load only for a command run in a job.
        from io_harness.sandbox._jobobject_ctypes import run_in_job

        limits = limits or self._config.limits
        chosen_mode = mode or self._config.mode
        events = [
            SandboxEvent("create", self.name, {"mode": chosen_mode, "limits": limits.record()})
        ]
        scratch = Path(tempfile.mkdtemp(prefix="ioh-job-"))
        run_env = command_env(scratch, env)
        disk = None
        if limits.disk_bytes is not None:
            folders = [Path(workdir), scratch, *writable]
            disk = DiskMeter(folders, limits.disk_bytes, stamp_in=scratch)
        try:
            outcome = await run_in_job(argv, workdir, run_env, limits, stdin)
            over = disk is not None and await in_thread(disk.finish)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        cap = outcome.cap_hit or ("disk" if over else None)
        written = disk.written if disk is not None and cap == "disk" else None
        detail = {"written_bytes": written} if cap == "disk" else {}
        events += ended_events(self.name, argv, outcome.duration, cap, detail)
        return SandboxOutcome(
            backend=self.name,
            argv=tuple(argv),
            exit_code=outcome.exit_code,
            signal=None,
            cap_hit=cap,
            stdout=outcome.stdout,
            stderr=outcome.stderr,
            truncated=outcome.truncated,
            duration=outcome.duration,
            spawn_error=outcome.spawn_error,
            events=tuple(events),
            written_bytes=written,
        )
