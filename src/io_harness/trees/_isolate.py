"""A sub-agent's private copy of its parent's workspace, and bringing its changes back.

A child spawned with ``isolate = true`` works in a copy taken by :func:`isolate`,
so concurrent children cannot clobber each other's edits. When it succeeds,
:func:`bring_back` writes each file it changed into the parent's workspace only
where the parent's file still matches the :class:`Snapshot` taken with the copy;
anywhere else the parent's file is kept and the path is a conflict. Every file
brought back is a write the parent's gate decides, as the parent's own would be.

Only regular files count: symlinks are never followed or copied, special files
are skipped, and a mode-only change (same bytes) is not a change. Both trees
are walked from their folders' descriptors, never through a symlink, so a
racing process cannot lead a read or a write elsewhere. Filesystem errors
(``OSError``, and a refused path) propagate; the caller turns them into an
observation.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import shutil
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from io import BufferedReader
from pathlib import Path, PurePosixPath
from types import MappingProxyType

from io_harness._confined import Folder, PathMissing, PathRefused, Workspace
from io_harness._confined._acts import open_regular
from io_harness._confined._folder import CREATE_FLAGS

__all__ = ["BroughtBack", "Snapshot", "WriteCheck", "bring_back", "isolate", "snapshot"]

_CHUNK = 1024 * 1024
_SHA256_HEX = re.compile(r"[0-9a-f]{64}")
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
    withheld: tuple[tuple[str, str], ...] = ()
    """Relative paths the parent's policy did not let be written outright, with why."""

    def describe(self) -> str:
        """One short paragraph for the model: what came back, which files conflict, and
        which the policy withheld."""
        if not self.brought and not self.conflicts and not self.withheld:
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
        if self.withheld:
            # Each withheld file is named too: the parent decides whether to write it itself.
            reasons = "; ".join(
                f"{rel} ({why}; the sub-agent's version is at {self.copy / rel})"
                for rel, why in self.withheld
            )
            parts.append(
                f"Not brought back, as your policy does not let them be written outright: "
                f"{reasons}."
            )
        return " ".join(parts)


def _count(paths: tuple[str, ...]) -> str:
    return "1 file" if len(paths) == 1 else f"{len(paths)} files"


def _scan(root: Workspace) -> tuple[dict[str, str], set[str]]:
    """The regular files under ``root`` with their hashes, and the paths of everything else."""
    files: dict[str, str] = {}
    others: set[str] = set()
    for found in root.walk(frozenset(), everything=True):
        if found.kind != "file":
            others.add(found.rel)
            continue
        try:
            with found.open() as handle:
                files[found.rel] = hashlib.file_digest(handle, "sha256").hexdigest()
        except PathRefused:  # no longer a regular file: changed since it was listed
            others.add(found.rel)
    return files, others


def snapshot(root: Path) -> Snapshot:
    """The hash of each regular file under ``root``; symlinks and special files are skipped."""
    return Snapshot(_scan(Workspace(root))[0])


def isolate(root: Path, into: Path) -> Snapshot:
    """Copy the tree under root into `into` (which must not exist yet; its parent must).

    Every folder and file keeps its mode, so the copy is no more readable than
    the original (the caller puts it in a folder of its own, private to the
    harness). Only folders and regular files are copied, each read from its
    folder's descriptor without following a symlink. The snapshot returned
    holds the hashes of the bytes as copied, so a file changing in the parent
    mid-copy cannot lie. ``into`` may not lie inside ``root`` (the copy would
    copy itself): that is a ``ValueError``. A copy that fails is removed.
    """
    target = into.parent.resolve() / into.name
    if target.is_relative_to(root.resolve()):
        raise ValueError(f"the copy {into} would lie inside the workspace it copies, {root}")
    source = Folder.open_root(root.resolve())
    with source:
        os.mkdir(into, 0o700)
        files: dict[str, str] = {}
        try:
            with Folder.open_root(target) as copy:
                _copy_folder(source, copy, (), files)
                _keep_mode(source, copy)
        except BaseException:
            shutil.rmtree(into, ignore_errors=True)
            raise
    return Snapshot(files)


