"""Windows: each command runs in a Job Object whose limits kill the whole tree.

The job caps the tree's committed memory, its live process count and its
user-mode CPU time, and kills every process in it when the job is closed, so a
child that detaches from its parent still dies. A job confines no file and no
socket: :attr:`JobObjectSandbox.denies_network` is false, and ``select()`` must
refuse this backend for a run that denies the network unless the caller accepts
the floor (``accept_floor``).

What is portable here (the limit values, the structure that carries them, the
cap read back from the job's messages) is plain Python; the kernel32 calls run
only on Windows.
"""

from __future__ import annotations

import ctypes
import math
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, ClassVar

from io_harness._process import _CappedBuffer, _feed, in_thread
from io_harness.errors import SandboxError
from io_harness.sandbox._spawn import command_env
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
    "ExtendedLimitInformation",
    "JobObjectSandbox",
    "cap_from_job",
    "extended_limit_information",
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

_MESSAGE_CAPS: dict[int, Cap] = {
    JOB_OBJECT_MSG_END_OF_JOB_TIME: "cpu",
    JOB_OBJECT_MSG_ACTIVE_PROCESS_LIMIT: "processes",
    JOB_OBJECT_MSG_PROCESS_MEMORY_LIMIT: "memory",
    JOB_OBJECT_MSG_JOB_MEMORY_LIMIT: "memory",
}

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
        if message in _MESSAGE_CAPS:
            return _MESSAGE_CAPS[message]
    if user_time >= job_limits(limits)["PerJobUserTimeLimit"]:
        return "cpu"
    return None


class _BasicLimits(ctypes.Structure):
    _fields_ = (
        ("PerProcessUserTimeLimit", ctypes.c_int64),
        ("PerJobUserTimeLimit", ctypes.c_int64),
        ("LimitFlags", ctypes.c_uint32),
        ("MinimumWorkingSetSize", ctypes.c_size_t),
        ("MaximumWorkingSetSize", ctypes.c_size_t),
        ("ActiveProcessLimit", ctypes.c_uint32),
        ("Affinity", ctypes.c_size_t),
        ("PriorityClass", ctypes.c_uint32),
        ("SchedulingClass", ctypes.c_uint32),
    )


class _IoCounters(ctypes.Structure):
    _fields_ = tuple(
        (name, ctypes.c_uint64)
        for name in (
            "ReadOperationCount",
            "WriteOperationCount",
            "OtherOperationCount",
            "ReadTransferCount",
            "WriteTransferCount",
            "OtherTransferCount",
        )
    )


class ExtendedLimitInformation(ctypes.Structure):
    """``JOBOBJECT_EXTENDED_LIMIT_INFORMATION``: what ``SetInformationJobObject`` reads."""

    _fields_ = (
        ("BasicLimitInformation", _BasicLimits),
        ("IoInfo", _IoCounters),
        ("ProcessMemoryLimit", ctypes.c_size_t),
        ("JobMemoryLimit", ctypes.c_size_t),
        ("PeakProcessMemoryUsed", ctypes.c_size_t),
        ("PeakJobMemoryUsed", ctypes.c_size_t),
    )


class _Accounting(ctypes.Structure):
    # JOBOBJECT_BASIC_ACCOUNTING_INFORMATION
    _fields_ = (
        ("TotalUserTime", ctypes.c_int64),
        ("TotalKernelTime", ctypes.c_int64),
        ("ThisPeriodTotalUserTime", ctypes.c_int64),
        ("ThisPeriodTotalKernelTime", ctypes.c_int64),
        ("TotalPageFaultCount", ctypes.c_uint32),
        ("TotalProcesses", ctypes.c_uint32),
        ("ActiveProcesses", ctypes.c_uint32),
        ("TotalTerminatedProcesses", ctypes.c_uint32),
    )


class _CompletionPort(ctypes.Structure):
    # JOBOBJECT_ASSOCIATE_COMPLETION_PORT
    _fields_ = (("CompletionKey", ctypes.c_void_p), ("CompletionPort", ctypes.c_void_p))


