"""The disk cap: what a command's writes add to the folders it may write, counted as it runs.

:class:`DiskMeter` counts, in each folder a command may write (the workdir,
its scratch folder, extra writable folders), the allocated bytes
(``st_blocks``: a sparse file's holes cost nothing) of every file and folder
whose status changed since the command started, each at the most it was seen
holding: a file the command later deletes or truncates still counts what it
held when the meter saw it, and a file it changes counts whole. A file written
and deleted between two looks is not seen.

The meter walks the folders a slice at a time (a stat costs a few
microseconds), so that a large workdir costs the supervising thread a bounded
share of its time and a small one is walked whole at every look. Each
filesystem's free space (one ``statvfs``) says when the walk is pressing:
whatever the last whole pass missed was written after it began, so once the
space lost since then could put the count past the cap, slices widen, and
after the command ends the last pass may run to its end rather than for one
slice. Space another process frees meanwhile hides as much of the command's
writes from that test.

A tmpfs the wrapper mounts in the command's own mount namespace (bubblewrap's
``/tmp``, sized by the cap) is read whole, through ``/proc/PID/root`` of the
wrapper's first child, and counted at the most it held.
"""

from __future__ import annotations

import math
import os
import shutil
import stat
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["DiskMeter", "PrivateTmpfs", "TmpfsReader"]

_LOOK_INTERVAL = 0.025
"""The least time between two looks while the command runs."""
_SLICE_SECONDS = 0.002
"""The walking one look may do, while the space lost cannot reach the cap."""
_PRESSING_SLICE_SECONDS = 0.01
"""The walking one look may do once the space lost could put the count past the cap."""
_CLOCK_LAG_NS = 50_000_000
"""How far behind the system clock a file's change time may be stamped (filesystems stamp
with a clock read at the last timer tick; on Windows every 15.6 ms)."""
_LAST_PASS_SECONDS = 1.0
"""The longest the pass after the command may take when it is pressing."""


@dataclass(frozen=True, slots=True)
class PrivateTmpfs:
    """A tmpfs of ``size_bytes`` that the wrapper mounts at ``path`` in the command's own
    mount namespace (bubblewrap's ``/tmp``)."""

    path: str
    size_bytes: int


class TmpfsReader:
    """The bytes in use on a :class:`PrivateTmpfs`, read from outside the command's namespace.

    The wrapper (``leader``) forks the namespace's first process, whose
    ``/proc/PID/root`` is the command's root once its mounts are made. A
    filesystem at that path is taken for the tmpfs only when its size is the
    tmpfs's: before the mounts are made, the path is still the host's.
    """

    def __init__(self, tmpfs: PrivateTmpfs, leader: int) -> None:
        self._tmpfs, self._leader = tmpfs, leader
        self._inside: str | None = None

    def used(self) -> int | None:
        """The bytes in use now; ``None`` while the tmpfs cannot be reached."""
        for path in [self._inside] if self._inside else self._candidates():
            try:
                found = os.statvfs(path)
            except OSError:
                continue
            if found.f_blocks == math.ceil(self._tmpfs.size_bytes / found.f_frsize):
                self._inside = path
                return (found.f_blocks - found.f_bfree) * found.f_frsize
        return None

    def _candidates(self) -> list[str]:
        try:
            with open(f"/proc/{self._leader}/task/{self._leader}/children") as listing:
                children = listing.read().split()
        except OSError:
            return []
        return [f"/proc/{child}/root{self._tmpfs.path}" for child in children]


