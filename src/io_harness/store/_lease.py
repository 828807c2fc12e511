"""Writer leases: one process drives a run at a time.

A file store leases a run by holding an exclusive ``flock`` on a small file
beside the database (``runs.db.leases/<hash>.lock``). The kernel drops the
lock when its holder exits, SIGKILL included, so a crashed run can be resumed
at once while a live one cannot be driven twice.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

from io_harness.errors import ResumeError

__all__ = ["FileLeases", "MemoryLeases"]


def _held(run_id: str) -> ResumeError:
    return ResumeError(
        f"run {run_id!r} is being driven by another writer; wait for it to stop, "
        "or stop it, before resuming"
    )


class FileLeases:
    """Leases as locked files in a folder beside the store."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def _path(self, run_id: str) -> Path:
        return self.folder / (hashlib.sha256(run_id.encode("utf-8")).hexdigest()[:32] + ".lock")

    @contextlib.contextmanager
    def hold(self, run_id: str) -> Iterator[None]:
        """Hold the run's lease for the block; refuse if another writer holds it."""
        self.folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(self._path(run_id), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if not _try_lock(fd):
                raise _held(run_id)
            yield
        finally:
            os.close(fd)  # closing the descriptor releases the lock

    def held(self, run_id: str) -> bool:
        """Whether a writer (any process, this one included) holds the run's lease now."""
        try:
            fd = os.open(self._path(run_id), os.O_RDWR)
        except FileNotFoundError:
            return False
        try:
            return not _try_lock(fd)
        finally:
            os.close(fd)


def _try_lock(fd: int) -> bool:
    if sys.platform == "win32":  # pragma: no cover - exercised on Windows only
        import msvcrt

        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True
    import fcntl

    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


class MemoryLeases:
    """Leases of an in-memory store: only this process can reach it."""

    def __init__(self) -> None:
        self._held: set[str] = set()
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def hold(self, run_id: str) -> Iterator[None]:
        """Hold the run's lease for the block; refuse if it is held already."""
        with self._lock:
            if run_id in self._held:
                raise _held(run_id)
            self._held.add(run_id)
        try:
            yield
        finally:
            with self._lock:
                self._held.discard(run_id)

    def held(self, run_id: str) -> bool:
        """Whether the run's lease is held now."""
        with self._lock:
            return run_id in self._held
