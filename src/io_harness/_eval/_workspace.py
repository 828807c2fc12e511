"""Each run of a suite in its own copy of its case's workspace, removed after the run.

Runs of one case run at once and change files: in one folder they would see
each other's edits, and the second run's check would judge the first run's
work. The copy is made in a scratch folder named for this process, so one a
killed ``ioh eval`` leaves behind is swept by the next.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator
from pathlib import Path

from io_harness._scratch import scratch_folder
from io_harness.contract import TaskContract

__all__ = ["NOT_COPIED", "own_copy"]

NOT_COPIED = ("__pycache__", ".pytest_cache", ".ioh")
"""Folders left out of a copy: caches, and the run store ``ioh`` keeps by default."""


@contextlib.contextmanager
def own_copy(contract: TaskContract) -> Iterator[TaskContract]:
    """``contract`` over a fresh copy of its workspace (its file's folder in file mode),
    for the block; the copy is removed after it.

    Symbolic links are copied as links. A skills folder inside the workspace is
    the copy's; one outside it is shared, as it is only read.
    """
    with scratch_folder("eval") as scratch:
        root = Path(scratch) / (contract.root.name or "workspace")
        if contract.root.is_dir():
            shutil.copytree(
                contract.root, root, symlinks=True, ignore=shutil.ignore_patterns(*NOT_COPIED)
            )
        else:  # a file contract whose folder the agent is to create
            root.mkdir()
        yield contract.model_copy(
            update={
                "root": root,
                "path": _moved(contract.path, contract.root, root),
                "skills": _moved(contract.skills, contract.root, root),
            }
        )


def _moved(path: Path | None, old_root: Path, new_root: Path) -> Path | None:
    """``path`` under ``new_root`` where it was under ``old_root``; elsewhere, as it is."""
    if path is None or not path.is_relative_to(old_root):
        return path
    return new_root / path.relative_to(old_root)
