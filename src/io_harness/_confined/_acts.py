"""What is done to one name of an open folder: open it for reading, replace it, remove a
tree, walk below. :class:`~io_harness._confined._workspace.Workspace` walks to the folder;
these act there, never through a symlink.
"""

from __future__ import annotations

import errno
import os
import secrets
import shutil
import stat
from collections.abc import Callable, Iterator
from contextlib import suppress
from dataclasses import dataclass
from io import BufferedReader
from typing import Literal

from io_harness._confined._folder import CREATE_FLAGS, Folder
from io_harness._confined._names import PathChanged, PathRefused

__all__ = [
    "PARTIAL_SUFFIX",
    "LinkRefusal",
    "PathMissing",
    "Walked",
    "WriteVerb",
    "open_regular",
    "remove_tree",
    "replace",
    "walk",
]

PARTIAL_SUFFIX = ".ioh-tmp"
"""Suffix of the temporary file a write renames into place; one left behind is a crash's."""

WriteVerb = Literal["created", "changed", "unchanged"]

LinkRefusal = Callable[[Folder, str, str], PathRefused]
"""The refusal of a path through the symlink ``name`` of a folder, given the path as shown:
what the workspace says of where it leads."""

_NAME_MAX = 255
_CHUNK = 1024 * 1024


class PathMissing(PathRefused):
    """Nothing is at the path (or a folder on the way is missing)."""


@dataclass(frozen=True, slots=True)
class Walked:
    """An entry a walk found: its path, and its folder held open while the walk is there."""

    rel: str
    folder: Folder
    name: str
    kind: str = "file"
    """``file`` (a regular file), or with ``everything``: ``link`` or ``other``."""

    def open(self) -> BufferedReader:
        """The file, read from its folder's descriptor; :class:`PathRefused` if it is no
        longer a regular file there."""
        return open_regular(self.folder, self.name, self.rel)

    def unlink(self) -> None:
        """Remove the file (whatever is at its name now, never through a symlink)."""
        with suppress(FileNotFoundError):
            self.folder.unlink(self.name)


def walk(
    folder: Folder,
    prefix: tuple[str, ...],
    skip: frozenset[str],
    everything: bool,
    private: Callable[[tuple[str, ...]], bool],
) -> Iterator[Walked]:
    try:
        names = [(name, kind) for name, kind in folder.names() if not private((*prefix, name))]
    except OSError:
        return
    for name, kind in names:
        if kind == "file" or (everything and kind != "dir"):
            yield Walked("/".join((*prefix, name)), folder, name, kind)
    for name, kind in names:
        if kind != "dir" or name in skip:
            continue
        try:
            inner = folder.open_dir(name)
        except OSError:
            continue  # replaced meanwhile (a symlink is refused), or unreadable
        with inner:
            yield from walk(inner, (*prefix, name), skip, everything, private)


def remove_tree(folder: Folder, name: str) -> None:
    """Remove the folder ``name`` of ``folder`` and all it holds, following no symlink."""
    try:
        inner = folder.open_dir(name)
    except FileNotFoundError:
        return
    except NotADirectoryError:  # replaced meanwhile by a file or a link: remove that
        folder.unlink(name)
        return
    with inner:
        for entry, kind in inner.names():
            if kind == "dir":
                remove_tree(inner, entry)
            else:
                with suppress(FileNotFoundError):
                    inner.unlink(entry)
    folder.remove_dir(name)


def open_regular(
    folder: Folder, name: str, shown: str, link_refusal: LinkRefusal | None = None
) -> BufferedReader:
    """The regular file ``name`` of ``folder``, open for reading, or the refusal saying why."""
    try:
        fd = folder.open_file(name)
    except FileNotFoundError:
        raise PathMissing(f"{shown} does not exist") from None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EMLINK):  # EMLINK: FreeBSD's O_NOFOLLOW
            if link_refusal is not None:
                raise link_refusal(folder, name, shown) from None
            raise PathRefused(f"{shown} is a symlink; symlinks are not followed") from None
        if exc.errno == errno.ENXIO:  # a socket
            raise PathRefused(f"{shown} is not a regular file (a pipe, socket or device)") from None
        raise
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise PathRefused(f"{shown} is a directory; use list_dir")
        if not stat.S_ISREG(mode):
            raise PathRefused(f"{shown} is not a regular file (a pipe, socket or device)")
    except BaseException:
        os.close(fd)
        raise
    handle = os.fdopen(fd, "rb")
    assert isinstance(handle, BufferedReader)
    return handle


def _temporary_name(name: str) -> str:
    tmp = f".{name}.{secrets.token_hex(4)}{PARTIAL_SUFFIX}"
    if len(os.fsencode(tmp)) > _NAME_MAX:
        tmp = f".{secrets.token_hex(8)}{PARTIAL_SUFFIX}"
    return tmp


def replace(
    folder: Folder,
    name: str,
    shown: str,
    data: bytes | BufferedReader,
    mode: int | None,
    link_refusal: LinkRefusal,
) -> WriteVerb:
    """Write ``data`` over ``name`` in ``folder`` through a temporary file renamed into place."""
    info = folder.lstat(name)
    if info is not None:
        if stat.S_ISLNK(info.st_mode):
            raise link_refusal(folder, name, shown)
        with open_regular(folder, name, shown, link_refusal) as current:
            if isinstance(data, bytes) and current.read() == data:
                return "unchanged"
    if mode is None and info is not None:
        mode = info.st_mode & 0o7777
    tmp = _temporary_name(name)
    # Created 0o666 less the umask, like any new file, unless a mode is given or kept.
    fd = folder.open_file(tmp, CREATE_FLAGS, 0o666 if mode is None else 0o600)
    try:
        with os.fdopen(fd, "wb") as handle:
            if isinstance(data, bytes):
                handle.write(data)
            else:
                shutil.copyfileobj(data, handle, _CHUNK)
            if mode is not None and hasattr(os, "fchmod"):  # Windows keeps no POSIX modes
                os.fchmod(handle.fileno(), mode)
        folder.rename(tmp, name)
    except BaseException as exc:
        with suppress(OSError):
            folder.unlink(tmp)
        if isinstance(exc, IsADirectoryError | NotADirectoryError):
            raise PathChanged(f"{shown} changed while it was being written; try again") from None
        raise
    return "created" if info is None else "changed"
