"""``ioh memory``: list a workspace's remembered notes, and ``ioh memory forget KEY``."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from rich.console import Console

from io_harness.cli import store_missing
from io_harness.cli._text import escape
from io_harness.store import Store
from io_harness.store._memory import DEFAULT_MEMORY_LIMITS, MemoryEntry

__all__ = ["cmd_forget", "cmd_memory", "render_memory"]

EXIT_NOT_REMEMBERED = 1


def _scope(args: argparse.Namespace) -> str:
    """The workspace's canonical root: memory is kept under it."""
    return str(Path(args.workspace).resolve())


def cmd_memory(args: argparse.Namespace, console: Console) -> int:
    workspace = _scope(args)
    if store_missing(args.store):
        console.print(f"no memory yet (no store at {escape(str(args.store))})", soft_wrap=True)
        return 0
    with Store.open(args.store) as store:
        entries = store.memory_entries(workspace)
    console.print(render_memory(workspace, entries), soft_wrap=True)
    return 0


def cmd_forget(args: argparse.Namespace, console: Console) -> int:
    workspace = _scope(args)
    if store_missing(args.store):
        console.print(f"no memory yet (no store at {escape(str(args.store))})", soft_wrap=True)
        return EXIT_NOT_REMEMBERED
    with Store.open(args.store) as store:
        forgotten = store.forget(workspace, args.key)
    if forgotten:
        console.print(f"forgot {escape(args.key)} (workspace {escape(workspace)})", soft_wrap=True)
        return 0
    console.print(
        f"{escape(args.key)} is not remembered in workspace {escape(workspace)}", soft_wrap=True
    )
    return EXIT_NOT_REMEMBERED


def render_memory(workspace: str, entries: list[MemoryEntry]) -> str:
    """What ``ioh memory`` prints: the workspace, its caps' use, each note oldest first."""
    if not entries:
        return f"no memory for workspace {escape(workspace)}"
    limits = DEFAULT_MEMORY_LIMITS
    used = sum(len(entry.value) for entry in entries)
    lines = [
        f"memory of workspace {escape(workspace)}: {len(entries)} of {limits.entries} "
        f"entries, {used:,} of {limits.total_chars:,} characters (oldest first)"
    ]
    for entry in entries:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(entry.updated_at))
        first, *rest = entry.value.split("\n")
        lines.append(f"[bold]{escape(entry.key)}[/]  [dim]{when}[/]  {escape(first)}")
        lines += [f"    {escape(line)}" for line in rest]
    return "\n".join(lines)
