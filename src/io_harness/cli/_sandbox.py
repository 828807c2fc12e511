"""How ``ioh`` chooses and shows sandboxes: ``--no-sandbox``, ``ioh doctor``, the trace's lines."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from io_harness.cli._text import Natural, escape, markup, say, shown
from io_harness.loop import DEFAULT_SANDBOX, NO_SANDBOX, SandboxChoice
from io_harness.sandbox import BackendReport, SandboxConfig, SandboxError, probe, select
from io_harness.sandbox._cgroups import cgroups_report

if TYPE_CHECKING:
    from io_harness.store import SandboxEventTrace, Trace

__all__ = [
    "cap_lines",
    "cmd_doctor",
    "render_doctor",
    "sandbox_choice",
    "sandbox_counts",
    "sandbox_line",
]


def sandbox_choice(args: argparse.Namespace, console: Console) -> SandboxChoice:
    """``NO_SANDBOX`` under ``--no-sandbox`` (said loudly), else the default selection."""
    if not args.no_sandbox:
        return DEFAULT_SANDBOX
    console.print(
        "[bold yellow]warning:[/] --no-sandbox: the criterion's commands and the agent's "
        "exec calls run directly on this machine, with no sandbox: no caps on memory or "
        "processes, the network open, every file you can write writable",
        soft_wrap=True,
    )
    return NO_SANDBOX


def cmd_doctor(args: argparse.Namespace, console: Console) -> int:
    """``ioh doctor``: every backend this machine offers, and which one a run gets."""
    caps = cgroups_report() if sys.platform == "linux" else ""
    say(console, render_doctor(probe(), _default_backend(), caps))
    if args.contract is not None:
        from io_harness.cli._mcp import render_servers

        console.print(render_servers(args.contract), soft_wrap=True)
    return 0


def _default_backend() -> str | SandboxError:
    try:
        chosen = select(SandboxConfig())
        passed = getattr(chosen, "selection", ())
        return chosen.name + (f" (passed by: {'; '.join(passed)})" if passed else "")
    except SandboxError as exc:
        return exc


def sandbox_line(trace: Trace) -> str:
    """The header line naming where the run's commands ran, and why."""
    record = trace.sandbox
    if record is None:
        return "sandbox: [dim]not recorded (a run stored before sandboxes were)[/]"
    if record.backend == "none":
        return f"sandbox: [bold yellow]none[/] ({escape(record.why)})"
    return f"sandbox: [bold]{escape(record.backend)}[/] ({escape(record.why)})"


def cap_lines(rows: Sequence[SandboxEventTrace]) -> list[str]:
    """A step's cap hits: which command, which cap."""
    lines = []
    argv: dict[str, str] = {}
    for row in rows:
        detail = row.detail
        if row.kind == "exec" and isinstance(detail.get("argv"), list):
            argv[row.call_id] = " ".join(str(a) for a in detail["argv"])
        if row.kind == "cap_hit":
            cap = detail.get("cap") or json.dumps(detail)
            by = f"exec call {row.call_id}" if row.call_id else "the check"
            command = argv.get(row.call_id, "")
            lines.append(
                f"  [red]cap hit:[/] {escape(str(cap))} ({escape(by)} in {escape(row.backend)})"
                + (f": {_first_line(command)}" if command else "")
            )
    return lines


def sandbox_counts(rows: Sequence[SandboxEventTrace]) -> str:
    """The run's sandbox events counted by kind, in the order they first happened."""
    counts: dict[str, int] = {}
    for row in rows:
        counts[row.kind] = counts.get(row.kind, 0) + 1
    listed = ", ".join(f"{n} {escape(kind)}" for kind, n in counts.items())
    colour = "red" if "cap_hit" in counts else "dim"
    return f"[{colour}]sandbox events: {listed}[/]"


def render_doctor(
    reports: Sequence[BackendReport], default: str | SandboxError, caps: str = ""
) -> RenderableType:
    """What ``ioh doctor`` prints: every backend, how caps are enforced, and what a run gets.

    ``default`` is the backend a default run would get, with what select passed
    by, or the error it raised; ``caps`` says which cgroups the caps use.
    """
    table = Table(title="sandbox backends", title_justify="left")
    table.add_column("backend", no_wrap=True)
    table.add_column("available", no_wrap=True)
    table.add_column("denies network", no_wrap=True)
    table.add_column("why", overflow="fold")
    table.add_column("disk cap", overflow="fold")
    for report in reports:
        table.add_row(
            escape(report.name),
            "[green]yes[/]" if report.available else "[red]no[/]",
            "yes" if report.denies_network else "[yellow]no[/]",
            escape(report.reason),
            escape(report.disk_cap),
        )
    if isinstance(default, SandboxError):
        verdict = markup(
            "[red]a run with the default configuration gets no sandbox:[/] "
            f"{escape(str(default))}\n(it fails before its first model call; a "
            f"{escape('[sandbox]')} table can ask for less, or ioh run --no-sandbox runs "
            "without one)"
        )
    else:
        verdict = markup(f"a run with the default configuration gets: [bold]{escape(default)}[/]")
    if caps:
        return Group(Natural(table), Text(f"caps: {caps}"), verdict)
    return Group(Natural(table), verdict)


def _first_line(text: str, limit: int = 70) -> str:
    visible = shown(text).strip()  # escaped first: only a newline ends the line
    first = visible.split("\n", 1)[0]
    return escape(first[:limit] + (" ..." if len(first) > limit else ""))
