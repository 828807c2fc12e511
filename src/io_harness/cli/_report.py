"""``ioh report RUN_ID [-o FILE]``: one run's trace as a self-contained HTML page."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from rich.console import Console

from io_harness._report import report_of, write_html
from io_harness.cli import store_missing
from io_harness.cli._text import escape, say
from io_harness.errors import ConfigError
from io_harness.store import Store

__all__ = ["cmd_report", "default_output"]

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def default_output(run_id: str) -> Path:
    """``report-RUN_ID.html`` in the current folder, any character a file name should not
    hold (a ``/``, a space) written as ``_``."""
    return Path(f"report-{_UNSAFE.sub('_', run_id)}.html")


def cmd_report(args: argparse.Namespace, console: Console) -> int:
    """Write the report of ``args.run_id`` (a tree's root: every agent) and say where.

    A store whose text does not all decode still gives a report; a warning
    says which row, as ``ioh show`` does.
    """
    if store_missing(args.store):
        raise ConfigError(f"no store at {args.store}; run something first or give --store")
    with Store.open(args.store) as store:
        html, warnings = report_of(store, args.run_id)
    written = write_html(html, args.output or default_output(args.run_id))
    for warning in warnings:
        say(console, f"warning: {escape(warning)}; its bad bytes show as \ufffd")
    say(console, f"report of run {escape(args.run_id)} written to {escape(str(written))}")
    return 0
