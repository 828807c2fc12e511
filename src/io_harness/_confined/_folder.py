"""An open folder, and every act on a name in it, never through a symlink.

POSIX systems give each act a folder descriptor (``openat``, ``mkdirat``,
``renameat``, ``unlinkat``, ``fstatat``, ``readlinkat``) and open every
component with ``O_NOFOLLOW``, so a path is walked one real folder at a time
and what is opened is the folder or file that was checked: a racer that swaps
a folder for a symlink between two calls makes the next call fail, never lead
elsewhere. Python's ``os`` offers these calls but not ``openat2``; the walk
gives what ``RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`` would, one name at a time.

Windows has no ``openat``: there a folder is its path, and each name is
checked with ``lstat`` before use (a symlink or junction is refused), which
narrows the race to the moment between the check and the use.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

__all__ = ["DESCRIPTORS", "Folder", "Listed"]

DESCRIPTORS = os.open in os.supports_dir_fd and os.name == "posix"
"""Whether folders are descriptors here (every POSIX system); otherwise paths (Windows)."""

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_BINARY = getattr(os, "O_BINARY", 0)
DIR_FLAGS = os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC
# O_NONBLOCK: a name that became a FIFO does not block the open; a regular file
# reads the same with it.
READ_FLAGS = os.O_RDONLY | _NOFOLLOW | _NONBLOCK | _CLOEXEC | _BINARY
CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC | _BINARY


@dataclass(frozen=True, slots=True)
class Listed:
    """One entry of a folder as it is now, its kind read without following a symlink."""

    name: str
    kind: str
    """``file``, ``dir``, ``link`` or ``other`` (a pipe, socket or device)."""
    size: int = 0
    link: str | None = None
    """For a symlink, the text it holds (never followed)."""


@dataclass(slots=True)
class Folder:
    """A folder held open; ``path`` is where it was opened, for messages and Windows (a
    string: a walk opens thousands, and a ``Path`` costs more to make than the open).

    Close it (or use it as a context manager): it owns its descriptor.
    """

    path: str
    fd: int | None = None
    _closed: bool = field(default=False, repr=False)

    @property
    def location(self) -> Path:
        """Where the folder was opened, as a path (for messages)."""
        return Path(self.path)

    @classmethod
    def open_root(cls, path: Path) -> Folder:
        """The folder at ``path``, trusted as given (the caller chose it), opened as a folder."""
        if not DESCRIPTORS:
            if not path.is_dir():
                raise NotADirectoryError(errno.ENOTDIR, "not a folder", str(path))
            return cls(str(path))
        return cls(str(path), os.open(path, os.O_RDONLY | _DIRECTORY | _CLOEXEC))

    def close(self) -> None:
        """Let go of the descriptor (twice is harmless)."""
        if self.fd is not None and not self._closed:
            os.close(self.fd)
        self._closed = True

    def __enter__(self) -> Folder:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _at(self, name: str) -> str:
        return name if DESCRIPTORS else os.path.join(self.path, name)

    def lstat(self, name: str) -> os.stat_result | None:
        """What ``name`` is now, a symlink itself rather than its target; ``None``: nothing."""
        try:
            return os.stat(self._at(name), dir_fd=self.fd, follow_symlinks=False)
        except (FileNotFoundError, NotADirectoryError):
            return None

    def readlink(self, name: str) -> str | None:
        """The text of the symlink ``name``; ``None`` when it is no longer one."""
        try:
            return os.readlink(self._at(name), dir_fd=self.fd)
        except OSError:
            return None

    def open_dir(self, name: str) -> Folder:
        """The folder ``name`` in this one; ``OSError`` (``ENOTDIR``, ``ENOENT``) otherwise.

        A symlink there is ``ENOTDIR``: it is never followed.
        """
        if DESCRIPTORS:
            return Folder(f"{self.path}/{name}", os.open(name, DIR_FLAGS, dir_fd=self.fd))
        path = os.path.join(self.path, name)
        info = os.lstat(path)
        if not stat.S_ISDIR(info.st_mode) or _is_link(info):
            raise NotADirectoryError(errno.ENOTDIR, "not a folder", path)
        return Folder(path)

    def make_dir(self, name: str, mode: int = 0o777) -> None:
        """Create the folder ``name`` (less the umask); ``FileExistsError`` if anything is there."""
        os.mkdir(self._at(name), mode, dir_fd=self.fd)

    def open_file(self, name: str, flags: int = READ_FLAGS, mode: int = 0o666) -> int:
        """A descriptor of ``name`` opened with ``flags``, never through a symlink (``ELOOP``)."""
        if not DESCRIPTORS:
            info = self.lstat(name)
            if info is not None and _is_link(info):
                raise OSError(errno.ELOOP, "a symlink", os.path.join(self.path, name))
        return os.open(self._at(name), flags, mode, dir_fd=self.fd)

    def rename(self, name: str, new_name: str) -> None:
        """Give ``name`` the name ``new_name`` in this folder, replacing what is there."""
        os.replace(self._at(name), self._at(new_name), src_dir_fd=self.fd, dst_dir_fd=self.fd)

    def unlink(self, name: str) -> None:
        """Remove the non-folder ``name`` (a symlink itself, not its target)."""
        os.unlink(self._at(name), dir_fd=self.fd)

    def remove_dir(self, name: str) -> None:
        """Remove the empty folder ``name``."""
        os.rmdir(self._at(name), dir_fd=self.fd)

    def entries(self) -> list[Listed]:
        """Every entry, sorted by name; one that vanishes while listed is left out."""
        listed = []
        with os.scandir(self.fd if self.fd is not None else self.path) as scan:
            for entry in scan:
                try:
                    info = entry.stat(follow_symlinks=False)
                except FileNotFoundError:
                    continue
                listed.append(self._listed(entry.name, info))
        return sorted(listed, key=lambda e: e.name)

    def names(self) -> list[tuple[str, str]]:
        """Every entry's (name, kind), sorted, from the folder's listing alone (no ``stat``
        where the system says the kind)."""
        found = []
        with os.scandir(self.fd if self.fd is not None else self.path) as scan:
            for entry in scan:
                try:
                    if entry.is_symlink():
                        kind = "link"
                    elif entry.is_dir(follow_symlinks=False):
                        kind = "dir"
                    elif entry.is_file(follow_symlinks=False):
                        kind = "file"
                    else:
                        kind = "other"
                except FileNotFoundError:
                    continue
                found.append((entry.name, kind))
        return sorted(found)

    def _listed(self, name: str, info: os.stat_result) -> Listed:
        if _is_link(info):
            return Listed(name, "link", link=self.readlink(name) or "")
        if stat.S_ISDIR(info.st_mode):
            return Listed(name, "dir")
        if stat.S_ISREG(info.st_mode):
            return Listed(name, "file", info.st_size)
        return Listed(name, "other")


def _is_link(info: os.stat_result) -> bool:
    # A Windows junction leads elsewhere as a symlink does.
    reparse = getattr(info, "st_reparse_tag", 0)
    return stat.S_ISLNK(info.st_mode) or bool(reparse)
