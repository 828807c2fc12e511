"""The supervision of one launched command: its output kept, its caps watched, how it ended.

:class:`Watch` is the one thread that waits on the command's pidfd and both
pipes at once, kills the whole tree at the first cap it reaches (the wall
clock, the output, the disk, the cgroups' memory and processes) and, once
the tree has ended, reads what the cgroups counted. :meth:`Watch.outcome`
then says how the command ended: its status (a wrapper's 128 + N read as
signal N), the cap that ended it (the rlimits' signals among them), its
output, and the events that close its trace.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from typing import IO, Any

from io_harness._process import OUTPUT_CAP_BYTES, CappedOutput, Stream
from io_harness.sandbox._cgroups import CommandCgroups
from io_harness.sandbox._command import Command, Wrapping
from io_harness.sandbox._disk import DiskMeter
from io_harness.sandbox._launch import LAUNCH_FAILED, MARK
from io_harness.sandbox._types import (
    Cap,
    SandboxEvent,
    SandboxLimits,
    SandboxOutcome,
    ended_events,
)

__all__ = ["Watch", "disk_meter", "kill_tree"]

_POLL_SECONDS = 0.05
_DRAIN_SECONDS = 2.0


class Watch:
    """Watches one command for its caps and kills the whole tree at the first."""

    def __init__(
        self, cgroups: CommandCgroups | None, limits: SandboxLimits, started: float
    ) -> None:
        self.cgroups, self.limits, self.started = cgroups, limits, started
        self.deadline = started + limits.wall_seconds
        self.output = CappedOutput(
            min(limits.output_bytes, OUTPUT_CAP_BYTES),
            limit=limits.output_bytes,
            on_limit=lambda: self.hit("output"),
        )
        """The command's stdout and stderr; past the output cap, the tree is killed."""
        self.proc: subprocess.Popen[bytes] | None = None
        self.disk: DiskMeter | None = None
        self.first_cap: list[Cap] = []
        self.cpu_spent_ns = 0
        self._lock = threading.Lock()

    def hit(self, cap: Cap) -> None:
        """Record ``cap`` unless one came first, and kill the tree."""
        with self._lock:
            if not self.first_cap:
                self.first_cap.append(cap)
        if self.proc is not None:
            kill_tree(self.proc.pid, self.cgroups)

    def supervise(self) -> None:
        """Until the tree has ended: keep its output, watch its caps, kill at the first.

        One thread waits on the leader's pidfd and both pipes at once, so an exit
        is seen at once. After the leader ends, the rest of the tree is killed
        (survivors would hold the pipes open) and the pipes are read to the end.
        """
        proc = self.proc
        assert proc is not None and proc.stdout is not None and proc.stderr is not None
        pipes: tuple[tuple[IO[bytes], Stream], ...] = (
            (proc.stdout, "stdout"),
            (proc.stderr, "stderr"),
        )
        with selectors.DefaultSelector() as selector:
            for pipe, name in pipes:
                os.set_blocking(pipe.fileno(), False)
                selector.register(pipe, selectors.EVENT_READ, name)
            exit_seen = _exit_watch(proc.pid)
            if exit_seen is not None:
                selector.register(exit_seen, selectors.EVENT_READ, None)
            self._read_until_drained(proc, selector, exit_seen)
            if exit_seen is not None:
                os.close(exit_seen)
        proc.stdout.close()
        proc.stderr.close()
        self._count_after_the_end()

    def _read_until_drained(
        self,
        proc: subprocess.Popen[bytes],
        selector: selectors.BaseSelector,
        exit_seen: int | None,
    ) -> None:
        """Read the pipes and check the caps while the leader lives; once it has ended, kill
        the rest of the tree and read what is left, for at most the drain's seconds."""
        drain_deadline: float | None = None
        while selector.get_map():
            for key, _ in selector.select(_POLL_SECONDS):
                if key.data is None or not _read_into(key.fileobj, self.output, key.data):
                    selector.unregister(key.fileobj)
            if drain_deadline is None:
                if proc.poll() is None:
                    self._check_caps()
                    continue
                kill_tree(proc.pid, self.cgroups)
                drain_deadline = time.monotonic() + _DRAIN_SECONDS
                if exit_seen is not None and exit_seen in selector.get_map():
                    selector.unregister(exit_seen)
            elif time.monotonic() > drain_deadline:
                break

    def _count_after_the_end(self) -> None:
        """What the cgroups and the disk meter saw, once the tree has ended."""
        if self.cgroups is not None:
            # Read the counters before the groups go: an OOM kill shows only there.
            if not self.first_cap and (cap := self.cgroups.cap_hit()) is not None:
                self.first_cap.append(cap)
            self.cpu_spent_ns = self.cgroups.cpu_used_ns()
            self.cgroups.release()
        # What was written since the last look: a command can end within one.
        if self.disk is not None and not self.first_cap and self.disk.finish():
            self.first_cap.append("disk")

    def _check_caps(self) -> None:
        if time.monotonic() >= self.deadline:
            self.hit("wall")
        elif self.cgroups is not None and (cap := self.cgroups.cap_hit()) is not None:
            self.hit(cap)
        elif self.disk is not None and self.disk.look():
            self.hit("disk")

    def outcome(
        self, backend: str, command: Command, wrapping: Wrapping, events: list[SandboxEvent]
    ) -> SandboxOutcome:
        """The outcome of a command whose whole tree has ended; its closing events are
        appended to ``events``."""
        assert self.proc is not None
        status = _Status.of(self.proc.returncode, wrapping)
        cap = self.first_cap[0] if self.first_cap else self._cap_after(status.signal)
        duration = time.monotonic() - self.started
        stderr = self.output.text("stderr")
        spawn_error = None
        if status.exit_code == LAUNCH_FAILED and MARK in stderr:
            spawn_error = stderr.split(MARK, 1)[1].strip().splitlines()[0]
        written = self.disk.written if self.disk is not None and cap == "disk" else None
        detail = {"written_bytes": written} if cap == "disk" else {}
        events += ended_events(backend, command.argv, duration, cap, detail)
        return SandboxOutcome(
            backend=backend,
            argv=command.argv,
            exit_code=status.exit_code,
            signal=status.signal,
            cap_hit=cap,
            stdout=self.output.text("stdout"),
            stderr=stderr,
            # Killed at the output cap, the command's output ends early even if none was cut.
            truncated=self.output.truncated or cap == "output",
            duration=duration,
            spawn_error=spawn_error,
            events=tuple(events),
            written_bytes=written,
        )

    def _cap_after(self, killed_by: int | None) -> Cap | None:
        """The cap that ended a command the supervisor did not kill itself."""
        if killed_by == signal.SIGXCPU:
            return "cpu"
        if killed_by == signal.SIGXFSZ:
            return "file_size"
        # The hard CPU rlimit (the cap + 1 s) kills with SIGKILL.
        if killed_by == signal.SIGKILL and self.cpu_spent_ns >= self.limits.cpu_seconds * 1e9:
            return "cpu"
        return None


