"""Text from a run, made safe to print (no markup, no terminal control sequences), and printed
wrapped at a terminal, whole elsewhere, by a console that outlives its reader."""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable

from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.markup import escape as _escape_markup
from rich.measure import Measurement

__all__ = ["Natural", "PipeConsole", "escape", "say", "shown"]

_UNBOUNDED = 1 << 16
"""Columns a renderable may take where nothing wraps it (a file, a pipe)."""

# C0 controls but tab and newline, DEL, and the C1 controls (``\x9b`` is a CSI too).
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def shown(text: str) -> str:
    """``text`` with each control character but tab and newline written as ``\\xNN``.

    What a run stored (the model's arguments, a command's output, a goal, a
    diff waiting for approval) is shown, never obeyed: an escape sequence in it
    would otherwise clear the screen, retitle the terminal or erase the lines
    around it, hiding them from the person reading.
    """
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def escape(text: str) -> str:
    """``text`` for ``Text.from_markup``: markup escaped, control characters :func:`shown`."""
    return _escape_markup(shown(text))


def say(console: Console, *objects: RenderableType) -> None:
    """Print: at a terminal, wrapped to its width; elsewhere (a file, a pipe), each line whole.

    A line a program reads, or a person copies from a log, is worth more whole
    than folded at a width no one chose.
    """
    console.print(*objects, soft_wrap=not console.is_terminal)


class Natural:
    """A renderable that lays itself out to its width (a table) at its natural width when
    not at a terminal, so a pipe or a file gets its rows whole, not folded at 80 columns."""

    def __init__(self, inner: RenderableType) -> None:
        self.inner = inner

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if console.is_terminal:
            yield self.inner
            return
        wide = options.update_width(_UNBOUNDED)
        width = Measurement.get(console, wide, self.inner).maximum
        yield from console.render(self.inner, wide.update_width(width))


class PipeConsole(Console):
    """A console whose reader may go away (``ioh run ... | head -1``): then it prints no more.

    Rich's own answer to a closed pipe is to exit at once, from whatever code
    printed, which would leave a run ``running`` with no outcome. This one
    drops what it prints from then on, points its stream at ``os.devnull``
    (so the interpreter's last flush does not fail either), and calls
    :attr:`on_closed` once, so the caller can say so elsewhere; the run it
    reports goes on to its outcome.
    """

    closed = False
    """Whether the reader went away."""
    on_closed: Callable[[], None] | None = None
    """Called once, when the reader goes away."""

    def on_broken_pipe(self) -> None:
        """Stop printing, quietly: the reader is gone, the work is not done."""
        self.quiet = True
        if self.closed:
            return
        self.closed = True
        with contextlib.suppress(OSError, ValueError):  # a stream with no descriptor
            fd = self.file.fileno()
            devnull = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(devnull, fd)
            finally:
                os.close(devnull)
        if self.on_closed is not None:
            self.on_closed()