class DiskMeter:
    """Counts a command's writes to ``folders`` (and a private tmpfs) against ``cap`` bytes.

    Made just before the command starts: what changed before then is not the
    command's. The start is read from the clock filesystems stamp changes with,
    as the change time of an empty file made in ``stamp_in`` (the command's own
    folder), so a change within the same clock tick before it counts too; the
    files already in ``stamp_in`` (the harness's, for the launcher) count only
    what they grow by.
    Files on another filesystem mounted inside a folder are not
    walked. A folder the command changed but the meter may not list (its
    permissions) makes the space the filesystems lost stand in for the count
    where that is more.
    """

    def __init__(self, folders: Sequence[Path], cap: int, *, stamp_in: Path) -> None:
        self.cap = cap
        self._since_ns = _filesystem_now(stamp_in)
        self._roots = _outermost(folders)
        self._devices = {root: _device(root) for root in self._roots}
        self._free_at_start = self._free_now()
        self._free_before_pass = self._free_at_start
        """Free space when the last whole pass began: what it missed was written since."""
        self._free_when_this_pass_began = self._free_at_start
        self.tmpfs: TmpfsReader | None = None
        """The private tmpfs counted too, once the wrapper that mounts it has started."""
        self._tmpfs_peak = 0
        self._peaks: dict[tuple[int, int], int] = _sizes_in(stamp_in)
        """The most each file was seen holding; a file already there counts from its size."""
        self._counted = 0
        self._blind = False
        self._pending: list[tuple[str, int, bool]] = []
        """Folders left to list in this pass: path, device, changed since the start."""
        self._entries: list[tuple[os.DirEntry[str], int]] = []
        self._next_look = 0.0

    @property
    def written(self) -> int:
        """The bytes counted so far."""
        counted = self._counted
        if self._blind:
            counted = max(counted, _lost(self._free_at_start, self._free_now()) or 0)
        return counted + self._tmpfs_peak

    @property
    def past_cap(self) -> bool:
        """Whether the command has written more than the cap."""
        return self.written > self.cap

    def look(self) -> bool:
        """One slice of the count, at most every 25 ms; whether it is past the cap now."""
        now = time.monotonic()
        if now < self._next_look:
            return False
        self._next_look = now + _LOOK_INTERVAL
        self._read_tmpfs()
        pressing = self._pressing()
        self._walk(now + (_PRESSING_SLICE_SECONDS if pressing else _SLICE_SECONDS))
        return self.past_cap

    def finish(self) -> bool:
        """After the command: a last pass, for one slice or, where the space lost says it
        may matter, to its end (up to a second); whether the count is past the cap."""
        self._read_tmpfs()
        if not self.past_cap:
            budget = _LAST_PASS_SECONDS if self._pressing() else _SLICE_SECONDS
            self._pending, self._entries = [], []
            self._walk(time.monotonic() + budget)
        return self.past_cap

    def _pressing(self) -> bool:
        """Whether writes not counted yet could put the count past the cap: what the last
        whole pass missed was written since it began, and took free space."""
        lost = _lost(self._free_before_pass, self._free_now())
        return lost is None or self._counted + self._tmpfs_peak + lost > self.cap

    def _free_now(self) -> dict[Path, int | None]:
        return {root: _free(root) for root in self._one_per_device()}

    def _read_tmpfs(self) -> None:
        used = self.tmpfs.used() if self.tmpfs is not None else None
        if used is not None:
            self._tmpfs_peak = max(self._tmpfs_peak, used)

    def _walk(self, deadline: float) -> None:
        """Go on with the pass, or start one, until it ends or ``deadline`` passes."""
        if not self._pending and not self._entries:
            self._pending = [(str(root), self._devices[root], False) for root in self._roots]
            self._free_when_this_pass_began = self._free_now()
        while self._pending or self._entries:
            if time.monotonic() >= deadline:
                return
            if self._entries:
                self._count(*self._entries.pop())
            else:
                self._list(*self._pending.pop())
        self._free_before_pass = self._free_when_this_pass_began

    def _list(self, folder: str, device: int, changed: bool) -> None:
        try:
            with os.scandir(folder) as listing:
                self._entries = [(entry, device) for entry in listing]
        except PermissionError:
            self._blind = self._blind or changed
        except OSError:
            pass  # gone since it was seen

    def _count(self, entry: os.DirEntry[str], device: int) -> None:
        try:
            found = entry.stat(follow_symlinks=False)
        except OSError:
            return
        if found.st_dev != device:
            return  # another filesystem mounted here
        # ctime cannot be set back by the command; on Windows it is the creation time.
        changed = max(found.st_ctime_ns, found.st_mtime_ns) >= self._since_ns
        if stat.S_ISDIR(found.st_mode):
            self._pending.append((entry.path, device, changed))
        if changed:
            key = (found.st_dev, found.st_ino)
            size = _allocated(found)
            before = self._peaks.get(key, 0)
            if size > before:
                self._peaks[key] = size
                self._counted += size - before

    def _one_per_device(self) -> list[Path]:
        first: dict[int, Path] = {}
        for root in self._roots:
            first.setdefault(self._devices[root], root)
        return list(first.values())


def _sizes_in(folder: Path) -> dict[tuple[int, int], int]:
    """The allocated bytes of each entry of ``folder``, by device and inode."""
    sizes: dict[tuple[int, int], int] = {}
    try:
        with os.scandir(folder) as listing:
            for entry in listing:
                found = entry.stat(follow_symlinks=False)
                sizes[(found.st_dev, found.st_ino)] = _allocated(found)
    except OSError:
        pass  # then they count whole
    return sizes


def _filesystem_now(folder: Path) -> int:
    """Now, by the clock filesystems stamp changes with: the change time of an empty file
    made in ``folder``; where none can be made, the system clock less its lag."""
    stamp = folder / ".ioh-disk-since"
    try:
        stamp.touch()
        found = stamp.stat()
        return max(found.st_ctime_ns, found.st_mtime_ns)  # as changes are read in _count
    except OSError:
        return time.time_ns() - _CLOCK_LAG_NS


def _outermost(folders: Sequence[Path]) -> list[Path]:
    """The folders that exist, without those inside another of them."""
    found = sorted({Path(folder) for folder in folders if Path(folder).is_dir()})
    kept: list[Path] = []
    for folder in found:
        if not any(folder.is_relative_to(outer) for outer in kept):
            kept.append(folder)
    return kept


def _device(path: Path) -> int:
    try:
        return os.stat(path).st_dev
    except OSError:
        return -1


def _lost(before: dict[Path, int | None], now: dict[Path, int | None]) -> int | None:
    """The free space lost from ``before`` to ``now`` (``None``: a filesystem cannot say)."""
    lost = 0
    for root, free in before.items():
        later = now.get(root)
        if free is None or later is None:
            return None
        lost += max(0, free - later)
    return lost


def _free(path: Path) -> int | None:
    try:
        return shutil.disk_usage(path).free
    except OSError:
        return None


def _allocated(found: os.stat_result) -> int:
    """The bytes a file takes on disk: its blocks, or its size where there are none (Windows)."""
    blocks = getattr(found, "st_blocks", None)
    return found.st_size if blocks is None else blocks * 512
