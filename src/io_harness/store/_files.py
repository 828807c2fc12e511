"""The SQLite store's files: private to the harness's user, never reached through another's symlink.

Every folder and file the store makes (the folders leading to a new store,
the database, the leases folder, each lease) is made ``0700`` or ``0600``
whatever the umask; SQLite makes its ``-wal``, ``-shm`` and ``-journal`` with
the database's mode. So a command the harness runs as another user
(``nobody``) cannot read a run's transcript. One of them that exists already
and belongs to the harness's user is tightened to that (the group's and
others' bits removed, never one added); one another user owns is left as it
is (root deciding on a user's run does not take the store from them), and
what the harness adds to such a store is given to the database's owner, as
SQLite does for its ``-wal`` and ``-shm``.

The store's folder is walked from the root one folder at a time, by
descriptor: a symlink on the way is followed only when the harness's user or
root owns it, since anyone else's could lead the harness to create files
where that user chose. In the folder, every name the store makes or opens is
opened relative to the folder's descriptor with ``O_NOFOLLOW``: a symlink
there is a :class:`StorageError` naming it, never followed. SQLite opens its
own files by path, with ``O_NOFOLLOW`` (and is never let create the database);
the store checks that the file SQLite opened is the one it checked.

A store that cannot be written here (its filesystem is mounted read-only,
or the harness's user may not write the database or its folder) is opened
read-only: :func:`read_only_reason` says why, and :func:`sqlite_uri` how
SQLite can read it without making a file beside it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from io_harness._confined import Folder
from io_harness.errors import StorageError

__all__ = [
    "SQLITE_COMPANIONS",
    "Owner",
    "check_companions",
    "open_existing_file",
    "open_private_file",
    "open_private_folder",
    "read_only_reason",
    "sqlite_uri",
    "store_folder",
]

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_BINARY = getattr(os, "O_BINARY", 0)
_OPEN = _NOFOLLOW | _NONBLOCK | _CLOEXEC | _BINARY
_MAX_LINKS = 40
"""How many symlinks a walk follows before it gives up, as the kernel does."""

SQLITE_COMPANIONS = ("-wal", "-shm", "-journal")
"""The files SQLite keeps beside a database, named by adding these to its name."""


@dataclass(frozen=True, slots=True)
class Owner:
    """Whom a store belongs to: its database file's owner and group."""

    uid: int
    gid: int

    @classmethod
    def of(cls, info: os.stat_result) -> Owner:
        """The owner of the file ``info`` describes."""
        return cls(info.st_uid, info.st_gid)

    def give(self, fd: int) -> None:
        """Hand the new file or folder ``fd`` to this owner when the harness runs as root and
        is not it: what root adds to a user's store stays usable by that user."""
        if _euid() == 0 and self.uid != 0 and hasattr(os, "fchown"):
            os.fchown(fd, self.uid, self.gid)


def store_folder(path: Path, *, create: bool) -> Folder:
    """The folder ``path`` held open, walked from its root (created ``0700`` where missing
    when ``create``); a symlink on the way that neither the harness's user nor root owns,
    or a part that is not a folder, is a :class:`StorageError` naming it."""
    path = path.absolute()
    pending = list(path.parts[1:])
    folder = Folder.open_root(Path(path.anchor))
    followed = 0
    try:
        while pending:
            name = pending.pop(0)
            here = folder.location / name
            info = folder.lstat(name)
            if info is None and create:
                with contextlib.suppress(FileExistsError):  # made meanwhile: look again
                    folder.make_dir(name, 0o700)
                    with folder.open_dir(name) as made:
                        _chmod(made.fd, here, 0o700)
                info = folder.lstat(name)
            if info is None:
                raise StorageError(f"cannot open the store's folder {path}: {here} does not exist")
            if stat.S_ISLNK(info.st_mode):
                followed += 1
                target = _link_target(folder, name, info, here, followed)
                pending[:0] = target.parts[1:] if target.is_absolute() else target.parts
                if target.is_absolute():
                    folder.close()
                    folder = Folder.open_root(Path(target.anchor))
                continue
            if not stat.S_ISDIR(info.st_mode):
                raise StorageError(f"cannot open the store's folder {path}: {here} is not a folder")
            inner = folder.open_dir(name)
            folder.close()
            folder = inner
    except OSError as exc:
        folder.close()
        raise StorageError(f"cannot open the store's folder {path}: {_reason(exc)}") from None
    except BaseException:
        folder.close()
        raise
    return folder


