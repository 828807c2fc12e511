"""What ``ioh runs`` prints: one line a run, fitted to a terminal's width."""

from __future__ import annotations

import time
from collections.abc import Sequence

from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.text import Text

from io_harness.cli._text import shown
from io_harness.pricing import run_spend
from io_harness.store import RunSummary

__all__ = ["RunsListing", "render_runs"]

_RUNS_HEADER = ("run", "status", "steps", "tokens", "spend", "started")
_RIGHT_ALIGNED = frozenset({2, 3, 4})
_GOAL_MIN = 16
"""Below this many columns left for the goal, it gets a line of its own."""
_SHORTENED = (((1, 8), (4, 12)), ((0, 12),))
"""The cells cut (with an ellipsis) to fit a terminal, by column and the least each keeps:
status and spend first, the run id only if that is not enough."""
_COLOURS = {
    "success": "green",
    "running": "yellow",
    "awaiting": "yellow",
    "awaiting_approval": "yellow",
}


def render_runs(runs: list[RunSummary], currencies: dict[str, str | None]) -> RenderableType:
    """The listing ``ioh runs`` prints; ``currencies`` has each run's price table's currency
    (``None``: the run has none)."""
    if not runs:
        return Text("no runs in this store yet")
    return RunsListing(runs, currencies)


class RunsListing:
    """One line a run, the goal last; where the goal would not fit, it goes on a line below.

    At a terminal every line fits its width: when the cells alone are too wide,
    the longest status and spend are cut (with an ellipsis), then the run id.
    Elsewhere (a file, a pipe) each line is whole.
    """

    def __init__(self, runs: list[RunSummary], currencies: dict[str, str | None]) -> None:
        self.rows = [
            (
                tuple(
                    shown(cell, one_line=True)
                    for cell in (
                        summary.id,
                        summary.outcome or summary.status,
                        str(summary.steps),
                        f"{summary.tokens:,}",
                        run_spend(
                            summary.cost_micros, summary.unpriced_calls, currencies.get(summary.id)
                        ),
                        _when(summary.started_at),
                    )
                ),
                " ".join(shown(summary.goal).split()),
            )
            for summary in runs
        ]

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        widths = [
            max(len(title), *(len(cells[i]) for cells, _ in self.rows))
            for i, title in enumerate(_RUNS_HEADER)
        ]
        fit = console.is_terminal
        room = options.max_width - sum(widths) - 2 * len(widths)
        inline = room >= _GOAL_MIN or not fit
        if not inline:
            widths = _fitted(widths, options.max_width - 2 * (len(widths) - 1))
        header = self._line(_RUNS_HEADER, widths, style="bold")
        if inline:
            header.append("goal", style="bold")
        header.rstrip()
        yield header
        for cells, goal in self.rows:
            line = self._line(
                [_cut(cell, width) for cell, width in zip(cells, widths, strict=True)], widths
            )
            if inline:
                line.append(_cut(goal, room) if fit else goal)
                line.rstrip()
                yield line
            else:
                line.rstrip()
                yield line
                yield Text("  " + _cut(goal, options.max_width - 2), style="dim")

    @staticmethod
    def _line(cells: Sequence[str], widths: list[int], style: str = "") -> Text:
        line = Text(style=style)
        for index, (cell, width) in enumerate(zip(cells, widths, strict=True)):
            padded = cell.rjust(width) if index in _RIGHT_ALIGNED else cell.ljust(width)
            line.append(padded, style="" if style else _cell_style(index, cell))
            line.append("  ")
        return line


def _when(epoch: float | None) -> str:
    return "-" if epoch is None else time.strftime("%m-%d %H:%M", time.localtime(epoch))


def _fitted(widths: list[int], room: int) -> list[int]:
    """``widths`` narrowed to sum to ``room`` at most: the widest cut column first, each to
    its least (so a cell may stay too wide only when every cut column is at its least)."""
    widths = list(widths)
    for group in _SHORTENED:
        least = dict(group)
        while sum(widths) > room:
            cuttable = [i for i in least if widths[i] > least[i]]
            if not cuttable:
                break
            widths[max(cuttable, key=lambda i: widths[i])] -= 1
    return widths


def _cell_style(index: int, cell: str) -> str:
    if index != 1:
        return ""
    if cell.endswith("…"):  # a status cut to fit keeps its colour
        cell = next((name for name in _COLOURS if name.startswith(cell[:-1])), cell)
    return _COLOURS.get(cell, "red")


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"
