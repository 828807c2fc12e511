"""Copying a sandbox's results back: only regular files the policy lets the agent write."""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["CopyReport", "copy_back"]


@dataclass
class CopyReport:
    """What :func:`copy_back` copied, and what it refused and why."""

    copied: list[str] = field(default_factory=list)
    refused: list[tuple[str, str]] = field(default_factory=list)


def copy_back(
    workdir: Path,
    dest: Path,
    files: Iterable[str],
    allowed: Callable[[str], bool],
) -> CopyReport:
    """Copy each of ``files`` (relative to ``workdir``) to the same place under ``dest``.

    A file is copied only when ``allowed(path)`` says the agent may write that
    path, the path stays inside both folders, and the source is a regular file
    (a symlink the command made could otherwise read anything the harness can).
    Each refusal is reported with its reason; none raises.
    """
    # Imported here: the tools import this package's types, and one confinement rule serves both.
    from io_harness.tools._workspace import PathRefused, Workspace

    report = CopyReport()
    source_root, dest_root = Workspace(Path(workdir)), Workspace(Path(dest))
    for name in files:
        try:
            source = source_root.resolve(name)
            target = dest_root.resolve(name)
        except PathRefused as exc:
            report.refused.append((name, str(exc)))
            continue
        relative = dest_root.relative(target)
        if not allowed(relative):
            report.refused.append((name, "the policy does not let the agent write it"))
            continue
        try:
            mode = os.lstat(Path(workdir) / name).st_mode
        except OSError as exc:
            report.refused.append((name, f"cannot read it: {exc.strerror or exc}"))
            continue
        if not stat.S_ISREG(mode):
            report.refused.append((name, "not a regular file"))
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
        report.copied.append(relative)
    return report