def _link_target(
    folder: Folder, name: str, info: os.stat_result, here: Path, followed: int
) -> Path:
    """Where a symlink on the walk leads, refused when another user made it."""
    if info.st_uid not in (0, _euid()):
        raise StorageError(
            f"{here} is a symbolic link that uid {info.st_uid} owns; the store follows no "
            "symlink another user made (give the path it leads to)"
        )
    if followed > _MAX_LINKS:
        raise StorageError(f"{here}: too many symbolic links on the way to the store")
    target = folder.readlink(name)
    if target is None:
        raise StorageError(f"{here} changed while the store's folder was opened")
    return Path(target)


def open_private_folder(
    parent: Folder, name: str, owner: Owner | None, *, create: bool = True
) -> Folder:
    """The folder ``name`` in ``parent``: made ``0700`` (and given to ``owner``, when one is
    named) if missing and ``create``, else ``FileNotFoundError``; tightened if the harness's
    user owns it. A symlink or a file there is a :class:`StorageError`."""
    here = parent.location / name
    try:
        made = False
        if create:
            with contextlib.suppress(FileExistsError):
                parent.make_dir(name, 0o700)
                made = True
        info = parent.lstat(name)
        if info is None:
            raise FileNotFoundError(errno.ENOENT, "no such folder", str(here))
        if stat.S_ISLNK(info.st_mode):
            raise StorageError(_symlink_refused(here))
        folder = parent.open_dir(name)
    except FileNotFoundError:
        if create:
            raise StorageError(f"cannot open {here}: it vanished while it was made") from None
        raise
    except OSError as exc:
        raise StorageError(f"cannot open {here}: {_reason(exc)}") from None
    try:
        if folder.fd is not None and made:
            _chmod(folder.fd, here, 0o700)
            if owner is not None:
                owner.give(folder.fd)
        elif folder.fd is not None:
            _tighten(folder.fd, here)
    except OSError as exc:
        folder.close()
        raise StorageError(f"cannot make {here} the store's: {_reason(exc)}") from None
    except BaseException:
        folder.close()
        raise
    return folder


def open_private_file(folder: Folder, name: str, flags: int, owner: Owner | None = None) -> int:
    """A descriptor of the regular file ``name`` in ``folder``, opened with ``flags``
    (``os.O_RDWR``, say): made ``0600`` (and given to ``owner``, when one is named) if
    missing, tightened if the harness's user owns it; a symlink there is a
    :class:`StorageError`."""
    here = folder.location / name
    try:
        for _ in range(3):  # a file removed between the two opens is made again
            with contextlib.suppress(FileExistsError):
                fd = folder.open_file(name, flags | os.O_CREAT | os.O_EXCL | _OPEN, 0o600)
                try:
                    _chmod(fd, here, 0o600)
                    if owner is not None:
                        owner.give(fd)
                except BaseException:
                    os.close(fd)
                    raise
                return fd
            with contextlib.suppress(FileNotFoundError):
                return open_existing_file(folder, name, flags)
        raise StorageError(f"cannot open {here}: it keeps vanishing")
    except OSError as exc:
        raise StorageError(f"cannot open {here}: {_reason(exc)}") from None


def open_existing_file(folder: Folder, name: str, flags: int) -> int:
    """A descriptor of the regular file ``name`` in ``folder``, tightened if the harness's
    user owns it; ``FileNotFoundError`` if there is none, a :class:`StorageError` if a
    symlink or something other than a file is there."""
    here = folder.location / name
    try:
        fd = folder.open_file(name, flags | _OPEN)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EMLINK):  # EMLINK: FreeBSD's O_NOFOLLOW
            raise StorageError(_symlink_refused(here)) from None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise StorageError(f"{here} is not a regular file")
        _tighten(fd, here)
    except BaseException:
        os.close(fd)
        raise
    return fd


