"""Running one command as a child process group, bounded in time and output.

Every command the harness itself runs (criterion commands, the pytest runner)
comes through :func:`run_process`. It never uses a shell, starts the child in
a new session so the whole group can be killed, and kills that group at the
timeout and again after the leader exits, so that background children do not
outlive the call. The OS sandbox wraps this seam in a later layer.

:class:`CappedOutput` is the one keeper of a command's output, here and in
every sandbox backend: the head and tail of each stream, and the count of
what it cut.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Literal, TypeVar

__all__ = [
    "OUTPUT_CAP_BYTES",
    "CappedOutput",
    "ProcessOutcome",
    "Stream",
    "feed_stdin",
    "in_thread",
    "run_process",
]

OUTPUT_CAP_BYTES = 1 << 20
"""Bytes kept per stream: the first and last halves; what lies between is counted."""

_DRAIN_SECONDS = 2.0
T = TypeVar("T")

Stream = Literal["stdout", "stderr"]
"""One of a command's two output streams."""


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
    truncated: bool
    """Output was cut between its head and tail (the text marks where)."""
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


class CappedOutput:
    """A command's stdout and stderr, each kept to its head and tail, the rest counted.

    Each stream keeps its first and last ``keep // 2`` bytes; the bytes between
    are dropped and counted, and :meth:`text` marks where and how many. Whether
    output was cut is that count (:attr:`truncated`), never a search of the text,
    which a command may fill with the marker itself. With ``limit``, both streams
    together are measured against it: past it :attr:`over_limit` is true and
    ``on_limit`` is called at every feed (the sandboxes kill the command there).
    Each stream may be fed from its own thread.
    """

    def __init__(
        self, keep: int, *, limit: int | None = None, on_limit: Callable[[], None] | None = None
    ) -> None:
        self._half = keep // 2
        self._head: dict[Stream, bytearray] = {"stdout": bytearray(), "stderr": bytearray()}
        self._tail: dict[Stream, bytearray] = {"stdout": bytearray(), "stderr": bytearray()}
        self._dropped: dict[Stream, int] = {"stdout": 0, "stderr": 0}
        self._seen = 0
        self._limit, self._on_limit = limit, on_limit
        self._lock = threading.Lock()

    @property
    def dropped(self) -> int:
        """Bytes cut from the middle of both streams."""
        with self._lock:
            return sum(self._dropped.values())

    @property
    def truncated(self) -> bool:
        """Some output was cut: the kept text is not all the command wrote."""
        return self.dropped > 0

    @property
    def over_limit(self) -> bool:
        """Both streams together have passed ``limit``."""
        with self._lock:
            return self._limit is not None and self._seen > self._limit

    def feed(self, stream: Stream, chunk: bytes) -> None:
        """Keep what fits of ``chunk`` in ``stream``'s head, the rest in its tail."""
        with self._lock:
            self._seen += len(chunk)
            over = self._limit is not None and self._seen > self._limit
            head, tail = self._head[stream], self._tail[stream]
            room = self._half - len(head)
            if room > 0:
                head += chunk[:room]
                chunk = chunk[room:]
            tail += chunk
            excess = len(tail) - self._half
            if excess > 0:
                del tail[:excess]
                self._dropped[stream] += excess
        # Outside the lock: the callback kills, and may take its own locks.
        if over and self._on_limit is not None:
            self._on_limit()

    def drain(self, stream: Stream, pipe: IO[bytes]) -> None:
        """Feed ``stream`` from ``pipe`` until its end, then close the pipe."""
        # Owns the pipe: a grandchild may hold it open past the call's return.
        try:
            while chunk := os.read(pipe.fileno(), 65536):
                self.feed(stream, chunk)
        finally:
            pipe.close()

    def drain_from(self, proc: subprocess.Popen[bytes]) -> list[threading.Thread]:
        """Start one thread a stream reading ``proc``'s stdout and stderr into this capper."""
        assert proc.stdout is not None and proc.stderr is not None
        drains = [
            threading.Thread(target=self.drain, args=("stdout", proc.stdout), daemon=True),
            threading.Thread(target=self.drain, args=("stderr", proc.stderr), daemon=True),
        ]
        for drain in drains:
            drain.start()
        return drains

    def text(self, stream: Stream) -> str:
        """What ``stream`` kept, as text, the cut marked with the count of bytes it dropped."""
        with self._lock:
            head = self._head[stream].decode("utf-8", "replace")
            tail = self._tail[stream].decode("utf-8", "replace")
            dropped = self._dropped[stream]
        if dropped:
            return f"{head}\n[... {dropped} bytes of output cut here ...]\n{tail}"
        return head + tail


