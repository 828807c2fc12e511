"""Files that run code later, kept as they were across a command.

A ``.git`` folder (its ``config``, ``commondir``, hooks, ``info/``, a
submodule's or worktree's), a shell's start-up file or an editor's task file
(the policy's :data:`~io_harness.policy._mandatory.RUNS_CODE_LATER`, at any
depth) does nothing while a command runs and runs code on the host the next
time a person uses git, a shell or the editor there. The agent's own writes to
them are denied by the policy; this module keeps a command from changing them.

Before a command, :meth:`CodeLater.scan` finds every such entry under the
folders the command may write and keeps what it holds (for a ``.git`` folder,
the files git executes or is redirected by). Backends that can bind a path
read-only bind each entry found (:meth:`CodeLater.existing`), so the command
can neither change nor move it. None can stop a command from making a new one
(a ``.bashrc`` where there was none, a ``.git`` in a folder that had none), and
some backends cannot bind at all: after the command, :meth:`CodeLater.undo`
removes every entry that appeared, puts back every file that changed or went,
and says what it undid. Folders no walk enters (``node_modules``, ``.venv``,
``__pycache__``) are not searched.
"""

from __future__ import annotations

import os
import stat
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

from io_harness._confined import SKIPPED_DIRS, Folder, PathRefused, Workspace, same_name
from io_harness.policy._mandatory import RUNS_CODE_LATER

__all__ = ["CodeLater"]

_GIT_CODE = frozenset({"config", "config.worktree", "commondir", "gitdir"})
"""Files of a ``.git`` folder git reads its programs and its other folders from."""
_GIT_CODE_FOLDERS = frozenset({"hooks", "info"})
"""Folders of a ``.git`` folder (or a submodule's, a worktree's) whose every file counts."""
_GIT_DATA = frozenset({"objects", "refs", "logs", "lfs"})
"""Folders of a ``.git`` folder that hold data, not code: not kept (they can be huge)."""
_KEPT_BYTES = 1024 * 1024
_NAMED = frozenset(entry for entry in RUNS_CODE_LATER if "/" not in entry)
"""Entries that are one name (``.git``, ``.bashrc``), wherever they lie."""
_INSIDE: dict[str, frozenset[str]] = {
    folder: frozenset(e.split("/")[1] for e in RUNS_CODE_LATER if e.startswith(folder + "/"))
    for folder in {e.split("/")[0] for e in RUNS_CODE_LATER if "/" in e}
}
"""Entries that are a name in a folder of a name (``.vscode/tasks.json``), by the folder."""
"""The most of one file kept to put back; a larger one is kept by its size and identity."""

FileState = tuple[int, bytes | None]
"""A kept file: its mode, and its bytes (``None`` when it was larger than kept)."""


@dataclass(frozen=True, slots=True)
class _Entry:
    """One entry that runs code later, as it was: its kind, its identity, its files."""

    kind: str
    identity: tuple[int, int]
    files: dict[str, FileState]
    """For a file: ``{"": its state}``; for a folder: each code file by its path in it."""


def _is_git_code(rel: str) -> bool:
    parts = rel.split("/")
    return parts[-1] in _GIT_CODE or any(part in _GIT_CODE_FOLDERS for part in parts[:-1])


def _state(handle_mode: int, data: bytes) -> FileState:
    return stat.S_IMODE(handle_mode), data if len(data) <= _KEPT_BYTES else None


