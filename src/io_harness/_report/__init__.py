"""The HTML report of a run: one self-contained page a person reads in a browser.

``render_report(store, run_id)`` gives the page as text and
``write_report(store, run_id, path)`` writes it; ``ioh report RUN_ID`` calls
the second. The page shows the run's summary, a timeline of its steps, each
message, each tool call with its arguments, result and file diff, every
verdict with its feedback, the gate's decisions and approvals, the sandbox,
MCP servers, memory and compaction, and, for a tree's root, every agent of
the tree, each in its own section. It needs no network: its style and script
are inline.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from io_harness.store import Store

__all__ = ["render_report", "write_report"]


def render_report(store: Store, run_id: str) -> str:
    """The HTML report of ``run_id`` (and, for an agent of a tree, of the agents below it).

    Reads the run through the store's public API. An unknown id is the
    store's :class:`~io_harness.ResumeError`; a damaged store (text that is
    not UTF-8) still gives a report, whose bad bytes show as U+FFFD and which
    says where they are.
    """
    return report_of(store, run_id)[0]


def write_report(store: Store, run_id: str, path: str | Path) -> Path:
    """Write the report of ``run_id`` to ``path`` (UTF-8), replacing it; return the path.

    Missing folders of ``path`` are made. The file is written whole or not at
    all: to a temporary file beside it, then renamed into place; a path that
    cannot be written is a :class:`~io_harness.ConfigError`.
    """
    return write_html(render_report(store, run_id), path)


def report_of(store: Store, run_id: str) -> tuple[str, list[str]]:
    """The report's HTML and its warnings: why parts of it were read leniently."""
    from io_harness import __version__
    from io_harness._report._gather import gather
    from io_harness._report._html import render_page
    from io_harness._report._page import page_of

    page = page_of(gather(store, run_id), __version__)
    return render_page(page), [view.agent.damaged for view in page.damaged if view.agent.damaged]


def write_html(html: str, path: str | Path) -> Path:
    """Write ``html`` to ``path`` as :func:`write_report` does."""
    from io_harness.errors import ConfigError

    target = Path(path)
    partial = target.with_name(f".{target.name}.partial")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        partial.write_text(html, encoding="utf-8")
        partial.replace(target)
    except OSError as exc:
        with contextlib.suppress(OSError):
            partial.unlink(missing_ok=True)
        raise ConfigError(f"cannot write the report to {target}: {exc}") from None
    return target
