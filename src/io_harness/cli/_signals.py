"""How ``ioh`` stops when told to: Ctrl-C (SIGINT) or SIGTERM, wherever either lands.

While a run is driven, either signal cancels the run's task, so the
harness's own clean-up runs (its commands killed, its lease released) and
the run keeps its last committed step; then ``ioh`` says how to resume it
and exits with 128 + the signal's number. Nothing waits on a thread that
reads the terminal: the approval prompt reads it through a
:class:`TerminalInput`, which the interrupt wakes. A second signal while the
clean-up runs gives up on it.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import select
import signal
import sys
import threading
from collections.abc import Callable, Coroutine, Iterator
from types import FrameType
from typing import TYPE_CHECKING, Any, TypeVar

from io_harness.cli._words import RunInterrupted

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

__all__ = ["INTERRUPTS", "TerminalInput", "run_to_end", "sigterm_interrupts"]

T = TypeVar("T")

INTERRUPTS = (signal.SIGINT, signal.SIGTERM)
"""The signals that stop a run ``ioh`` drives, keeping its committed steps."""

_Handler = Callable[[int, FrameType | None], Any] | int | signal.Handlers | None


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


@contextlib.contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """For the block, SIGTERM interrupts as Ctrl-C does (a :class:`RunInterrupted` naming
    it) instead of ending the process where it stands, unheard."""
    if not _in_main_thread():  # only the main thread may set handlers, or get signals
        yield
        return

    def interrupt(signum: int, _frame: FrameType | None) -> None:
        raise RunInterrupted(None, signum)

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:  # None: the handler was not set from Python; the default stands for it
        signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)


def run_to_end(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)``, stopped by SIGINT or SIGTERM with a :class:`RunInterrupted`.

    The first signal cancels ``main`` and waits for it to unwind; a second one
    stops waiting. Once interrupted, nothing waits on the default executor's
    threads (one may be blocked reading the terminal), as ``asyncio.run``
    would.
    """
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    task = loop.create_task(main)
    caught: list[int] = []

    def stop(signum: int) -> None:
        caught.append(signum)
        if len(caught) > 1:  # the clean-up is stuck, or the person will not wait for it
            # The task is left unfinished on purpose: no "Task was destroyed" at exit.
            loop.set_exception_handler(lambda _loop, _context: None)
            raise RunInterrupted(None, caught[0])
        task.cancel()

    previous = _take_signals(loop, stop)
    try:
        try:
            return loop.run_until_complete(task)
        except BaseException as exc:
            if caught and not isinstance(exc, RunInterrupted):
                raise RunInterrupted(None, caught[0]) from None
            raise
        finally:
            if len(caught) < 2:
                _wind_down(loop, wait_for_threads=not caught)
    finally:
        asyncio.set_event_loop(None)
        loop.close()  # removes the loop's signal handlers
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _take_signals(loop: asyncio.AbstractEventLoop, stop: Callable[[int], None]) -> dict[int, Any]:
    """Route :data:`INTERRUPTS` to ``stop``; the handlers they had before, to restore."""
    if not _in_main_thread():
        return {}
    previous: dict[int, Any] = {}
    for signum in INTERRUPTS:
        handler: _Handler = signal.getsignal(signum)
        loop.add_signal_handler(signum, stop, signum)
        if handler is not None:  # None: not set from Python; the loop's close resets it
            previous[signum] = handler
    return previous


def _wind_down(loop: asyncio.AbstractEventLoop, *, wait_for_threads: bool) -> None:
    """What ``asyncio.run`` does after its task: cancel the tasks left, close the async
    generators and, unless told not to, wait for the default executor's threads."""
    left = asyncio.all_tasks(loop)
    for task in left:
        task.cancel()
    if left:
        loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))
    loop.run_until_complete(loop.shutdown_asyncgens())
    if wait_for_threads:
        loop.run_until_complete(loop.shutdown_default_executor())


class _WakeableReader(io.RawIOBase):
    """Reads a file descriptor it does not own; :meth:`wake` makes a read, in progress or
    to come, return end of input instead of waiting on it."""

    def __init__(self, fd: int) -> None:
        super().__init__()
        self._fd = fd
        self._wake_out, self._wake_in = os.pipe()

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: WriteableBuffer) -> int:
        ready, _, _ = select.select([self._fd, self._wake_out], [], [])
        if self._wake_out in ready:
            return 0
        view = memoryview(buffer).cast("B")
        data = os.read(self._fd, len(view))
        view[: len(data)] = data
        return len(data)

    def wake(self) -> None:
        with contextlib.suppress(OSError):
            os.write(self._wake_in, b"\0")

    def close(self) -> None:
        if not self.closed:
            for fd in (self._wake_out, self._wake_in):
                with contextlib.suppress(OSError):
                    os.close(fd)
        super().close()


class TerminalInput:
    """Lines from stdin (the terminal the approval prompt reads) that an interrupt can end.

    A prompt's read runs in a thread; when Ctrl-C or SIGTERM abandons the
    prompt, :meth:`wake` ends that read (as end of input), so the thread
    returns and the process can exit without an Enter from anyone.
    """

    def __init__(self, fd: int) -> None:
        self._raw = _WakeableReader(fd)
        self.stream = io.TextIOWrapper(
            io.BufferedReader(self._raw),
            encoding=getattr(sys.stdin, "encoding", None) or "utf-8",
            errors="replace",
        )
        """What the prompt reads, a line at a time."""

    @classmethod
    def of_stdin(cls) -> TerminalInput | None:
        """One for this process's stdin; ``None`` when it has no file descriptor."""
        try:
            return cls(sys.stdin.fileno())
        except (AttributeError, OSError, ValueError):
            return None

    def wake(self) -> None:
        """End the read in progress, and every later one, with end of input."""
        self._raw.wake()