@dataclass(frozen=True, slots=True)
class _Status:
    exit_code: int | None
    signal: int | None

    @classmethod
    def of(cls, returncode: int, wrapping: Wrapping) -> _Status:
        if returncode < 0:
            return cls(None, -returncode)
        if wrapping.signal_in_status and returncode > 128:
            return cls(None, returncode - 128)
        return cls(returncode, None)


def disk_meter(command: Command, limits: SandboxLimits) -> DiskMeter | None:
    """The meter of the disk cap over every folder ``command`` may write (the workdir even
    when read-only: the floor confines no write); ``None`` without a cap."""
    if limits.disk_bytes is None:
        return None
    folders = [command.workdir, command.scratch, *command.writable]
    return DiskMeter(folders, limits.disk_bytes, stamp_in=command.scratch)


def kill_tree(pid: int, cgroups: CommandCgroups | None) -> None:
    """Kill ``pid``'s process group, and everything in ``cgroups``."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    if cgroups is not None:
        cgroups.kill()


def _exit_watch(pid: int) -> int | None:
    """A descriptor that becomes readable when ``pid`` exits (Linux), else ``None``."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None  # the poll interval then bounds how late an exit is seen


def _read_into(pipe: Any, output: CappedOutput, stream: Stream) -> bool:
    """Move what ``pipe`` holds into ``output``'s ``stream``; ``False`` at its end."""
    try:
        chunk = os.read(pipe.fileno(), 65536)
    except BlockingIOError:
        return True
    except OSError:
        return False
    if not chunk:
        return False
    output.feed(stream, chunk)
    return True
