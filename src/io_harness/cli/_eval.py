"""``ioh eval SUITE.toml``: every case with every provider, a table to compare them by.

Progress goes to stderr (a bar at a terminal, and a line per finished run),
so stdout holds only the table, or only the JSON or CSV of ``--json`` /
``--csv``. The exit status is 0 when every run passed, 1 when some did not.
"""

from __future__ import annotations

import argparse
from types import TracebackType

from rich import box
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.measure import Measurement
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.segment import Segment
from rich.table import Table

from io_harness._terminal import escaped_json
from io_harness.cli import EXIT_NOT_VERIFIED
from io_harness.cli._output import write_out
from io_harness.cli._sandbox import sandbox_choice
from io_harness.cli._signals import run_to_end
from io_harness.cli._text import Natural, PipeConsole, escape, markup, say, shown
from io_harness.cli._words import RunInterrupted, interrupt_signal, store_hint
from io_harness.errors import ConfigError
from io_harness.eval import ResultRow, RunRecord, SpecHarnesses, Suite, SuiteRun, run_suite
from io_harness.pricing import run_spend
from io_harness.store import Store

__all__ = ["EvalProgress", "cmd_eval", "render_eval"]


def cmd_eval(args: argparse.Namespace, console: Console) -> int:
    """Run the suite's runs with a progress report on stderr; print the table, JSON or CSV."""
    errors = PipeConsole(stderr=True, highlight=False)
    suite = Suite.from_toml(args.suite)
    if args.provider:
        suite = suite.with_providers(args.provider)
    if not suite.providers:
        raise ConfigError(f"{args.suite}: no provider; add a [[provider]] table or give --provider")
    concurrency = args.concurrency if args.concurrency is not None else suite.concurrency
    if concurrency < 1:
        raise ConfigError(f"--concurrency is how many runs at once: 1 or more, not {concurrency}")
    sandbox = sandbox_choice(args, errors)  # a warning on stderr keeps stdout for the export
    with Store.open(args.store) as store:
        harnesses = SpecHarnesses(suite, store, sandbox=sandbox)
        say(
            errors,
            f"eval {escape(suite.name)}: {_count(suite.runs, 'run')} "
            f"({_count(len(suite.cases), 'case')}, {_count(len(suite.providers), 'provider')}"
            f"{', repeated' if any(case.repeat > 1 for case in suite.cases) else ''}), "
            f"{concurrency} at once",
        )
        with EvalProgress(errors, suite.runs) as progress:
            try:
                result = run_to_end(
                    run_suite(
                        suite,
                        harness_for=harnesses,
                        concurrency=concurrency,
                        on_start=progress.started,
                        on_finish=progress.finished,
                    )
                )
            except KeyboardInterrupt as exc:
                progress.stop()
                say(errors, escape(progress.interrupted_line(store_hint(args.store))))
                raise RunInterrupted(None, interrupt_signal(exc)) from None
    if args.json:
        write_out(console, escaped_json(result.to_json()) + "\n")
    elif args.csv:
        write_out(console, result.to_csv())
    else:
        say(console, render_eval(result.rows(), result.totals() if len(suite.cases) > 1 else []))
        command = f"ioh runs --label eval={result.eval_id}{store_hint(args.store)}"
        say(console, f"runs stored with the label eval={escape(result.eval_id)}: {escape(command)}")
    return 0 if result.passed else EXIT_NOT_VERIFIED