class CodeLater:
    """The entries that run code later under one folder a command may write, as they were."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._workspace = Workspace(root, called="the command's folder")
        self._kept = self._scan()

    @classmethod
    def scan(cls, root: Path) -> CodeLater:
        """Find and keep every entry under ``root`` (one that cannot be read is left out)."""
        return cls(root)

    def existing(self) -> list[Path]:
        """Where each entry found lies: what a backend binds read-only for the command."""
        return [self.root / rel for rel in sorted(self._kept)]

    def undo(self) -> tuple[str, ...]:
        """Undo what the command did to entries that run code later; what was undone, each
        one line for the command's observation and trace."""
        undone: list[str] = []
        now = self._scan()
        for rel in sorted(now.keys() - self._kept.keys()):
            self._remove(rel)
            undone.append(f"{rel} (made by the command): removed")
        for rel, was in sorted(self._kept.items()):
            undone += self._put_back(rel, was, now.get(rel))
        return tuple(undone)

    # --- finding -----------------------------------------------------------------------

    def _scan(self) -> dict[str, _Entry]:
        found: dict[str, _Entry] = {}
        try:
            with Folder.open_root(self.root) as root:
                self._scan_folder(root, (), found)
        except OSError:
            pass  # the folder is gone or unreadable: nothing in it can be kept
        return found

    def _scan_folder(
        self, folder: Folder, prefix: tuple[str, ...], found: dict[str, _Entry]
    ) -> None:
        try:
            names = folder.names()
        except OSError:
            return
        inside = _INSIDE.get(same_name(prefix[-1]), frozenset()) if prefix else frozenset()
        for name, kind in names:
            rel = "/".join((*prefix, name))
            folded = same_name(name)
            # The names compared as the policy compares them (protected_entry), one at a
            # time: a scan meets every folder of the workspace.
            if folded in _NAMED or folded in inside:
                entry = self._entry(folder, name, rel, kind)
                if entry is not None:
                    found[rel] = entry
            elif kind == "dir" and name not in SKIPPED_DIRS:
                try:
                    inner = folder.open_dir(name)
                except OSError:
                    continue
                with inner:
                    self._scan_folder(inner, (*prefix, name), found)

    def _entry(self, folder: Folder, name: str, rel: str, kind: str) -> _Entry | None:
        info = folder.lstat(name)
        if info is None:
            return None
        identity = (info.st_dev, info.st_ino)
        if kind == "dir":
            return _Entry(kind, identity, self._git_files(rel))
        if kind != "file":
            return _Entry(kind, identity, {})
        try:
            with self._workspace.open(rel) as handle:
                return _Entry(
                    kind, identity, {"": _state(info.st_mode, handle.read(_KEPT_BYTES + 1))}
                )
        except (PathRefused, OSError):
            return _Entry("other", identity, {})

    def _git_files(self, rel: str) -> dict[str, FileState]:
        """The code files of the folder ``rel`` (a ``.git``), by their paths in it."""
        files: dict[str, FileState] = {}
        try:
            folder = Workspace(self.root / rel, called=rel, within=self._workspace)
            for found in folder.walk(_GIT_DATA):
                if not _is_git_code(found.rel):
                    continue
                with found.open() as handle:
                    mode = os.fstat(handle.fileno()).st_mode
                    files[found.rel] = _state(mode, handle.read(_KEPT_BYTES + 1))
        except (PathRefused, OSError):
            pass  # changed while it was read: what was read is kept
        return files

    # --- undoing -----------------------------------------------------------------------

    def _remove(self, rel: str) -> None:
        # A folder on the way that changed too is left: the next command's check sees it.
        with suppress(PathRefused, OSError):
            self._workspace.remove(rel)

    def _put_back(self, rel: str, was: _Entry, now: _Entry | None) -> list[str]:
        """Put the entry ``rel`` back as it ``was``; what was done, if anything."""
        if now is not None and now.identity == was.identity and now.kind == was.kind:
            return self._put_back_files(rel, was, now)
        if now is not None:
            self._remove(rel)
        moved = self._moved_back(rel, was)
        if moved is not None:
            back = self._scan().get(rel)
            undone = [f"{rel} (moved away to {moved} by the command): moved back"]
            return undone + (self._put_back_files(rel, was, back) if back is not None else [])
        if was.kind in ("file", "dir"):
            self._write_all(rel, was)
            how = "replaced" if now is not None else "removed"
            return [f"{rel} ({how} by the command): what runs code in it was put back"]
        return []

    def _put_back_files(self, rel: str, was: _Entry, now: _Entry) -> list[str]:
        undone = []
        for name in sorted(now.files.keys() - was.files.keys()):
            self._remove(f"{rel}/{name}")
            undone.append(f"{rel}/{name} (made by the command): removed")
        for name, state in sorted(was.files.items()):
            if now.files.get(name) != state:
                self._write(f"{rel}/{name}" if name else rel, state)
                undone.append(f"{rel}/{name}".rstrip("/") + " (changed by the command): put back")
        return undone

    def _write_all(self, rel: str, was: _Entry) -> None:
        for name, state in was.files.items():
            self._write(f"{rel}/{name}" if name else rel, state)

    def _write(self, rel: str, state: FileState) -> None:
        mode, data = state
        if data is None:
            return  # larger than was kept: named in the undo, not rewritten
        try:
            if self._workspace.lstat(rel) is not None:
                self._workspace.remove(rel)
            self._workspace.write(rel, data, mode=mode)
        except (PathRefused, OSError):
            pass  # a folder on the way is a link or a file now: the check names the entry

    def _moved_back(self, rel: str, was: _Entry) -> str | None:
        """Rename the entry back if the command moved it within its folder; its new name."""
        parent, _, name = rel.rpartition("/")
        try:
            with self._workspace.folder(parent or ".") as folder:
                for other, _kind in folder.names():
                    info = folder.lstat(other)
                    if info is not None and (info.st_dev, info.st_ino) == was.identity:
                        folder.rename(other, name)
                        return f"{parent}/{other}" if parent else other
        except (PathRefused, OSError):
            pass
        return None
