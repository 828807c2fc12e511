"""Temporary folders that a killed process cannot leave behind for good.

Each folder's name carries the pid of the process that made it
(``ioh-record-4242-x1y2z3``); making one first removes the folders of its
kind whose process is gone, so a harness killed mid-check (SIGKILL skips
every cleanup) costs disk space only until the next check.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

__all__ = ["scratch_folder", "sweep"]


@contextlib.contextmanager
def scratch_folder(kind: str) -> Iterator[str]:
    """A new folder ``ioh-KIND-PID-…`` for the block, removed after it; stale ones go first."""
    sweep(kind)
    folder = tempfile.mkdtemp(prefix=f"ioh-{kind}-{os.getpid()}-")
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def sweep(kind: str, parent: Path | None = None) -> list[Path]:
    """Remove the folders of ``kind`` whose making process no longer runs; those removed."""
    parent = parent or Path(tempfile.gettempdir())
    pattern = re.compile(rf"ioh-{re.escape(kind)}-(\d+)-")
    removed: list[Path] = []
    try:
        entries = list(parent.iterdir())
    except OSError:
        return removed
    for entry in entries:
        found = pattern.match(entry.name)
        if found and not _alive(int(found.group(1))) and entry.is_dir():
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive, and not ours to judge
        return True
    return True
