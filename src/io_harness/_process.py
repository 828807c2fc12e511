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
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TypeVar

__all__ = ["OUTPUT_CAP_BYTES", "ProcessOutcome", "in_thread", "run_process"]

OUTPUT_CAP_BYTES = 1 << 20
"""Bytes kept per stream: the first and last halves; what lies between is counted."""

_DRAIN_SECONDS = 2.0
T = TypeVar("T")


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


def _drain(stream: IO[bytes], sink: _CappedBuffer) -> None:
    # Owns the stream: a grandchild may hold the pipe open past the call's return.
    try:
        while chunk := os.read(stream.fileno(), 65536):
            sink.feed(chunk)
    finally:
        stream.close()


def _feed(stream: IO[bytes], data: bytes) -> None:
    # Small inputs (a key, a spec) fit the pipe; a child that exits unread is no error.
    with contextlib.suppress(BrokenPipeError, OSError):
        stream.write(data)
    with contextlib.suppress(BrokenPipeError, OSError):
        stream.close()


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


async def in_thread(function: Callable[[], T]) -> T:
    """Run a blocking call on its own thread, so long waits never starve the shared pool."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def target() -> None:
        try:
            result, error = function(), None
        except BaseException as exc:
            result, error = None, exc
        # A caller that was cancelled may have seen its loop closed since.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(_settle, future, result, error)

    threading.Thread(target=target, daemon=True).start()
    return await future


def _settle(future: asyncio.Future[T], result: T | None, exc: BaseException | None) -> None:
    if future.cancelled():
        return
    if exc is not None:
        future.set_exception(exc)
    else:
        future.set_result(result)  # type: ignore[arg-type]


async def run_process(
    argv: Sequence[str],
    *,
    cwd: Path,
    timeout: float,
    env: Mapping[str, str] | None = None,
    output_cap: int = OUTPUT_CAP_BYTES,
    stdin: bytes | None = None,
) -> ProcessOutcome:
    """Run ``argv`` in ``cwd`` and wait at most ``timeout`` seconds.

    The child reads ``stdin`` (then end of input), or nothing. Its stdout and
    stderr are captured, each kept to ``output_cap`` bytes with the cut stated
    in the text. When the call is
    cancelled, the group is killed before the cancellation goes on.
    """
    argv = tuple(argv)
    started = time.monotonic()
    try:
        # Spawning is quick; the waits that follow run on threads, off the event loop.
        proc = subprocess.Popen(  # noqa: ASYNC220
            argv,
            cwd=cwd,
            env=dict(env) if env is not None else None,
            stdin=subprocess.DEVNULL if stdin is None else subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
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
    assert proc.stdout is not None and proc.stderr is not None
    drains = [
        threading.Thread(target=_drain, args=(proc.stdout, out), daemon=True),
        threading.Thread(target=_drain, args=(proc.stderr, err), daemon=True),
    ]
    for drain in drains:
        drain.start()
    if proc.stdin is not None:
        _feed(proc.stdin, stdin or b"")
    timed_out = False
    try:
        await in_thread(lambda: proc.wait(max(timeout, 0.0)))
    except subprocess.TimeoutExpired:
        timed_out = True
    finally:
        # The group outlives its leader when the leader leaves children behind;
        # killing it also closes the pipes those children hold.
        _kill_group(proc.pid)
        proc.wait()
    deadline = time.monotonic() + _DRAIN_SECONDS

    def join_drains() -> None:
        for drain in drains:
            drain.join(max(0.0, deadline - time.monotonic()))

    await in_thread(join_drains)
    code = proc.returncode
    return ProcessOutcome(
        argv=argv,
        exit_code=code if code >= 0 else None,
        signal=-code if code < 0 else None,
        timed_out=timed_out,
        stdout=out.text(),
        stderr=err.text(),
        duration=time.monotonic() - started,
    )