def extended_limit_information(limits: SandboxLimits) -> ExtendedLimitInformation:
    """The structure ``SetInformationJobObject`` takes, filled from :func:`job_limits`.

    A value wider than its field is held at the field's largest value: ctypes
    would otherwise keep only its low bits.
    """
    values = job_limits(limits)
    info = ExtendedLimitInformation()
    basic = info.BasicLimitInformation
    basic.LimitFlags = values["LimitFlags"]
    basic.ActiveProcessLimit = min(values["ActiveProcessLimit"], 2**32 - 1)
    basic.PerJobUserTimeLimit = min(values["PerJobUserTimeLimit"], 2**63 - 1)
    widest_size = 2 ** (8 * ctypes.sizeof(ctypes.c_size_t)) - 1
    info.JobMemoryLimit = min(values["JobMemoryLimit"], widest_size)
    return info


class JobObjectSandbox:
    """The Windows backend: a Job Object per command, limits that kill, nothing outlives it.

    It caps CPU (user time), memory, processes, wall clock and output, and
    tears the tree down; it does not confine files or the network, so it is
    built only for ``network="open"`` or with ``accept_floor``.
    """

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

        ``mode``, ``readable`` and ``writable`` are recorded, not enforced.
        """
        limits = limits or self._config.limits
        chosen_mode = mode or self._config.mode
        events = [
            SandboxEvent("create", self.name, {"mode": chosen_mode, "limits": limits.record()})
        ]
        scratch = Path(tempfile.mkdtemp(prefix="ioh-job-"))
        run_env = command_env(scratch, env)
        try:
            outcome = await _run_in_job(argv, workdir, run_env, limits, stdin)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        events += ended_events(self.name, argv, outcome.duration, outcome.cap_hit)
        return SandboxOutcome(
            backend=self.name,
            argv=tuple(argv),
            exit_code=outcome.exit_code,
            signal=None,
            cap_hit=outcome.cap_hit,
            stdout=outcome.stdout,
            stderr=outcome.stderr,
            truncated=outcome.truncated,
            duration=outcome.duration,
            spawn_error=outcome.spawn_error,
            events=tuple(events),
        )


@dataclass(frozen=True, slots=True)
class _Ran:
    """What the job runner saw, before the sandbox adds its name and events."""

    exit_code: int | None
    cap_hit: Cap | None
    stdout: str
    stderr: str
    truncated: bool
    duration: float
    spawn_error: str | None


class _Output:
    """Both streams' kept text, and whether together they passed the cap."""

    def __init__(self, cap: int) -> None:
        self._cap = cap
        self._seen = 0
        self._lock = threading.Lock()
        self.over = threading.Event()
        self.stdout = _CappedBuffer(max(cap // 2, 2))
        self.stderr = _CappedBuffer(max(cap // 2, 2))

    def drain(self, stream: IO[bytes], sink: _CappedBuffer) -> None:
        try:
            while chunk := os.read(stream.fileno(), 65536):
                sink.feed(chunk)
                with self._lock:
                    self._seen += len(chunk)
                    if self._seen > self._cap:
                        self.over.set()
        finally:
            stream.close()


if sys.platform == "win32":
    from ctypes import wintypes

    _kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)
    _ntdll = ctypes.WinDLL("ntdll")
    _HANDLE = wintypes.HANDLE
    _kernel32.CreateJobObjectW.argtypes = (ctypes.c_void_p, wintypes.LPCWSTR)
    _kernel32.CreateJobObjectW.restype = _HANDLE
    _kernel32.SetInformationJobObject.argtypes = (
        _HANDLE,
        ctypes.c_int,
        ctypes.c_void_p,
        wintypes.DWORD,
    )
    _kernel32.QueryInformationJobObject.argtypes = (
        _HANDLE,
        ctypes.c_int,
        ctypes.c_void_p,
        wintypes.DWORD,
        ctypes.POINTER(wintypes.DWORD),
    )
    _kernel32.AssignProcessToJobObject.argtypes = (_HANDLE, _HANDLE)
    _kernel32.TerminateJobObject.argtypes = (_HANDLE, wintypes.UINT)
    _kernel32.CreateIoCompletionPort.argtypes = (_HANDLE, _HANDLE, ctypes.c_size_t, wintypes.DWORD)
    _kernel32.CreateIoCompletionPort.restype = _HANDLE
    _kernel32.GetQueuedCompletionStatus.argtypes = (
        _HANDLE,
        ctypes.POINTER(wintypes.DWORD),
        ctypes.POINTER(ctypes.c_size_t),
        ctypes.POINTER(ctypes.c_void_p),
        wintypes.DWORD,
    )
    _kernel32.OpenProcess.argtypes = (wintypes.DWORD, wintypes.BOOL, wintypes.DWORD)
    _kernel32.OpenProcess.restype = _HANDLE
    _kernel32.CloseHandle.argtypes = (_HANDLE,)
    _ntdll.NtResumeProcess.argtypes = (_HANDLE,)
    _ntdll.NtResumeProcess.restype = ctypes.c_long

    _ACCOUNTING, _LIMITS, _PORT = 1, 9, 7  # JOBOBJECTINFOCLASS values
    _CREATE_SUSPENDED = 0x00000004
    _PROCESS_RIGHTS = 0x0001 | 0x0100 | 0x0800 | 0x00100000  # terminate, quota, resume, sync
    _INVALID_HANDLE = ctypes.c_void_p(-1).value
    _KILLED = 1  # the exit status TerminateJobObject gives what it kills
    _POLL_MS = 100

    def _check(ok: object, what: str) -> None:
        if not ok:
            raise OSError(ctypes.get_last_error(), f"{what} failed")

    class _Job:
        """One job and its completion port; terminate and close are safe from any thread."""

        def __init__(self, limits: SandboxLimits) -> None:
            self._lock = threading.Lock()
            self.handle = _kernel32.CreateJobObjectW(None, None)
            _check(self.handle, "CreateJobObjectW")
            self.port = _kernel32.CreateIoCompletionPort(_INVALID_HANDLE, None, 0, 1)
            if not self.port:
                _kernel32.CloseHandle(self.handle)
                _check(False, "CreateIoCompletionPort")
            try:
                port = _CompletionPort(self.handle, self.port)
                ok = _kernel32.SetInformationJobObject(
                    self.handle, _PORT, ctypes.byref(port), ctypes.sizeof(port)
                )
                _check(ok, "SetInformationJobObject(port)")
                info = extended_limit_information(limits)
                ok = _kernel32.SetInformationJobObject(
                    self.handle, _LIMITS, ctypes.byref(info), ctypes.sizeof(info)
                )
                _check(ok, "SetInformationJobObject(limits)")
            except OSError:
                self.close()
                raise

        def assign(self, pid: int) -> None:
            # The process was created suspended: it runs only once it is in the job.
            process = _kernel32.OpenProcess(_PROCESS_RIGHTS, False, pid)
            _check(process, "OpenProcess")
            try:
                _check(_kernel32.AssignProcessToJobObject(self.handle, process), "AssignProcess")
                if _ntdll.NtResumeProcess(process) < 0:
                    raise OSError(0, "NtResumeProcess failed")
            finally:
                _kernel32.CloseHandle(process)

        def terminate(self) -> None:
            with self._lock:
                if self.handle:
                    _kernel32.TerminateJobObject(self.handle, _KILLED)

        def message(self, timeout_ms: int) -> int | None:
            code, key, overlapped = wintypes.DWORD(), ctypes.c_size_t(), ctypes.c_void_p()
            ok = _kernel32.GetQueuedCompletionStatus(
                self.port,
                ctypes.byref(code),
                ctypes.byref(key),
                ctypes.byref(overlapped),
                timeout_ms,
            )
            return int(code.value) if ok else None

        def accounting(self) -> _Accounting:
            info = _Accounting()
            ok = _kernel32.QueryInformationJobObject(
                self.handle, _ACCOUNTING, ctypes.byref(info), ctypes.sizeof(info), None
            )
            _check(ok, "QueryInformationJobObject")
            return info

        def close(self) -> None:
            # Closing the job kills whatever is left in it (KILL_ON_JOB_CLOSE).
            with self._lock:
                for handle in (self.handle, self.port):
                    if handle:
                        _kernel32.CloseHandle(handle)
                self.handle = self.port = None

    def _watch(job: _Job, output: _Output, deadline: float) -> tuple[Cap | None, list[int]]:
        """Wait for the job to empty; kill it at the wall clock, output cap or a limit message."""
        cap: Cap | None = None
        messages: list[int] = []
        while True:
            if cap is None and output.over.is_set():
                cap = "output"
                job.terminate()
            if cap is None and time.monotonic() >= deadline:
                cap = "wall"
                job.terminate()
            message = job.message(_POLL_MS)
            if message == JOB_OBJECT_MSG_ACTIVE_PROCESS_ZERO:
                return cap, messages
            if message is not None:
                messages.append(message)
                if message in _MESSAGE_CAPS:
                    job.terminate()  # memory and process limits refuse; they do not kill
            elif job.accounting().ActiveProcesses == 0:
                return cap, messages  # the port may drop messages; the count does not

    async def _run_in_job(
        argv: Sequence[str],
        workdir: Path,
        env: Mapping[str, str],
        limits: SandboxLimits,
        stdin: bytes | None,
    ) -> _Ran:
        started = time.monotonic()
        job = _Job(limits)
        try:
            # Spawning is quick; every wait that follows runs on a thread.
            proc = subprocess.Popen(  # noqa: ASYNC220
                list(argv),
                cwd=workdir,
                env=dict(env),
                stdin=subprocess.DEVNULL if stdin is None else subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                creationflags=_CREATE_SUSPENDED
                | subprocess.CREATE_NEW_PROCESS_GROUP
                | subprocess.CREATE_NO_WINDOW,
            )
        except OSError as exc:
            job.close()
            spawn_error = f"{argv[0]}: {exc.strerror or exc}"
            return _Ran(None, None, "", "", False, time.monotonic() - started, spawn_error)
        try:
            job.assign(proc.pid)
        except OSError as exc:
            proc.kill()  # still suspended, and outside the job
            proc.communicate()
            job.close()
            return _Ran(None, None, "", "", False, time.monotonic() - started, str(exc))
        output = _Output(limits.output_bytes)
        assert proc.stdout is not None and proc.stderr is not None
        drains = [
            threading.Thread(target=output.drain, args=(proc.stdout, output.stdout), daemon=True),
            threading.Thread(target=output.drain, args=(proc.stderr, output.stderr), daemon=True),
        ]
        for drain in drains:
            drain.start()
        if proc.stdin is not None:
            _feed(proc.stdin, stdin or b"")

        def watch() -> tuple[Cap | None, list[int], int]:
            # The watcher alone reads the port and closes the job; others may only terminate it.
            try:
                cap, messages = _watch(job, output, started + limits.wall_seconds)
                return cap, messages, int(job.accounting().TotalUserTime)
            finally:
                job.terminate()
                job.close()

        try:
            runner_cap, messages, user_time = await in_thread(watch)
        finally:
            job.terminate()  # on cancellation too: the watcher sees the job empty, closes it
        code = await in_thread(proc.wait)

        def join_drains() -> None:
            for drain in drains:
                drain.join(2.0)

        await in_thread(join_drains)
        cap = runner_cap or cap_from_job(messages, user_time=user_time, limits=limits)
        stdout, stderr = output.stdout.text(), output.stderr.text()
        truncated = "bytes of output cut here ...]" in stdout + stderr
        return _Ran(code, cap, stdout, stderr, truncated, time.monotonic() - started, None)

else:

    async def _run_in_job(
        argv: Sequence[str],
        workdir: Path,
        env: Mapping[str, str],
        limits: SandboxLimits,
        stdin: bytes | None,
    ) -> _Ran:
        raise SandboxError("Job Objects exist only on Windows")
