"""A sub-agent's private copy of its parent's workspace, and bringing its changes back.

A child spawned with ``isolate = true`` works in a copy taken by :func:`isolate`,
so concurrent children cannot clobber each other's edits. When it succeeds,
:func:`bring_back` writes each file it changed into the parent's workspace only
where the parent's file still matches the :class:`Snapshot` taken with the copy;
anywhere else the parent's file is kept and the path is a conflict.

Only regular files count: symlinks are never followed or copied, special files
are skipped, and a mode-only change (same bytes) is not a change. Filesystem
errors (``OSError``) propagate; the caller turns them into an observation.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import secrets
import shutil
import stat
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from types import MappingProxyType

from io_harness.tools._text import PARTIAL_SUFFIX

__all__ = ["BroughtBack", "Snapshot", "bring_back", "isolate", "snapshot"]

_CHUNK = 1024 * 1024
_SHA256_HEX = re.compile(r"[0-9a-f]{64}")
# Opening with O_NOFOLLOW refuses a path that became a symlink after the walk
# saw a regular file, and O_NONBLOCK keeps a path that became a FIFO from
# blocking the open; neither flag changes how a regular file is read.
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
_NOT_REGULAR = "not a regular file"
"""The state of a path that exists but is not a regular file; never equal to a hash."""
_LISTED = 20
"""How many brought-back paths :meth:`BroughtBack.describe` names before counting the rest."""


def _check_entry(rel: object, digest: object) -> None:
    """Refuse a snapshot entry whose path could leave the root or whose hash is not one."""
    if not isinstance(rel, str) or not isinstance(digest, str):
        raise ValueError(
            f"snapshot entries map path strings to hash strings, not {rel!r}: {digest!r}"
        )
    pure = PurePosixPath(rel)
    if not rel or "\x00" in rel or pure.is_absolute() or ".." in pure.parts:
        raise ValueError(f"snapshot path {rel!r} is not a relative path inside the root")
    if rel != pure.as_posix() or rel == ".":
        raise ValueError(f"snapshot path {rel!r} is not in normal form (no '.', '//', or '/' end)")
    if not _SHA256_HEX.fullmatch(digest):
        raise ValueError(f"snapshot hash for {rel!r} is not a lowercase sha256 hex digest")


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Each regular file under a root: relative POSIX path -> sha256 hex of its bytes.

    Every path is checked on construction (relative, no ``..``, normal form),
    so :func:`bring_back` can never be led outside its root by a snapshot.
    """

    files: Mapping[str, str]

    def __post_init__(self) -> None:
        for rel, digest in self.files.items():
            _check_entry(rel, digest)
        object.__setattr__(self, "files", MappingProxyType(dict(sorted(self.files.items()))))

    def to_json(self) -> str:
        """The snapshot as compact JSON, ``{"files": {path: hash}}``, paths sorted."""
        return json.dumps({"files": dict(self.files)}, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> Snapshot:
        """The snapshot :meth:`to_json` wrote; bad JSON, shape or paths are a ``ValueError``."""
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"a snapshot is not valid JSON: {exc}") from None
        if not isinstance(data, dict) or not isinstance(data.get("files"), dict):
            raise ValueError(
                'a snapshot is a JSON object {"files": {path: sha256 hex}}, '
                f"not {type(data).__name__} {text[:60]!r}"
            )
        return cls(data["files"])


@dataclass(frozen=True, slots=True)
class BroughtBack:
    """What :func:`bring_back` did: the paths it applied, and those it left as conflicts."""

    brought: tuple[str, ...]
    """Relative paths written into or removed from the root, sorted."""
    conflicts: tuple[str, ...]
    """Relative paths the child changed that the parent also changed differently, sorted."""
    copy: Path
    """The child's copy, where a conflicting file's child version stays."""

    def describe(self) -> str:
        """One short paragraph for the model: what came back and which files conflict."""
        if not self.brought and not self.conflicts:
            return "No files changed: nothing in the sub-agent's copy needed bringing back."
        parts = []
        if self.brought:
            shown = ", ".join(self.brought[:_LISTED])
            more = len(self.brought) - _LISTED
            if more > 0:
                shown += f" and {more} more"
            parts.append(
                f"Brought back {_count(self.brought)} from the sub-agent's copy "
                f"(written or removed to match it): {shown}."
            )
        else:
            parts.append("No files were brought back.")
        if self.conflicts:
            # Every conflict is named, unlike brought files: each needs the parent's attention.
            where = ", ".join(str(self.copy / rel) for rel in self.conflicts)
            one = len(self.conflicts) == 1
            parts.append(
                f"{'Conflict' if one else 'Conflicts'} on {_count(self.conflicts)}: "
                f"{', '.join(self.conflicts)} also changed in the parent's workspace since the "
                f"copy was taken, so the parent's {'copy was' if one else 'copies were'} kept; "
                f"the sub-agent's {'version is' if one else 'versions are'} at {where} "
                "(absent where it deleted the file)."
            )
        return " ".join(parts)


def _count(paths: tuple[str, ...]) -> str:
    return "1 file" if len(paths) == 1 else f"{len(paths)} files"


def _raise(exc: OSError) -> None:
    raise exc


def _walk(root: Path) -> Iterator[tuple[str, bool]]:
    """Every non-directory entry under ``root`` as (relative POSIX path, is a regular file).

    A symlink to a folder is reported as a non-regular entry and not entered;
    an entry that vanishes during the walk is left out.
    """
    for dirpath, dirnames, filenames in os.walk(root, onerror=_raise, followlinks=False):
        here = Path(dirpath)
        prefix = here.relative_to(root)
        for name in dirnames:
            if (here / name).is_symlink():
                yield (prefix / name).as_posix(), False
        for name in filenames:
            try:
                mode = os.lstat(here / name).st_mode
            except FileNotFoundError:
                continue
            yield (prefix / name).as_posix(), stat.S_ISREG(mode)


