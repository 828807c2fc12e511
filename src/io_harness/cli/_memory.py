"""``ioh memory``: list a workspace's remembered notes, and ``ioh memory forget KEY``.

The workspace is ``--workspace DIR``, ``--contract FILE``'s root (as a run of it
keys its memory), or the current folder; every line says which, and why.
"""

from __future__ import annotations

import argparse
import time

from rich.console import Console

from io_harness.cli import store_missing
from io_harness.cli._scope import scope_of
from io_harness.cli._text import escape
from io_harness.store import Store
from io_harness.store._memory import DEFAULT_MEMORY_LIMITS, MemoryEntry

__all__ = ["cmd_forget", "cmd_memory", "render_memory"]

EXIT_NOT_REMEMBERED = 1


def _scope(args: argparse.Namespace) -> tuple[str, str]:
    """The workspace's canonical root (memory is kept under it, as a run keys it) and the
    words that say which folder it is and why."""
    scope = scope_of(args.workspace, args.contract, "--workspace DIR")
    workspace = str(scope.folder.resolve())
    return workspace, f"workspace {escape(workspace)} ({escape(scope.why)})"


def cmd_memory(args: argparse.Namespace, console: Console) -> int:
    workspace, said = _scope(args)
    if store_missing(args.store):
        console.print(
            f"no memory yet (no store at {escape(str(args.store))}); {said}", soft_wrap=True
        )
        return 0
    with Store.open(args.store) as store:
        entries = store.memory_entries(workspace)
    console.print(render_memory(workspace, entries, said), soft_wrap=True)
    return 0


def cmd_forget(args: argparse.Namespace, console: Console) -> int:
    workspace, said = _scope(args)
    if store_missing(args.store):
        console.print(
            f"no memory yet (no store at {escape(str(args.store))}); {said}", soft_wrap=True
        )
        return EXIT_NOT_REMEMBERED
    with Store.open(args.store) as store:
        forgotten = store.forget(workspace, args.key)
    if forgotten:
        console.print(f"forgot {escape(args.key)} ({said})", soft_wrap=True)
        return 0
    console.print(f"{escape(args.key)} is not remembered in {said}", soft_wrap=True)
    return EXIT_NOT_REMEMBERED


def render_memory(workspace: str, entries: list[MemoryEntry], said: str = "") -> str:
    """What ``ioh memory`` prints: the workspace (``said``: its markup, with why it is the
    one), its caps' use, each note oldest first."""
    said = said or f"workspace {escape(workspace)}"
    if not entries:
        return f"no memory for {said}"
    limits = DEFAULT_MEMORY_LIMITS
    used = sum(len(entry.value) for entry in entries)
    lines = [
        f"memory of {said}: {len(entries)} of {limits.entries} "
        f"entries, {used:,} of {limits.total_chars:,} characters (oldest first)"
    ]
    for entry in entries:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(entry.updated_at))
        first, *rest = entry.value.split("\n")
        lines.append(f"[bold]{escape(entry.key)}[/]  [dim]{when}[/]  {escape(first)}")
        lines += [f"    {escape(line)}" for line in rest]
    return "\n".join(lines)
