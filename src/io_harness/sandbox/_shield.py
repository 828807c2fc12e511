"""What a command may neither change nor see: files that run code later, the harness's own.

A :class:`Shield` is made for each command before it starts. It holds the
:class:`~io_harness.sandbox._code_later.CodeLater` of every folder the command
may write (bound read-only where the backend can, checked and undone after
the command everywhere) and the harness's own files a command must not reach:
the store's, named by the run in :func:`keeping_private`. A backend that can
hide a path (bubblewrap; Landlock and namespaces when the harness is root, in
the launcher's own mount namespace) covers each; one that cannot refuses to
start a command that could write one of them, since nothing would stop it
rewriting the run's own stored policy.
"""

from __future__ import annotations

import contextvars
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from io_harness.sandbox._code_later import CodeLater

__all__ = ["Shield", "keeping_private", "private_files"]

_PRIVATE: contextvars.ContextVar[tuple[Path, ...]] = contextvars.ContextVar(
    "ioh_private_files", default=()
)


@contextmanager
def keeping_private(paths: Sequence[Path]) -> Iterator[None]:
    """Within the block (a run, and the tasks it starts), no command reaches ``paths``."""
    token = _PRIVATE.set(tuple(Path(os.path.realpath(p)) for p in paths))
    try:
        yield
    finally:
        _PRIVATE.reset(token)


def private_files() -> tuple[Path, ...]:
    """The harness's own files no command of the current run may reach."""
    return _PRIVATE.get()


@dataclass(frozen=True, slots=True)
class Shield:
    """One command's protected entries and hidden files."""

    guards: tuple[CodeLater, ...] = ()
    hidden: tuple[Path, ...] = ()
    """The harness's own files that exist now (a store's), to cover for the command."""

    @classmethod
    def around(cls, writes: Sequence[Path]) -> Shield:
        """The shield of a command that may write ``writes`` (its workdir, its folders)."""
        guards = tuple(CodeLater.scan(folder) for folder in dict.fromkeys(writes))
        hidden = tuple(path for path in private_files() if os.path.lexists(path))
        return cls(guards, hidden)

    @property
    def kept(self) -> tuple[Path, ...]:
        """Every entry that runs code later, found where the command may write."""
        return tuple(path for guard in self.guards for path in guard.existing())

    def exposed(self, writes: Sequence[Path]) -> list[Path]:
        """The hidden files that lie in one of ``writes``: what an unhidden command could
        rewrite."""
        return [
            path for path in self.hidden if any(path.is_relative_to(folder) for folder in writes)
        ]

    def undo(self) -> tuple[str, ...]:
        """After the command: what it did to entries that run code later, undone and said."""
        return tuple(line for guard in self.guards for line in guard.undo())
