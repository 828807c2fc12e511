"""A confined folder: every read, write, listing and walk done from its descriptor.

:class:`Workspace` takes the paths the agent gives (and the names a
repository holds) and acts on them only by walking from the folder's own
descriptor, one component at a time, never through a symlink
(:mod:`._folder`). So the policy's target for a path is its spelling
(:meth:`Workspace.canonical`): the file acted on is always the one at that
spelling, inside the folder, whatever a racing process does meanwhile. A
symlink on the way is refused with what it links to, so the model can use
that path instead; a change mid-walk is :class:`PathChanged`, an observation.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from io import BufferedReader
from pathlib import Path, PurePosixPath

from io_harness._confined._acts import (
    LinkRefusal,
    PathMissing,
    Walked,
    WriteVerb,
    open_regular,
    remove_tree,
    replace,
    walk,
)
from io_harness._confined._folder import Folder, Listed
from io_harness._confined._names import PathChanged, PathRefused, parts_of, same_name

__all__ = ["SKIPPED_DIRS", "Workspace"]

SKIPPED_DIRS = frozenset({".git", ".venv", "node_modules", "__pycache__"})
"""Folders that walks (grep, find) never enter: tool state, not the subject."""


def _shown(parts: tuple[str, ...]) -> str:
    return "/".join(parts) or "."


class Workspace:
    """The folder the agent works in; every act on a path inside walks from its descriptor.

    ``private`` names the harness's own files that may lie in the folder (the
    store's database, its companions, its leases): every act on them is
    refused and every walk and listing leaves them out, whatever a policy says.

    ``within`` names a workspace this folder may lie in (a skills folder in the
    repository): when ``root`` is inside it, as spelled or where it really is,
    the folder is reached through that workspace's descriptor, walked like any
    path there, so a racer cannot swap it for a symlink either.
    """

    def __init__(
        self,
        root: Path,
        may_read: Callable[[str], bool] | None = None,
        *,
        called: str = "the workspace",
        within: Workspace | None = None,
        private: Sequence[Path] = (),
    ) -> None:
        self.called = called
        """What a refusal calls the folder (a skill's folder is confined the same way)."""
        self.may_read: Callable[[str], bool] = may_read or (lambda _rel: True)
        """Whether a walk (grep) may read a file, by its relative path; the gate answers."""
        self._within: tuple[Workspace, tuple[str, ...]] | None = None
        spelled = Path(os.path.abspath(root))
        inside = within is not None and spelled.is_relative_to(within.root)
        self.root: Path = spelled if inside else root.resolve()
        if within is not None and self.root.is_relative_to(within.root):
            parts = self.root.relative_to(within.root).parts
            self._within = (within, parts) if parts else None
        self._private = frozenset(
            tuple(same_name(part) for part in place.relative_to(self.root).parts)
            for place in (Path(os.path.realpath(path)) for path in private)
            if place.is_relative_to(self.root) and place != self.root
        )
        """The harness's own files in the folder (its store), by their parts: no act and no
        walk reaches them."""

    # --- paths as text ---------------------------------------------------------------

    def canonical(self, path: str) -> str:
        """``path`` as the policy sees it: relative, ``/``-separated, ``.`` for the folder.

        Checked as text only (absolute, ``..``, NUL and the like are refused):
        since nothing is ever opened through a symlink, the spelling names
        the file.
        """
        return _shown(parts_of(path, self.called))

    def _private_part(self, parts: tuple[str, ...]) -> bool:
        """Whether ``parts`` is, or lies in, one of the harness's own files."""
        if not self._private:
            return False
        folded = tuple(same_name(part) for part in parts)
        return any(folded[:depth] in self._private for depth in range(1, len(folded) + 1))

    def _parts(self, path: str) -> tuple[str, ...]:
        """``path``'s parts (:func:`parts_of`), refused when it reaches a private file."""
        parts = parts_of(path, self.called)
        if self._private_part(parts):
            raise PathRefused(
                f"{path!r} is the harness's own store, private to it: no tool reads or writes it"
            )
        return parts

    # --- walking down ----------------------------------------------------------------

    def _open_root(self, *, create: bool = False) -> Folder:
        """The root, opened; with ``create``, made first if it is missing (the caller named
        it, so its path is trusted; one reached through another workspace is walked)."""
        if self._within is not None:
            outer, parts = self._within
            folder = outer._descend(parts, "/".join(parts))
            if folder is None:
                raise PathMissing(f"{self.called} ({self.root}) no longer exists")
            return folder
        try:
            return Folder.open_root(self.root)
        except FileNotFoundError:
            if not create:
                raise PathMissing(f"{self.called} ({self.root}) does not exist") from None
        self.root.mkdir(parents=True, exist_ok=True)
        return Folder.open_root(self.root)

    def _descend(
        self, parts: tuple[str, ...], given: str, *, create: bool = False
    ) -> Folder | None:
        """The folder at ``parts``, walked from the root; ``None`` when a folder is missing.

        With ``create``, missing folders are made on the way (never through a symlink).
        """
        folder = self._open_root(create=create)
        try:
            for depth, name in enumerate(parts):
                inner = self._enter(folder, name, parts[: depth + 1], given, create=create)
                folder.close()
                if inner is None:
                    return None
                folder = inner
        except BaseException:
            folder.close()
            raise
        return folder

    def _enter(
        self, folder: Folder, name: str, at: tuple[str, ...], given: str, *, create: bool
    ) -> Folder | None:
        for _ in range(3):  # a folder made or removed meanwhile: look again, a few times
            try:
                return folder.open_dir(name)
            except FileNotFoundError:
                if not create:
                    return None
                try:
                    folder.make_dir(name)
                except FileExistsError:
                    continue
            except NotADirectoryError:
                raise self._not_a_folder(folder, name, at, given) from None
            except OSError as exc:
                if exc.errno != errno.ELOOP:
                    raise
                raise self._not_a_folder(folder, name, at, given) from None
        raise PathChanged(f"{_shown(at)} changed while it was being opened; try again")

    def _not_a_folder(
        self, folder: Folder, name: str, at: tuple[str, ...], given: str
    ) -> PathRefused:
        info = folder.lstat(name)
        if info is None or stat.S_ISDIR(info.st_mode):
            return PathChanged(f"{_shown(at)} changed while it was being opened; try again")
        if stat.S_ISLNK(info.st_mode):
            return self._symlink(folder, name, at, given)
        on_the_way = "" if self.canonical(given) == _shown(at) else f" (on the way to {given})"
        return PathRefused(f"{_shown(at)} is not a folder: it is a file{on_the_way}")

    def _symlink(self, folder: Folder, name: str, at: tuple[str, ...], given: str) -> PathRefused:
        """The refusal of a path through the symlink at ``at``: where it leads, if inside."""
        target = folder.readlink(name)
        if target is None:
            return PathChanged(f"{_shown(at)} changed while it was being opened; try again")
        inside = self._lexical(at[:-1], target)
        if inside is None:
            return PathRefused(
                f"{given!r} resolves outside {self.called} through a symlink "
                f"({_shown(at)} links out of it); symlinks are not followed"
            )
        return PathRefused(
            f"{_shown(at)} is a symlink to {target!r}; symlinks are not followed: "
            f"use the path {inside!r} instead"
        )

    def _link_refusal(self, given: str) -> LinkRefusal:
        """How a symlink met at the end of ``given`` is refused (:meth:`_symlink`)."""
        return lambda folder, name, shown: self._symlink(
            folder, name, tuple(shown.split("/")), given
        )

    def _lexical(self, base: tuple[str, ...], target: str) -> str | None:
        """Where a link in ``base`` holding ``target`` points, as text; ``None``: outside."""
        pure = PurePosixPath(target)
        if pure.is_absolute():
            if not Path(target).is_relative_to(self.root):
                return None
            parts: list[str] = []
            pure = PurePosixPath(Path(target).relative_to(self.root).as_posix())
        else:
            parts = list(base)
        for part in pure.parts:
            if part == "..":
                if not parts:
                    return None
                parts.pop()
            elif part != ".":
                parts.append(part)
        return _shown(tuple(parts))

    @contextmanager
    def folder(self, path: str = ".", *, create: bool = False) -> Iterator[Folder]:
        """The folder at ``path``, held open for the block; :class:`PathMissing` if absent."""
        parts = self._parts(path)
        folder = self._descend(parts, path, create=create)
        if folder is None:
            raise PathMissing(f"{_shown(parts)} does not exist")
        with folder:
            yield folder

    @contextmanager
    def _parent(self, path: str, *, create: bool = False) -> Iterator[tuple[Folder, str, str]]:
        """The folder holding ``path``'s last name, that name, and the path as shown."""
        parts = self._parts(path)
        if not parts:
            raise PathRefused(f"{path!r} is {self.called} itself, not a file in it")
        folder = self._descend(parts[:-1], path, create=create)
        if folder is None:
            raise PathMissing(f"{_shown(parts)} does not exist")
        with folder:
            yield folder, parts[-1], _shown(parts)

    # --- acts on one path ------------------------------------------------------------

    def lstat(self, path: str) -> os.stat_result | None:
        """What is at ``path`` now (a symlink itself, not its target); ``None``: nothing.

        A symlink on the way is refused, as for any other act.
        """
        try:
            with self._parent(path) as (folder, name, _):
                return folder.lstat(name)
        except PathMissing:
            return None

    @contextmanager
    def open(self, path: str) -> Iterator[BufferedReader]:
        """The regular file at ``path``, open for reading; refused if it is anything else."""
        with self._parent(path) as (folder, name, shown):
            handle = open_regular(folder, name, shown, self._link_refusal(path))
        with handle:
            yield handle

    def read_bytes(self, path: str) -> bytes | None:
        """The bytes of the regular file at ``path``; ``None`` when nothing is there."""
        try:
            with self.open(path) as handle:
                return handle.read()
        except PathMissing:
            return None

    def write(
        self, path: str, data: bytes | BufferedReader, *, mode: int | None = None
    ) -> WriteVerb:
        """Write ``data`` (bytes, or an open file read to its end) to ``path`` atomically,
        making its folders; say what it did.

        The bytes go to a temporary file beside the target, renamed over it, so
        a reader sees the old file or the new one, never half of one. The file
        gets ``mode`` when given; otherwise an existing file keeps its mode and
        a new one gets the process's default. A symlink, folder or special
        file at the path is refused, never replaced. Bytes equal to the file's
        are ``unchanged`` (an open file is always written).
        """
        with self._parent(path, create=True) as (folder, name, shown):
            return replace(folder, name, shown, data, mode, self._link_refusal(path))

    def unlink(self, path: str) -> bool:
        """Remove the file or symlink at ``path`` (never a folder); whether one was there."""
        try:
            with self._parent(path) as (folder, name, shown):
                info = folder.lstat(name)
                if info is None:
                    return False
                if stat.S_ISDIR(info.st_mode):
                    raise PathRefused(f"{shown} is a folder")
                folder.unlink(name)
                return True
        except PathMissing:
            return False

    def remove(self, path: str) -> bool:
        """Remove whatever is at ``path``: a file, a symlink (never its target) or a whole
        folder, each entry unlinked from its folder's descriptor; whether anything was there."""
        with self._parent(path) as (folder, name, _):
            info = folder.lstat(name)
            if info is None:
                return False
            if stat.S_ISDIR(info.st_mode):
                remove_tree(folder, name)
            else:
                folder.unlink(name)
            return True

    def entries(self, path: str = ".") -> list[Listed]:
        """The entries of the folder at ``path``, kinds read without following a symlink
        (the harness's own files left out)."""
        parts = self._parts(path)
        with self.folder(path) as folder:
            return [e for e in folder.entries() if not self._private_part((*parts, e.name))]

    def link_target(self, path: str, link: str) -> str | None:
        """Where the symlink at ``path`` holding ``link`` points inside the folder, as text;
        ``None`` when it points outside."""
        return self._lexical(parts_of(path, self.called)[:-1], link)

    # --- walks -----------------------------------------------------------------------

    def walk(
        self, skip: frozenset[str] = SKIPPED_DIRS, *, everything: bool = False
    ) -> Iterator[Walked]:
        """Every regular file under the root, sorted, folders named in ``skip`` left out;
        with ``everything``, every other entry but a folder too (symlinks, special files).

        Each folder is entered from its parent's descriptor and no symlink is
        followed, so a walk never leaves the root; an entry that changes
        while it is walked is left out.
        """
        with self._open_root() as root:
            yield from walk(root, (), skip, everything, self._private_part)