class EvalProgress:
    """Runs started and finished, on stderr: a line per finished run, and at a terminal a bar
    under them with how many are done and how many are running."""

    def __init__(self, console: Console, total: int) -> None:
        self.console = console
        self.total = total
        self.done = 0
        self.running = 0
        self.eval_id: str | None = None
        """The label ``eval=`` of the suite's runs, once one started."""
        self._bar: Progress | None = None
        self._task = None
        if console.is_terminal:
            self._bar = Progress(
                SpinnerColumn(),
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=console,
                transient=True,
            )
            self._task = self._bar.add_task("starting", total=total)

    def __enter__(self) -> EvalProgress:
        if self._bar is not None:
            self._bar.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def stop(self) -> None:
        """Take the bar off the terminal (the lines printed stay)."""
        if self._bar is not None:
            self._bar.stop()

    def started(self, run: SuiteRun) -> None:
        """A run started."""
        self.eval_id = run.labels["eval"]
        self.running += 1
        self._update()

    def finished(self, record: RunRecord) -> None:
        """A run ended: its line, and the bar moved on."""
        self.running -= 1
        self.done += 1
        mark = "[green]pass[/]" if record.passed else "[red]FAIL[/]"
        said = record.failure or record.outcome
        line = (
            f"[{self.done}/{self.total}] {mark} {escape(record.case)} with "
            f"{escape(record.provider)} #{record.repeat}: {escape(said)} "
            f"({_count(record.steps, 'step')}, {record.seconds:.1f} s)"
        )
        if record.error and not record.passed:
            line += f"\n    [dim]{escape(_first_line(record.error))}[/]"
        if record.run_id is not None:
            line += f" [dim]{escape(record.run_id)}[/]"
        say(self.console, markup(line))
        self._update()

    def interrupted_line(self, hint: str) -> str:
        """What is said when the suite is stopped: what finished, what was stopped."""
        label = f" --label eval={self.eval_id}" if self.eval_id else ""
        command = f"ioh runs{label} --status interrupted{hint}"
        return (
            f"eval stopped: {self.done} of {_count(self.total, 'run')} finished; the "
            f"{_count(self.running, 'run')} stopped midway keep their committed steps "
            f"({command} lists them) and their workspace copies are removed"
        )

    def _update(self) -> None:
        if self._bar is not None and self._task is not None:
            self._bar.update(self._task, completed=self.done, description=f"{self.running} running")


def render_eval(rows: list[ResultRow], totals: list[ResultRow]) -> RenderableType:
    """The table of ``ioh eval``: a row per case and provider, the providers of a case side by
    side (one under the other), then each provider's total over every case when given; under
    it, why the runs that did not pass did not, by case and provider."""
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    for title, names in (
        ("case", [r.case or "" for r in rows]),
        ("provider", [r.provider for r in rows]),
    ):
        # A name keeps its first dozen characters on one line when the table must narrow.
        table.add_column(title, overflow="fold", min_width=min(max(map(len, names)), 12))
    for title in ("runs", "pass", "first try", "steps", "tokens", "cost", "time"):
        table.add_column(title, justify="right", no_wrap=True)
    for section in _sections(rows) + ([totals] if totals else []):
        for index, row in enumerate(section):
            table.add_row(*_cells(row), end_section=index == len(section) - 1)
    lines = [
        "[dim]steps and time: the median run's; tokens and cost: all the runs' together; "
        "first try: passed with no failed check at the end of a turn before[/]"
    ]
    failed = [row for row in rows if row.failures]
    if failed:
        lines.append("did not pass:")
    for row in failed:
        why = ", ".join(f"{reason} ({n})" for reason, n in row.failures.items())
        lines.append(f"  {escape(row.case or '')} with {escape(row.provider)}: {escape(why)}")
    return Group(Natural(_Trimmed(table)), markup("\n".join(lines)))


class _Trimmed:
    """A renderable's lines without the spaces a table pads its last column with."""

    def __init__(self, inner: RenderableType) -> None:
        self.inner = inner

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement.get(console, options, self.inner)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for line in console.render_lines(self.inner, options, pad=False, new_lines=False):
            while line and not line[-1].text.strip() and not line[-1].control:
                line.pop()
            if line:
                line[-1] = Segment(line[-1].text.rstrip(), line[-1].style, line[-1].control)
            yield from line
            yield Segment.line()


def _sections(rows: list[ResultRow]) -> list[list[ResultRow]]:
    """The rows by case, in order."""
    sections: list[list[ResultRow]] = []
    for row in rows:
        if sections and sections[-1][0].case == row.case:
            sections[-1].append(row)
        else:
            sections.append([row])
    return sections


def _cells(row: ResultRow) -> tuple[str, ...]:
    return (
        escape(row.case) if row.case is not None else "[bold]all[/]",
        escape(row.provider),
        str(row.runs),
        _rate(row.passed, row.runs),
        _rate(row.first_try, row.runs),
        "-" if row.median_steps is None else f"{row.median_steps:g}",
        f"{row.tokens:,}",
        # Without a price table every call is unpriced: counting them says nothing more.
        "unpriced"
        if row.currency is None
        else escape(run_spend(row.cost_micros, row.unpriced_calls, row.currency)),
        "-" if row.median_seconds is None else f"{row.median_seconds:.1f} s",
    )


def _rate(part: int, runs: int) -> str:
    if not runs:
        return "-"
    colour = "green" if part == runs else "red" if part == 0 else "yellow"
    return f"[{colour}]{part}/{runs}[/] {part / runs:4.0%}"


def _count(n: int, one: str) -> str:
    return f"{n} {one if n == 1 else one + 's'}"


def _first_line(text: str) -> str:
    lines = shown(text).strip().splitlines()
    return lines[0] if lines else ""
