"""Confinement of a path to a folder: the one rule tools, verification and the sandbox share.

Every path the agent gives a tool, every file a criterion names and every
file an isolated sub-agent brings back is resolved against its root here:
no absolute path, no ``..``, no symlink that leads out.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Iterator
from pathlib import Path, PurePosixPath

__all__ = ["MEMORY_PREFIX", "SKIPPED_DIRS", "PathRefused", "Workspace"]

MEMORY_PREFIX = "memory:"
"""The policy's targets for memory are ``memory:<key>`` (a write); no workspace path takes it."""

SKIPPED_DIRS = frozenset({".git", ".venv", "node_modules", "__pycache__"})
"""Folders that walks (grep, find) never enter: tool state, not the subject."""


class PathRefused(Exception):
    """A path the agent gave lies outside the workspace; the text says why."""


class Workspace:
    """The folder the agent works in; every path is checked against it on every call."""

    def __init__(
        self,
        root: Path,
        may_read: Callable[[str], bool] | None = None,
        *,
        called: str = "the workspace",
    ) -> None:
        self.root = root.resolve()
        self.called = called
        """What a refusal calls the folder (a skill's folder is confined the same way)."""
        self.may_read: Callable[[str], bool] = may_read or (lambda _rel: True)
        """Whether a walk (grep) may read a file, by its relative path; the gate answers."""

    def resolve(self, path: str) -> Path:
        """Return the real location of ``path`` (relative to the root) or refuse it.

        Refused: empty paths, absolute paths, any ``..`` component, and paths
        whose real location (after following symlinks) is outside the root.
        """
        if not path or "\x00" in path:
            raise PathRefused("the path is empty or holds a NUL character")
        try:
            os.fsencode(path)
        except UnicodeEncodeError:
            raise PathRefused(f"{path!r} is not a valid file name") from None
        pure = PurePosixPath(path.replace("\\", "/"))
        if pure.is_absolute() or Path(path).is_absolute():
            raise PathRefused(f"{path!r} is absolute; give a path relative to {self.called}")
        if ".." in pure.parts:
            raise PathRefused(f"{path!r} contains '..'; paths may not leave {self.called}")
        try:
            real = (self.root / pure).resolve()
            real.stat()
        except RuntimeError:  # Python before 3.13 reports a symlink loop this way
            raise PathRefused(f"{path!r} is a symlink loop") from None
        except FileNotFoundError:
            pass  # a file about to be created
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise PathRefused(f"{path!r} is a symlink loop") from None
        if not real.is_relative_to(self.root):
            raise PathRefused(f"{path!r} resolves outside {self.called} through a symlink")
        if MEMORY_PREFIX in str(real) and any(
            part.startswith(MEMORY_PREFIX) for part in real.relative_to(self.root).parts
        ):
            raise PathRefused(
                f"{path!r}: names beginning {MEMORY_PREFIX!r} are kept for the agent's memory "
                f"(the policy's {MEMORY_PREFIX}<key> targets); choose another name"
            )
        return real

    def relative(self, path: Path) -> str:
        """The workspace-relative spelling of a path under the root, with ``/``."""
        rel = path.relative_to(self.root).as_posix()
        return rel or "."

    def walk(self) -> Iterator[Path]:
        """Every regular file under the root, sorted, skipping :data:`SKIPPED_DIRS`.

        Symlinks are not followed, so a walk never leaves the root.
        """
        for dirpath, dirnames, filenames in os.walk(self.root, followlinks=False):
            dirnames[:] = sorted(d for d in dirnames if d not in SKIPPED_DIRS)
            base = Path(dirpath)
            for name in sorted(filenames):
                candidate = base / name
                if not candidate.is_symlink() and candidate.is_file():
                    yield candidate
