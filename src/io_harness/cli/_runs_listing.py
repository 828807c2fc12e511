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
_SPEND_FIRST = (((4, 9),), ((1, 8),), ((0, 12),))
"""The cells cut (with an ellipsis) to fit a terminal, by column and the least each keeps:
the spend first (``ioh show`` has it whole); only where even the stacked layout does not
fit, the status (its outcome is what a reader looks for), then the run id."""
_COLOURS = {
    "success": "green",
    "running": "yellow",
    "awaiting": "yellow",
    "awaiting_approval": "yellow",
    "awaiting_answer": "yellow",
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
    the spend is cut (with an ellipsis); when that is not enough, the run id
    goes on a line of its own, whole, above the other cells. Elsewhere (a file,
    a pipe) each line is whole.
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
        width = options.max_width
        room = width - sum(widths) - 2 * len(widths)
        if room >= _GOAL_MIN or not console.is_terminal:
            yield from self._inline(widths, room if console.is_terminal else None)
            return
        narrowed = _fitted(widths, width - 2 * (len(widths) - 1), _SPEND_FIRST[:1])
        if sum(narrowed) + 2 * (len(widths) - 1) <= width:
            yield from self._goal_below(narrowed, width)
        else:
            yield from self._stacked(widths[1:], width)

    def _inline(self, widths: list[int], room: int | None) -> RenderResult:
        """One line a run, the goal last (cut to ``room`` at a terminal)."""
        header = self._line(_RUNS_HEADER, widths, style="bold")
        header.append("goal", style="bold")
        yield header
        for cells, goal in self.rows:
            line = self._line(cells, widths)
            line.append(goal if room is None else _cut(goal, room))
            line.rstrip()
            yield line

    def _goal_below(self, widths: list[int], width: int) -> RenderResult:
        """The cells on a line (the spend cut to fit), the goal on a line below."""
        header = self._line(_RUNS_HEADER, widths, style="bold")
        header.rstrip()
        yield header
        for cells, goal in self.rows:
            line = self._line([_cut(c, w) for c, w in zip(cells, widths, strict=True)], widths)
            line.rstrip()
            yield line
            yield Text("  " + _cut(goal, width - 2), style="dim")

    def _stacked(self, widths: list[int], width: int) -> RenderResult:
        """Where the run id leaves too little room for the other cells (a generated id is 40
        characters): the id whole on a line of its own, the cells below it, then the goal.
        Only a terminal too narrow for even that cuts the spend, the status, then the id."""
        widths = _fitted(widths, width - 2 - 2 * (len(widths) - 1), _SPEND_FIRST[:2], first=1)
        yield Text(_RUNS_HEADER[0], style="bold")
        header = Text("  ") + self._line(_RUNS_HEADER[1:], widths, style="bold", first=1)
        header.rstrip()
        yield header
        for cells, goal in self.rows:
            yield Text(_cut(cells[0], width))
            fitted = [_cut(c, w) for c, w in zip(cells[1:], widths, strict=True)]
            line = Text("  ") + self._line(fitted, widths, first=1)
            line.rstrip()
            yield line
            yield Text("  " + _cut(goal, width - 2), style="dim")

    @staticmethod
    def _line(cells: Sequence[str], widths: list[int], style: str = "", first: int = 0) -> Text:
        """Cells padded to ``widths``; ``first`` is the column of the first cell."""
        line = Text(style=style)
        for index, (cell, width) in enumerate(zip(cells, widths, strict=True), start=first):
            padded = cell.rjust(width) if index in _RIGHT_ALIGNED else cell.ljust(width)
            line.append(padded, style="" if style else _cell_style(index, cell))
            line.append("  ")
        return line


def _when(epoch: float | None) -> str:
    return "-" if epoch is None else time.strftime("%m-%d %H:%M", time.localtime(epoch))


def _fitted(
    widths: list[int], room: int, groups: Sequence[Sequence[tuple[int, int]]], first: int = 0
) -> list[int]:
    """``widths`` (of the columns from ``first``) narrowed to sum to ``room`` at most: by
    ``groups`` in turn, the widest column of a group first, each to its least (so a cell may
    stay too wide only when every cut column is at its least)."""
    widths = list(widths)
    for group in groups:
        least = {column - first: keep for column, keep in group if column >= first}
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