def _open_regular(path: Path) -> int | None:
    """A descriptor reading ``path`` if it is a regular file now; ``None`` if it is gone or not."""
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except FileNotFoundError:
        return None
    except OSError as exc:
        # ELOOP (EMLINK on FreeBSD): a symlink, refused by O_NOFOLLOW; ENXIO: a socket.
        if exc.errno in (errno.ELOOP, errno.EMLINK, errno.ENXIO):
            return None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return None
    return fd


def _hash_fd(fd: int) -> str:
    with os.fdopen(fd, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def _copy_fd(fd: int, dst: Path) -> str:
    """Copy the open file to the new file ``dst`` with its mode; the sha256 of the bytes copied."""
    digest = hashlib.sha256()
    with os.fdopen(fd, "rb") as source:
        mode = os.fstat(source.fileno()).st_mode & 0o7777
        out = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(out, "wb") as target:
            while chunk := source.read(_CHUNK):
                digest.update(chunk)
                target.write(chunk)
    # Set after writing, so a read-only mode cannot stop the copy itself.
    os.chmod(dst, mode)
    return digest.hexdigest()


def _scan(root: Path) -> tuple[dict[str, str], set[str]]:
    """The regular files under ``root`` with their hashes, and the paths of everything else."""
    files: dict[str, str] = {}
    others: set[str] = set()
    for rel, regular in _walk(root):
        fd = _open_regular(root / rel) if regular else None
        if fd is None:
            others.add(rel)
        else:
            files[rel] = _hash_fd(fd)
    return files, others


def snapshot(root: Path) -> Snapshot:
    """The hash of each regular file under ``root``; symlinks and special files are skipped."""
    return Snapshot(_scan(root)[0])


def isolate(root: Path, into: Path) -> Snapshot:
    """Copy the tree under root into `into` (which must not exist yet; its parent must).

    File modes are kept. The snapshot returned holds the hashes of the bytes as
    copied, taken from the copy, so a file changing in the parent mid-copy
    cannot lie. ``into`` may not lie inside ``root`` (the copy would copy
    itself): that is a ``ValueError``. A copy that fails is removed.
    """
    target = into.parent.resolve() / into.name
    if target.is_relative_to(root.resolve()):
        raise ValueError(f"the copy {into} would lie inside the workspace it copies, {root}")
    into.mkdir()
    files: dict[str, str] = {}
    try:
        for rel, regular in _walk(root):
            fd = _open_regular(root / rel) if regular else None
            if fd is None:
                continue
            dst = into / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            files[rel] = _copy_fd(fd, dst)
    except BaseException:
        shutil.rmtree(into, ignore_errors=True)
        raise
    return Snapshot(files)


def _state(root: Path, rel: str) -> str | None:
    """The hash of ``root/rel``, ``None`` if absent, or :data:`_NOT_REGULAR`.

    Each folder on the way must be a real folder: a symlink or a file there
    makes the path not a regular file, so nothing is ever written through one.
    """
    here = root
    parts = PurePosixPath(rel).parts
    for part in parts[:-1]:
        here = here / part
        try:
            mode = os.lstat(here).st_mode
        except FileNotFoundError:
            return None
        if not stat.S_ISDIR(mode):
            return _NOT_REGULAR
    path = here / parts[-1]
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return None
    fd = _open_regular(path) if stat.S_ISREG(mode) else None
    return _NOT_REGULAR if fd is None else _hash_fd(fd)


def _write_from(src: Path, dst: Path) -> None:
    """Replace ``dst`` atomically with the bytes and mode of ``src``, creating folders."""
    fd = _open_regular(src)
    if fd is None:
        raise FileNotFoundError(errno.ENOENT, "no longer a regular file in the copy", str(src))
    tmp = dst.parent / f".{dst.name}.{secrets.token_hex(4)}{PARTIAL_SUFFIX}"
    try:
        dst.parent.mkdir(parents=True, exist_ok=True)
        _copy_fd(fd, tmp)
        os.replace(tmp, dst)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def bring_back(base: Snapshot, copy: Path, root: Path) -> BroughtBack:
    """Apply each file the child changed in ``copy`` since ``base`` to ``root``, where safe.

    A change (added, modified or deleted) is applied only when ``root``'s file
    still matches ``base``; when it already matches the child's result it is
    left alone and not listed; otherwise it is a conflict and ``root``'s file
    is kept. A path the child turned into a symlink or special file is not a
    deletion: it is skipped.
    """
    theirs, others = _scan(copy)

    def shadowed(rel: str) -> bool:
        parts = PurePosixPath(rel).parts
        return any("/".join(parts[:n]) in others for n in range(1, len(parts) + 1))

    changes = [
        rel
        for rel in base.files.keys() | theirs.keys()
        if base.files.get(rel) != theirs.get(rel) and (rel in theirs or not shadowed(rel))
    ]
    # Deletions first, so a file the child replaced by a folder of the same name
    # is out of the way before the folder's files are written.
    changes.sort(key=lambda rel: (rel in theirs, rel))
    brought: list[str] = []
    conflicts: list[str] = []
    for rel in changes:
        now = _state(root, rel)
        if now == theirs.get(rel):
            continue
        if now != base.files.get(rel):
            conflicts.append(rel)
            continue
        if rel in theirs:
            _write_from(copy / rel, root / rel)
        else:
            (root / rel).unlink(missing_ok=True)
        brought.append(rel)
    return BroughtBack(tuple(sorted(brought)), tuple(sorted(conflicts)), copy)
