"""The Windows Job Object through ctypes: its structures, the kernel32 calls, the runner.

:class:`~io_harness.sandbox._jobobject.JobObjectSandbox` runs each command
through :func:`run_in_job`. The structures are plain ctypes and load anywhere
(their layout is tested on every platform); the kernel32 and ntdll calls sit
under ``sys.platform == "win32"`` so that ``mypy --platform win32`` checks them
(``make typecheck`` does) although they run only on Windows.
"""

from __future__ import annotations

import ctypes
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from io_harness._process import OUTPUT_CAP_BYTES, CappedOutput, feed_stdin, in_thread
from io_harness.errors import SandboxError
from io_harness.sandbox._jobobject import (
    JOB_OBJECT_MSG_ACTIVE_PROCESS_ZERO,
    MESSAGE_CAPS,
    cap_from_job,
    job_limits,
)
from io_harness.sandbox._types import Cap, SandboxLimits

__all__ = ["ExtendedLimitInformation", "JobRun", "extended_limit_information", "run_in_job"]


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


@dataclass(frozen=True, slots=True)
class JobRun:
    """What the job runner saw, before the sandbox adds its name and events."""

    exit_code: int | None
    cap_hit: Cap | None
    stdout: str
    stderr: str
    truncated: bool
    duration: float
    spawn_error: str | None


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
            # HANDLE results come back from ctypes as an int, or None for NULL.
            self.handle: int | None = _kernel32.CreateJobObjectW(None, None)
            _check(self.handle, "CreateJobObjectW")
            self.port: int | None = _kernel32.CreateIoCompletionPort(_INVALID_HANDLE, None, 0, 1)
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
            process: int | None = _kernel32.OpenProcess(_PROCESS_RIGHTS, False, pid)
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
            """The next message the job posted, waiting at most ``timeout_ms``; else ``None``."""
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

    def _watch(job: _Job, output: CappedOutput, deadline: float) -> tuple[Cap | None, list[int]]:
        """Wait for the job to empty; kill it at the wall clock, output cap or a limit message."""
        cap: Cap | None = None
        messages: list[int] = []
        while True:
            if cap is None and output.over_limit:
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
                if message in MESSAGE_CAPS:
                    job.terminate()  # memory and process limits refuse; they do not kill
            elif job.accounting().ActiveProcesses == 0:
                return cap, messages  # the port may drop messages; the count does not

    async def run_in_job(
        argv: Sequence[str],
        workdir: Path,
        env: Mapping[str, str],
        limits: SandboxLimits,
        stdin: bytes | None,
    ) -> JobRun:
        """Run ``argv`` in a new job under ``limits``; what it did, or why it did not start."""
        started = time.monotonic()
        job = _Job(limits)
        proc = _start_in_job(job, argv, workdir, env, stdin)
        if isinstance(proc, str):
            return JobRun(None, None, "", "", False, time.monotonic() - started, proc)
        output = CappedOutput(min(limits.output_bytes, OUTPUT_CAP_BYTES), limit=limits.output_bytes)
        drains = output.drain_from(proc)
        if proc.stdin is not None:
            feed_stdin(proc.stdin, stdin or b"")
        try:
            runner_cap, messages, user_time = await in_thread(
                lambda: _watch_then_close(job, output, started + limits.wall_seconds)
            )
        finally:
            job.terminate()  # on cancellation too: the watcher sees the job empty, closes it
        code = await in_thread(proc.wait)

        def join_drains() -> None:
            for drain in drains:
                drain.join(2.0)

        await in_thread(join_drains)
        cap = runner_cap or cap_from_job(messages, user_time=user_time, limits=limits)
        stdout, stderr = output.text("stdout"), output.text("stderr")
        # Killed at the output cap, the command's output ends early even if none was cut.
        truncated = output.truncated or cap == "output"
        return JobRun(code, cap, stdout, stderr, truncated, time.monotonic() - started, None)

    def _start_in_job(
        job: _Job,
        argv: Sequence[str],
        workdir: Path,
        env: Mapping[str, str],
        stdin: bytes | None,
    ) -> subprocess.Popen[bytes] | str:
        """``argv`` started suspended, put in ``job``, then resumed; or why it could not be
        (the job closed then)."""
        try:
            # Spawning is quick; every wait that follows runs on a thread.
            proc = subprocess.Popen(
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
            return f"{argv[0]}: {exc.strerror or exc}"
        try:
            job.assign(proc.pid)
        except OSError as exc:
            proc.kill()  # still suspended, and outside the job
            proc.communicate()
            job.close()
            return str(exc)
        return proc

    def _watch_then_close(
        job: _Job, output: CappedOutput, deadline: float
    ) -> tuple[Cap | None, list[int], int]:
        """:func:`_watch`, then the job's user time; the job is terminated and closed after."""
        # The watcher alone reads the port and closes the job; others may only terminate it.
        try:
            cap, messages = _watch(job, output, deadline)
            return cap, messages, int(job.accounting().TotalUserTime)
        finally:
            job.terminate()
            job.close()

else:

    async def run_in_job(
        argv: Sequence[str],
        workdir: Path,
        env: Mapping[str, str],
        limits: SandboxLimits,
        stdin: bytes | None,
    ) -> JobRun:
        """Refuse: there are no Job Objects off Windows."""
        raise SandboxError("Job Objects exist only on Windows")
