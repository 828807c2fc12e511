"""The ``ioh`` command: run, resume, list and show runs, decide approvals, doctor, the demo.

:func:`main` parses the arguments (:mod:`._parser`), then imports the module
whose function the chosen command names and calls it, so ``ioh --help``
costs little more than ``argparse``. Errors are one line on stderr and a
non-zero exit; ``--debug`` shows the traceback instead. The exit statuses
and the ``--store`` location every command shares are here.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Sequence

# typing costs milliseconds to import, and `ioh --help` none of it: type checkers take
# this name as true.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from pathlib import Path

    from rich.console import Console

__all__ = ["main"]

DEFAULT_STORE = ".ioh/runs.db"
"""Where runs are kept unless ``--store`` says otherwise, from the current folder (text:
``--store`` converts it, and ``ioh --help`` need not load pathlib)."""
EXIT_ERROR = 2
EXIT_NOT_VERIFIED = 1
EXIT_AWAITING = 3
EXIT_INTERRUPTED = 130
"""Ctrl-C (SIGINT): 128 + 2; SIGTERM gives 128 + 15 = 143."""


def store_location(text: str) -> Path | str:
    """``--store``'s value: a SQLite file's path, or as given what is written as a URL or a
    connection string (``Store.open`` opens a PostgreSQL URL and refuses the others)."""
    from pathlib import Path

    from io_harness._urls import looks_like_connection_string

    return text if "://" in text or looks_like_connection_string(text) else Path(text)


def store_missing(location: Path | str) -> bool:
    """Whether ``location`` names a SQLite file that does not exist (nothing stored yet).

    A database URL is never missing: opening it says whether it can be reached.
    """
    from pathlib import Path

    return isinstance(location, Path) and not location.exists()


def _handler(name: str) -> Callable[[argparse.Namespace, Console], int]:
    """The function a command's ``handler`` names (``module:function`` in this package)."""
    module, function = name.split(":")
    handler: Callable[[argparse.Namespace, Console], int]
    handler = getattr(importlib.import_module(f"io_harness.cli.{module}"), function)
    return handler


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``ioh``; returns the exit status.

    Ctrl-C and SIGTERM interrupt any command; a run being driven keeps its
    committed steps and is named with the ``ioh resume`` that continues it.
    The status is then 128 + the signal's number (130, 143). A closed stdout
    (``ioh ... | head -1``) stops the printing quietly, never the command.
    """
    from io_harness.cli._parser import ioh_parser

    args = ioh_parser().parse_args(argv)
    from io_harness.cli._signals import sigterm_interrupts
    from io_harness.cli._text import PipeConsole, escape
    from io_harness.cli._words import (
        for_the_shell,
        interrupted_line,
        interrupted_status,
        store_hint,
    )
    from io_harness.errors import HarnessError

    console = PipeConsole(highlight=False)
    errors = PipeConsole(stderr=True, highlight=False)
    hint = store_hint(getattr(args, "store", None))
    with sigterm_interrupts():
        try:
            return int(_handler(args.handler)(args, console))
        except HarnessError as exc:
            if args.debug:
                raise
            said = for_the_shell(exc, hint)
            errors.print(f"[red]error:[/] {escape(said)}", markup=True, soft_wrap=True)
            return EXIT_ERROR
        except KeyboardInterrupt as exc:
            errors.print(escape(interrupted_line(exc, hint)), soft_wrap=True)
            return interrupted_status(exc)
        except Exception as exc:  # a defect of ours: still one line, the traceback on request
            if args.debug:
                raise
            errors.print(
                f"[red]error:[/] internal error: {escape(f'{type(exc).__name__}: {exc}')} "
                "(run with --debug for the traceback)",
                markup=True,
                soft_wrap=True,
            )
            return EXIT_ERROR


def entry() -> None:
    """The console script: exits with :func:`main`'s status."""
    sys.exit(main())
