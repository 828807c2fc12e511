"""The library's words as the command line says them, and how ``ioh`` says it was interrupted.

Errors raised by the library are worded for Python callers (``pass api_key=``,
``use resume()``); where that matters, an error also carries its shell wording
(``HarnessError.shell``: the variable, the ``ioh`` command with the run's real
id), which ``ioh`` prints instead.
"""

from __future__ import annotations

import shlex
import signal
from pathlib import Path

from io_harness._urls import without_password
from io_harness.cli import DEFAULT_STORE
from io_harness.errors import HarnessError

__all__ = [
    "RunInterrupted",
    "for_the_shell",
    "interrupt_signal",
    "interrupted_line",
    "interrupted_status",
    "resume_command",
    "store_hint",
]


class RunInterrupted(KeyboardInterrupt):
    """An interrupt while ``ioh`` drove a run: Ctrl-C (SIGINT) or SIGTERM, which ``signum``
    names; ``run_id`` is the run, once started."""

    def __init__(self, run_id: str | None, signum: int = signal.SIGINT) -> None:
        super().__init__(run_id)
        self.run_id = run_id
        self.signum = signum


def interrupt_signal(exc: KeyboardInterrupt) -> int:
    """The signal an interrupt came from: a plain :class:`KeyboardInterrupt` is Ctrl-C's."""
    return exc.signum if isinstance(exc, RunInterrupted) else signal.SIGINT


def interrupted_status(exc: KeyboardInterrupt) -> int:
    """``ioh``'s exit status after an interrupt, as a shell gives it: 128 + the signal's
    number (130 for Ctrl-C, 143 for SIGTERM)."""
    return 128 + interrupt_signal(exc)


def resume_command(run_id: str, hint: str = "") -> str:
    """``ioh resume RUN_ID`` for this run, quoted for a shell where it needs to be; ``hint``
    (:func:`store_hint`) follows it."""
    return f"ioh resume {shlex.quote(run_id)}{hint}"


def interrupted_line(exc: KeyboardInterrupt, hint: str = "") -> str:
    """What ``ioh`` prints on Ctrl-C or SIGTERM: the command that continues the run, when
    one started."""
    run_id = exc.run_id if isinstance(exc, RunInterrupted) else None
    signum = interrupt_signal(exc)
    said = "interrupted" if signum == signal.SIGINT else f"interrupted by {_name(signum)}"
    if run_id is None:
        return said
    return (
        f"{said}; the last committed step is kept "
        f"({resume_command(run_id, hint)} continues the run)"
    )


def _name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def for_the_shell(error: HarnessError, hint: str = "") -> str:
    """What ``ioh`` prints of a library error: its shell wording where it has one (the
    variable to set, the ``ioh`` command with the run's id), else its message.

    ``hint`` (:func:`store_hint`) follows each ``ioh`` command suggested.
    """
    if error.shell is None:
        return str(error)
    return error.shell.replace("{store}", hint)


def store_hint(store: Path | str | None) -> str:
    """`` --store LOCATION`` for a command suggested about a store other than the default;
    a database URL's password is left out (it is never printed)."""
    if store is None or str(store) == DEFAULT_STORE:
        return ""
    return f" --store {without_password(store) if isinstance(store, str) else store}"
