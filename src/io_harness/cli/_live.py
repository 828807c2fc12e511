"""What ``ioh run`` and ``ioh resume`` print while a run works: each step as it commits."""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console, ConsoleOptions, RenderResult
from rich.status import Status

from io_harness.cli._brief import count, one_line
from io_harness.cli._text import Hanging, escape, markup, say
from io_harness.observe import (
    AwaitingApproval,
    Retrying,
    RunFinished,
    RunStarted,
    StepFinished,
    TokenStreamed,
    ToolCalled,
    Verified,
)

__all__ = ["LiveReport", "Waiting"]


class Waiting:
    """The status line's text with the time since ``since`` (``time.monotonic()``), counted
    again each time the line is drawn: a slow model shows the wait growing."""

    def __init__(self, text: str, since: float) -> None:
        self.text = text
        self.since = since

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield markup(f"{self.text} ({time.monotonic() - self.since:.0f} s)")


class LiveReport:
    """An observer that prints each committed step and keeps a status line while one works.

    A step's events arrive together after its commit; the report prints them
    as one block, the model's words first.
    """

    def __init__(self, console: Console) -> None:
        self.console = console
        self.status: Status | None = None
        self.run_id: str | None = None
        """The run driven (the first started: a sub-agent's start comes after its root's)."""
        self._lines: list[str] = []
        self._streamed = 0
        self._since = time.monotonic()
        """When the step in progress began waiting for its answer."""

    def _status(self, text: str) -> None:
        if self.status is not None:
            self.status.update(text)

    def _waiting(self, text: str) -> None:
        """Show ``text`` with the time the step has waited so far."""
        if self.status is not None:
            self.status.update(Waiting(text, self._since))

    def __call__(self, event: Any) -> None:
        if isinstance(event, RunStarted):
            verb = "resumed" if event.resumed else "started"
            who = f"{event.provider} ({event.model})"
            self.run_id = self.run_id or event.run_id
            say(self.console, f"run {escape(event.run_id)} {verb} with {escape(who)}")
            self._since = time.monotonic()
            self._waiting(f"step {event.step + 1}: waiting for the model")
        elif isinstance(event, TokenStreamed):
            self._streamed += len(event.delta.text)
            self._waiting(
                f"step {event.step}: {escape(event.provider)} is answering, "
                f"{count(self._streamed, 'character', 'characters')}"
            )
        elif isinstance(event, Retrying):
            say(
                self.console,
                f"  [yellow]provider {escape(event.error_kind)}, retry {event.attempt - 1} "
                f"in {event.delay:.1f} s[/]",
            )
        elif isinstance(event, ToolCalled):
            mark = "[red]error[/]" if event.is_error else "[green]ok[/]"
            name = escape(event.name, one_line=True)
            self._lines.append(f"  {mark} {name} -> {one_line(event.result, 70)}")
        elif isinstance(event, AwaitingApproval):
            waits = "an answer" if event.act == "ask" else "a decision"
            self._lines.append(
                f"  [yellow]deferred[/] {escape(event.act)} {escape(event.target, one_line=True)} "
                f"({escape(event.tool, one_line=True)}): waiting for {waits}"
            )
            # The step is not committed: it has a heading of its own, the number ioh pending
            # gives it, not the lines of the step before.
            heading = f"[bold]step {event.step}[/]  [yellow]awaits a decision[/]"
            say(self.console, Hanging("\n".join([heading, *self._lines])))
            self._lines = []
        elif isinstance(event, Verified):
            verdict = "[green]PASS[/]" if event.passed else "[red]FAIL[/]"
            self._lines.append(f"  check: {verdict} {escape(event.summary)}")
        elif isinstance(event, StepFinished):
            tokens = count(event.total_usage.total_tokens, "token", "tokens")
            lines = [f"[bold]step {event.step}[/]  {tokens} so far"]
            if event.text:
                lines.append(f"  [dim]model:[/] {one_line(event.text, 90)}")
            say(self.console, Hanging("\n".join(lines + self._lines)))
            self._lines = []
            self._streamed = 0
            self._since = time.monotonic()
            self._waiting(f"step {event.step + 1}: waiting for the model")
        elif isinstance(event, RunFinished):
            self._status("finished")