def _copy_folder(
    source: Folder, copy: Folder, prefix: tuple[str, ...], files: dict[str, str]
) -> None:
    """Copy ``source``'s folders and regular files into ``copy``, recording each file's hash.

    A folder's own mode is set after its content, so a read-only folder can be filled.
    """
    for name, kind in source.names():
        rel = "/".join((*prefix, name))
        if kind == "file":
            try:
                handle = open_regular(source, name, rel)
            except PathRefused:
                continue  # no longer a regular file
            with handle:
                files[rel] = _copy_file(handle, copy, name)
        elif kind == "dir":
            try:
                inner = source.open_dir(name)
            except OSError:
                continue  # replaced by something else meanwhile
            with inner:
                copy.make_dir(name, 0o700)
                with copy.open_dir(name) as inner_copy:
                    _copy_folder(inner, inner_copy, (*prefix, name), files)
                    _keep_mode(inner, inner_copy)


def _keep_mode(source: Folder, copy: Folder) -> None:
    if source.fd is not None and copy.fd is not None:
        os.fchmod(copy.fd, os.fstat(source.fd).st_mode & 0o7777)


def _copy_file(handle: BufferedReader, copy: Folder, name: str) -> str:
    """Copy the open file to the new file ``name`` of ``copy`` with its mode; its sha256."""
    digest = hashlib.sha256()
    out = copy.open_file(name, CREATE_FLAGS, 0o600)
    with os.fdopen(out, "wb") as target:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
            target.write(chunk)
        # Set after writing, so a read-only mode cannot stop the copy itself.
        if hasattr(os, "fchmod"):
            os.fchmod(target.fileno(), os.fstat(handle.fileno()).st_mode & 0o7777)
    return digest.hexdigest()


def _state(root: Workspace, rel: str) -> str | None:
    """The hash of ``rel`` under ``root``, ``None`` if absent, or :data:`_NOT_REGULAR`.

    Each folder on the way must be a real folder: a symlink or a file there
    makes the path not a regular file, so nothing is ever written through one.
    """
    try:
        info = root.lstat(rel)
        if info is None:
            return None
        if not stat.S_ISREG(info.st_mode):
            return _NOT_REGULAR
        with root.open(rel) as handle:
            return hashlib.file_digest(handle, "sha256").hexdigest()
    except PathMissing:
        return None
    except PathRefused:
        return _NOT_REGULAR


WriteCheck = Callable[[str], str | None]
"""Whether the parent's policy lets a path be written outright: ``None``, or why not."""


def bring_back(
    base: Snapshot, copy: Path, root: Path, may_write: WriteCheck | None = None
) -> BroughtBack:
    """Apply each file the child changed in ``copy`` since ``base`` to ``root``, where safe.

    A change (added, modified or deleted) is applied only when ``root``'s file
    still matches ``base``; when it already matches the child's result it is
    left alone and not listed; otherwise it is a conflict and ``root``'s file
    is kept. A path the child turned into a symlink or special file is not a
    deletion: it is skipped. Every change is a write the parent's gate decides
    (``may_write``): one it does not allow outright is withheld, the child's
    version left in the copy. Both sides are walked from their descriptors,
    never through a symlink.
    """
    parent, child = Workspace(root), Workspace(copy, called="the sub-agent's copy")
    theirs, others = _scan(child)

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
    withheld: list[tuple[str, str]] = []
    for rel in changes:
        now = _state(parent, rel)
        if now == theirs.get(rel):
            continue
        if now != base.files.get(rel):
            conflicts.append(rel)
            continue
        refusal = may_write(rel) if may_write is not None else None
        if refusal is not None:
            withheld.append((rel, refusal))
            continue
        if rel in theirs:
            _write_from(child, rel, parent)
        else:
            parent.unlink(rel)
        brought.append(rel)
    return BroughtBack(
        tuple(sorted(brought)), tuple(sorted(conflicts)), copy, tuple(sorted(withheld))
    )


def _write_from(child: Workspace, rel: str, parent: Workspace) -> None:
    """Replace ``rel`` in ``parent`` atomically with the bytes and mode of the child's file."""
    try:
        with child.open(rel) as handle:
            parent.write(rel, handle, mode=os.fstat(handle.fileno()).st_mode & 0o7777)
    except PathMissing:
        raise FileNotFoundError(errno.ENOENT, "no longer a regular file in the copy", rel) from None
