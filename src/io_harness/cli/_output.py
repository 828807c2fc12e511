"""Output a program reads (``--json``, ``--csv``): written as it is, whatever the console."""

from __future__ import annotations

from rich.console import Console

from io_harness.cli._text import PipeConsole

__all__ = ["write_out"]


def write_out(console: Console, text: str) -> None:
    """``text`` on the console's stream as it is: no markup, wrapping, highlighting or tab
    expansion, which a console's ``print`` would apply. A reader that went away (``| head``)
    stops it quietly, as it stops printing."""
    try:
        console.file.write(text)
        console.file.flush()
    except BrokenPipeError:
        if isinstance(console, PipeConsole):
            console.on_broken_pipe()
