"""``ioh memory``: list a workspace's remembered notes, and ``ioh memory forget KEY``."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from rich.console import Console

from io_harness.cli._text import escape
from io_harness.store import Store
from io_harness.store._memory import DEFAULT_MEMORY_LIMITS, MemoryEntry

__all__ = ["add_memory_commands", "render_memory"]

EXIT_NOT_REMEMBERED = 1


def add_memory_commands(commands: Any) -> None:
    """Add ``ioh memory [--workspace DIR]`` and ``ioh memory forget KEY`` to ``commands``.

    Both take ``--store`` (default ``.ioh/runs.db``) and ``--workspace``
    (default: the current folder), before or after ``forget``.
    """
    from io_harness.cli import DEFAULT_STORE  # here: the package imports this module

    memory = commands.add_parser(
        "memory", help="list the notes runs remembered in a workspace, or forget one"
    )
    _with_scope(memory, DEFAULT_STORE, DEFAULT_STORE, Path())
    memory.set_defaults(handler=_cmd_memory)
    what = memory.add_subparsers(dest="memory_command", metavar="WHAT")
    forget = what.add_parser("forget", help="forget one note")
    forget.add_argument("key", help="the note's key, as `ioh memory` lists it")
    # SUPPRESS: a value given before `forget` stands unless given again after it.
    _with_scope(forget, DEFAULT_STORE, argparse.SUPPRESS, argparse.SUPPRESS)
    forget.set_defaults(handler=_cmd_forget)


def _with_scope(sub: argparse.ArgumentParser, shown: Path, store: Any, workspace: Any) -> None:
    sub.add_argument("--store", type=Path, default=store, help=f"the run store (default: {shown})")
    sub.add_argument(
        "--workspace",
        type=Path,
        default=workspace,
        metavar="DIR",
        help="the workspace whose memory it is (default: the current folder)",
    )


def _scope(args: argparse.Namespace) -> str:
    """The workspace's canonical root: memory is kept under it."""
    return str(Path(args.workspace).resolve())


def _cmd_memory(args: argparse.Namespace, console: Console) -> int:
    workspace = _scope(args)
    if not args.store.exists():
        console.print(f"no memory yet (no store at {escape(str(args.store))})", soft_wrap=True)
        return 0
    with Store.open(args.store) as store:
        entries = store.memory_entries(workspace)
    console.print(render_memory(workspace, entries), soft_wrap=True)
    return 0


def _cmd_forget(args: argparse.Namespace, console: Console) -> int:
    workspace = _scope(args)
    if not args.store.exists():
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