def check_companions(folder: Folder, database: str) -> None:
    """Refuse a symlink where SQLite keeps a file beside ``database``; tighten those the
    harness's user owns (SQLite makes new ones with the database's mode)."""
    for suffix in SQLITE_COMPANIONS:
        try:
            os.close(open_existing_file(folder, database + suffix, os.O_RDONLY))
        except FileNotFoundError:
            continue
        except OSError as exc:
            here = folder.location / (database + suffix)
            raise StorageError(f"cannot open {here}: {_reason(exc)}") from None


def read_only_reason(folder: Folder, database: str, fd: int) -> str | None:
    """Why the database ``database`` (open as ``fd``) in ``folder`` can only be read here,
    or ``None`` when it can be written: SQLite writes the file and makes its ``-wal`` and
    ``-shm`` beside it."""
    if hasattr(os, "fstatvfs") and os.fstatvfs(fd).f_flag & getattr(os, "ST_RDONLY", 0):
        return "its filesystem is mounted read-only"
    try:
        os.close(open_existing_file(folder, database, os.O_RDWR))
    except PermissionError:
        return "this user may not write to it"
    except OSError as exc:
        if exc.errno == errno.EROFS:
            return "its filesystem is mounted read-only"
        raise StorageError(f"cannot open {folder.location / database}: {_reason(exc)}") from None
    effective = os.access in os.supports_effective_ids
    if not os.access(folder.location, os.W_OK, effective_ids=effective):
        return "this user may not write to its folder"
    return None


def sqlite_uri(folder: Folder, path: Path, read_only: str | None) -> str:
    """The URI SQLite opens the database ``path`` (in ``folder``) by: read and written (never
    created), or read only.

    A read-only database in WAL mode is read through its ``-wal`` and ``-shm``
    when both are there (a writer elsewhere may be adding to them); with no
    ``-wal`` to read, as it is (``immutable``), since SQLite cannot make the
    ``-shm`` it would otherwise need. A ``-wal`` without its ``-shm`` holds
    commits nothing here can read: a :class:`StorageError`.
    """
    uri, database = path.as_uri(), path.name
    if read_only is None:
        return f"{uri}?mode=rw"
    wal, shm = (folder.lstat(database + suffix) for suffix in ("-wal", "-shm"))
    if wal is not None and shm is not None:
        return f"{uri}?mode=ro"
    if wal is None or wal.st_size == 0:
        return f"{uri}?mode=ro&immutable=1"
    raise StorageError(
        f"cannot read the store {path}: it is read-only ({read_only}) "
        f"and its {database}-wal holds commits without the {database}-shm SQLite needs to "
        "read them; open it once where it can be written"
    )


def _tighten(fd: int, here: Path) -> None:
    """Take the group's and others' bits off ``fd`` if the harness's user owns it.

    A file that cannot be changed (a read-only mount) is left as it is: the
    store can still be read there, and nothing is written to it.
    """
    info = os.fstat(fd)
    if info.st_uid != _euid() or not info.st_mode & 0o077 or not hasattr(os, "fchmod"):
        return
    try:
        os.fchmod(fd, stat.S_IMODE(info.st_mode) & 0o700)
    except OSError as exc:
        if exc.errno not in (errno.EROFS, errno.EPERM):
            raise StorageError(f"cannot make {here} private: {_reason(exc)}") from None


def _chmod(fd: int | None, here: Path, mode: int) -> None:
    """Set ``fd``'s mode whatever the umask (Windows keeps its own access lists)."""
    if fd is None or not hasattr(os, "fchmod"):
        return
    try:
        os.fchmod(fd, mode)
    except OSError as exc:
        raise StorageError(f"cannot make {here} private: {_reason(exc)}") from None


def _symlink_refused(here: Path) -> str:
    """What a store says of a symlink where it opens or makes a file or folder."""
    return (
        f"{here} is a symbolic link; the store opens nothing through a symlink "
        "(remove it, or give the store's real path)"
    )


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc)


def _euid() -> int:
    return os.geteuid() if hasattr(os, "geteuid") else -1
