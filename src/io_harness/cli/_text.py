"""Text from a run, made safe to print (no markup, no emoji codes, no terminal control
sequences), and printed wrapped at a terminal, whole elsewhere, by a console that outlives
its reader."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from typing import Any

from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.markup import escape as _escape_markup
from rich.measure import Measurement
from rich.text import Text

from io_harness._terminal import shown

__all__ = ["Hanging", "Natural", "PipeConsole", "escape", "markup", "say", "shown"]

_UNBOUNDED = 1 << 16
"""Columns a renderable may take where nothing wraps it (a file, a pipe)."""


def escape(text: str, *, one_line: bool = False) -> str:
    """``text`` for :func:`markup`: markup escaped, and :func:`shown` (``one_line``: tab and
    newline escaped too, for a value that must not break its line)."""
    return _escape_markup(shown(text, one_line=one_line))


def markup(text: str) -> Text:
    """``ioh``'s markup as rich text; ``:name:`` is left as written, never made an emoji, so a
    run's ``:white_check_mark:`` cannot pass for a mark of ``ioh``'s."""
    return Text.from_markup(text, emoji=False)


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


class Hanging:
    """Lines of ``ioh``'s markup that, at a terminal, wrap under their own text: a long
    line's continuations are indented past the line's indent, so a step's call or check
    reads as one item, not as text from column 0. Elsewhere each line is whole."""

    HANG = 4
    """Columns a continuation is indented past its line's own indent."""

    def __init__(self, text: str) -> None:
        self.lines = text.split("\n")

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if not console.is_terminal or options.no_wrap:
            yield markup("\n".join(self.lines))
            return
        width = options.max_width
        for line in self.lines:
            text = markup(line)
            if text.cell_len <= width:
                yield text
                continue
            indent = len(text.plain) - len(text.plain.lstrip(" "))
            hang = min(indent + self.HANG, width // 2)
            # Wrapped narrower by the hang, so every piece fits once indented.
            first, *rest = text.wrap(console, width - hang)
            yield first
            for piece in rest:
                yield Text(" " * hang) + piece


class PipeConsole(Console):
    """A console whose reader may go away (``ioh run ... | head -1``): then it prints no more.

    Rich's own answer to a closed pipe is to exit at once, from whatever code
    printed, which would leave a run ``running`` with no outcome. This one
    drops what it prints from then on, points its stream at ``os.devnull``
    (so the interpreter's last flush does not fail either), and calls
    :attr:`on_closed` once, so the caller can say so elsewhere; the run it
    reports goes on to its outcome. Like :func:`markup`, it makes no emoji of ``:name:``.
    """

    closed = False
    """Whether the reader went away."""
    on_closed: Callable[[], None] | None = None
    """Called once, when the reader goes away."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("emoji", False)
        super().__init__(*args, **kwargs)

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
