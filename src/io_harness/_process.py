"""Running one command as a child process group, bounded in time and output.

Every command the harness itself runs (criterion commands, the pytest runner)
comes through :func:`run_process`. It never uses a shell, starts the child in
a new session so the whole group can be killed, and kills that group at the
timeout and again after the leader exits, so that background children do not
outlive the call. The OS sandbox wraps this seam in a later layer.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["OUTPUT_CAP_BYTES", "ProcessOutcome", "run_process"]

OUTPUT_CAP_BYTES = 1 << 20
"""Bytes kept per stream: the first and last halves; what lies between is counted."""

_DRAIN_SECONDS = 2.0


@dataclass(frozen=True, slots=True)
class ProcessOutcome:
    """What a finished command did."""

    argv: tuple[str, ...]
    exit_code: int | None
    """The exit status, or ``None`` when a signal ended the process."""
    signal: int | None
    timed_out: bool
    stdout: str
    stderr: str
    duration: float
    spawn_error: str | None = None
    """Why the command could not start (not found, not executable), if it could not."""

    @property
    def summary(self) -> str:
        """One line: how the command ended."""
        if self.spawn_error is not None:
            return f"could not start: {self.spawn_error}"
        if self.timed_out:
            return "killed at the timeout"
        if self.signal is not None:
            return f"killed by signal {signal.Signals(self.signal).name}"
        return f"exit status {self.exit_code}"


class _CappedBuffer:
    """Keeps the head and tail of a stream and counts the bytes in between."""

    def __init__(self, cap: int) -> None:
        self._half = cap // 2
        self._head = bytearray()
        self._tail = bytearray()
        self._dropped = 0

    def feed(self, chunk: bytes) -> None:
        room = self._half - len(self._head)
        if room > 0:
            self._head += chunk[:room]
            chunk = chunk[room:]
        if not chunk:
            return
        self._tail += chunk
        excess = len(self._tail) - self._half
        if excess > 0:
            del self._tail[:excess]
            self._dropped += excess

    def text(self) -> str:
        head = self._head.decode("utf-8", "replace")
        tail = self._tail.decode("utf-8", "replace")
        if self._dropped:
            return f"{head}\n[... {self._dropped} bytes of output cut here ...]\n{tail}"
        return head + tail


async def _pump(stream: asyncio.StreamReader | None, sink: _CappedBuffer) -> None:
    if stream is None:
        return
    while chunk := await stream.read(65536):
        sink.feed(chunk)


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


async def run_process(
    argv: Sequence[str],
    *,
    cwd: Path,
    timeout: float,
    env: Mapping[str, str] | None = None,
    output_cap: int = OUTPUT_CAP_BYTES,
) -> ProcessOutcome:
    """Run ``argv`` in ``cwd`` and wait at most ``timeout`` seconds.

    The child gets no stdin. Its stdout and stderr are captured, each kept to
    ``output_cap`` bytes with the cut stated in the text.
    """
    argv = tuple(argv)
    started = time.monotonic()
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            cwd=cwd,
            env=dict(env) if env is not None else None,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as exc:
        return ProcessOutcome(
            argv=argv,
            exit_code=None,
            signal=None,
            timed_out=False,
            stdout="",
            stderr="",
            duration=time.monotonic() - started,
            spawn_error=f"{argv[0]}: {exc.strerror or exc}",
        )
    out, err = _CappedBuffer(output_cap), _CappedBuffer(output_cap)
    pumps = asyncio.gather(_pump(proc.stdout, out), _pump(proc.stderr, err))
    timed_out = False
    try:
        await asyncio.wait_for(proc.wait(), timeout=max(timeout, 0.0))
    except TimeoutError:
        timed_out = True
    finally:
        # The group outlives its leader when the leader leaves children behind;
        # killing it also closes the pipes those children hold.
        _kill_group(proc.pid)
        if proc.returncode is None:
            await proc.wait()
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(pumps, timeout=_DRAIN_SECONDS)
    code = proc.returncode
    return ProcessOutcome(
        argv=argv,
        exit_code=code if code is not None and code >= 0 else None,
        signal=-code if code is not None and code < 0 else None,
        timed_out=timed_out,
        stdout=out.text(),
        stderr=err.text(),
        duration=time.monotonic() - started,
    )