def feed_stdin(stream: IO[bytes], data: bytes) -> None:
    """Write ``data`` to a child's stdin, then close it: the child reads its end of input."""
    # Small inputs (a key, a spec) fit the pipe; a child that exits unread is no error.
    with contextlib.suppress(BrokenPipeError, OSError):
        stream.write(data)
    with contextlib.suppress(BrokenPipeError, OSError):
        stream.close()


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    if sys.platform == "win32":
        # Windows has no process group to signal (start_new_session does nothing there).
        proc.kill()
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


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
    stderr are captured, each kept to ``output_cap`` bytes (its head and tail)
    with the cut marked in the text and stated in ``truncated``. When the call
    is cancelled, the group is killed before the cancellation goes on.
    """
    argv = tuple(argv)
    started = time.monotonic()
    try:
        proc = _start(argv, cwd, env, stdin)
    except OSError as exc:
        return ProcessOutcome(
            argv=argv,
            exit_code=None,
            signal=None,
            timed_out=False,
            stdout="",
            stderr="",
            truncated=False,
            duration=time.monotonic() - started,
            spawn_error=f"{argv[0]}: {exc.strerror or exc}",
        )
    output = CappedOutput(output_cap)
    drains = output.drain_from(proc)
    if proc.stdin is not None:
        feed_stdin(proc.stdin, stdin or b"")
    timed_out = await _wait_then_kill_group(proc, timeout)
    await _join_drains(drains, time.monotonic() + _DRAIN_SECONDS)
    code = proc.returncode
    return ProcessOutcome(
        argv=argv,
        exit_code=code if code >= 0 else None,
        signal=-code if code < 0 else None,
        timed_out=timed_out,
        stdout=output.text("stdout"),
        stderr=output.text("stderr"),
        truncated=output.truncated,
        duration=time.monotonic() - started,
    )


def _start(
    argv: tuple[str, ...], cwd: Path, env: Mapping[str, str] | None, stdin: bytes | None
) -> subprocess.Popen[bytes]:
    """Start ``argv`` in a new session, its output piped, its stdin piped only when given."""
    # Spawning is quick; the waits that follow run on threads, off the event loop.
    return subprocess.Popen(
        argv,
        cwd=cwd,
        env=dict(env) if env is not None else None,
        stdin=subprocess.DEVNULL if stdin is None else subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )


async def _wait_then_kill_group(proc: subprocess.Popen[bytes], timeout: float) -> bool:
    """Wait at most ``timeout`` seconds for ``proc`` to exit, then kill its whole group (on
    cancellation too); whether the timeout ended the wait."""
    try:
        await in_thread(lambda: proc.wait(max(timeout, 0.0)))
    except subprocess.TimeoutExpired:
        return True
    finally:
        # The group outlives its leader when the leader leaves children behind;
        # killing it also closes the pipes those children hold.
        _kill_group(proc)
        proc.wait()
    return False


async def _join_drains(drains: Sequence[threading.Thread], deadline: float) -> None:
    """Wait for the threads that read the output, until ``deadline`` at most."""

    def join_drains() -> None:
        for drain in drains:
            drain.join(max(0.0, deadline - time.monotonic()))

    await in_thread(join_drains)
