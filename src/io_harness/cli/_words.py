"""The library's words as the command line says them, and how ``ioh`` says it was interrupted.

Errors raised by the library are worded for Python callers (``pass api_key=``,
``use resume()``); ``ioh`` prints them with the flag, variable or command a
person at a shell uses instead, with the run's real id where the message
names one.
"""

from __future__ import annotations

import ast
import functools
import re
import shlex
import signal
from collections.abc import Callable
from pathlib import Path

from io_harness.cli import DEFAULT_STORE

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


def _literal(quoted: str) -> str:
    """The string a ``repr`` in a message stands for."""
    try:
        value = ast.literal_eval(quoted)
    except (ValueError, SyntaxError):
        return quoted[1:-1]
    return value if isinstance(value, str) else quoted[1:-1]


_REPR = r"(?P<id>'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")"
"""A Python ``repr`` of a string, as a message quotes a run id."""

_Rewrite = Callable[["re.Match[str]", str], str]

_REWRITES: tuple[tuple[re.Pattern[str], _Rewrite], ...] = (
    (
        re.compile(r"pass api_key= or set (\w+)"),
        lambda m, _hint: f"set {m[1]}",
    ),
    (
        re.compile(r"pass model= or set (\w+)"),
        lambda m, _hint: f"name one in the provider spec (KIND:MODEL) or set {m[1]}",
    ),
    (
        re.compile(r"pass base_url= or set (\w+)"),
        lambda m, _hint: f"set {m[1]}",
    ),
    (
        re.compile(r"\(check base_url= or (\w+)\)"),
        lambda m, _hint: f"(check {m[1]})",
    ),
    (
        re.compile(
            rf"a run with id {_REPR} is already in the store; use resume\(\) to continue it"
        ),
        lambda m, hint: (
            f"a run with id {m['id']} is already in the store; "
            f"{resume_command(_literal(m['id']), hint)} continues it, or give another --run-id"
        ),
    ),
    (
        re.compile(
            rf"run {_REPR} awaits a decision on (?P<what>.*?) \(request (?P<req>\S+)\); "
            r"pass decision= or an approver \(ioh approve / ioh deny\)"
        ),
        lambda m, hint: (
            f"run {m['id']} awaits a decision on {m['what']} (request {m['req']}); "
            f"decide it with ioh approve {shlex.quote(_literal(m['id']))}{hint} or "
            f"ioh deny {shlex.quote(_literal(m['id']))}{hint} --reason TEXT, "
            "or resume with --approve ask|deny|approve-all"
        ),
    ),
)


def for_the_shell(message: str, hint: str = "") -> str:
    """``message`` with the Python callers' words replaced by a shell user's.

    ``hint`` (:func:`store_hint`) follows each ``ioh`` command suggested.
    """
    for pattern, rewrite in _REWRITES:
        message = pattern.sub(functools.partial(_apply, rewrite, hint), message)
    return message


def store_hint(store: Path | str | None) -> str:
    """`` --store LOCATION`` for a command suggested about a store other than the default."""
    return "" if store is None or store == DEFAULT_STORE else f" --store {store}"


def _apply(rewrite: _Rewrite, hint: str, match: re.Match[str]) -> str:
    return rewrite(match, hint)
