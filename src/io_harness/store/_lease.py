"""Writer leases: one process drives a run at a time.

A file store leases a run by holding an exclusive ``flock`` on a small file
beside the database (``runs.db.leases/<hash>.lock``). The kernel drops the
lock when its holder exits, SIGKILL included, so a crashed run can be resumed
at once while a live one cannot be driven twice. The folder and its files are
private and opened from the store's folder descriptor, never through a
symlink (``_files``).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sys
import threading
from collections.abc import Iterator

from io_harness._confined import Folder
from io_harness.errors import ResumeError, StorageError
from io_harness.store._files import (
    Owner,
    open_existing_file,
    open_private_file,
    open_private_folder,
)

__all__ = ["FileLeases", "MemoryLeases"]


def _held(run_id: str) -> ResumeError:
    return ResumeError(
        f"run {run_id!r} is being driven by another writer; wait for it to stop, "
        "or stop it, before resuming"
    )


class FileLeases:
    """Leases as locked files in a folder beside the store (``NAME.leases``).

    ``store_folder`` is the store's folder, which the leases hold open until
    :meth:`close`; what is made in it is given to ``owner``, the database's.
    """

    def __init__(self, store_folder: Folder, name: str, owner: Owner) -> None:
        self._folder: Folder | None = store_folder
        self._name = name
        self._owner = owner
        self._path = store_folder.location / name

    @property
    def _store_folder(self) -> Folder:
        # A closed descriptor's number may name another folder by now: never use it.
        if self._folder is None:
            raise StorageError("the store is closed")
        return self._folder

    def close(self) -> None:
        """Let go of the store's folder; the leases cannot be used afterwards."""
        if self._folder is not None:
            self._folder.close()
            self._folder = None

    @staticmethod
    def _file_name(run_id: str) -> str:
        return hashlib.sha256(run_id.encode("utf-8")).hexdigest()[:32] + ".lock"

    @contextlib.contextmanager
    def hold(self, run_id: str) -> Iterator[None]:
        """Hold the run's lease for the block; refuse if another writer holds it."""
        with open_private_folder(self._store_folder, self._name, self._owner) as leases:
            fd = open_private_file(leases, self._file_name(run_id), os.O_RDWR, self._owner)
        try:
            if not _try_lock(fd):
                raise _held(run_id)
            yield
        finally:
            os.close(fd)  # closing the descriptor releases the lock

    def held(self, run_id: str) -> bool:
        """Whether a writer (any process, this one included) holds the run's lease now."""
        try:
            with open_private_folder(self._store_folder, self._name, None, create=False) as leases:
                fd = open_existing_file(leases, self._file_name(run_id), os.O_RDONLY)
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise StorageError(f"cannot read a lease in {self._path}: {exc.strerror}") from None
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
