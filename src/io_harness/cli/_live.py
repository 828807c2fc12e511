"""What ``ioh run`` and ``ioh resume`` print while a run works: each step as it commits."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.status import Status

from io_harness.cli._brief import one_line
from io_harness.cli._text import escape, say
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

__all__ = ["LiveReport"]


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

    def _status(self, text: str) -> None:
        if self.status is not None:
            self.status.update(text)

    def __call__(self, event: Any) -> None:
        if isinstance(event, RunStarted):
            verb = "resumed" if event.resumed else "started"
            who = f"{event.provider} ({event.model})"
            self.run_id = self.run_id or event.run_id
            say(self.console, f"run {escape(event.run_id)} {verb} with {escape(who)}")
            self._status(f"step {event.step + 1}: waiting for the model")
        elif isinstance(event, TokenStreamed):
            self._streamed += len(event.delta.text)
            self._status(
                f"step {event.step}: {escape(event.provider)} is answering "
                f"({self._streamed:,} characters)"
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
            self._lines.append(
                f"  [yellow]deferred[/] {escape(event.act)} {escape(event.target, one_line=True)} "
                f"({escape(event.tool, one_line=True)}): waiting for a decision"
            )
            say(self.console, "\n".join(self._lines))
            self._lines = []
        elif isinstance(event, Verified):
            verdict = "[green]PASS[/]" if event.passed else "[red]FAIL[/]"
            self._lines.append(f"  check: {verdict} {escape(event.summary)}")
        elif isinstance(event, StepFinished):
            lines = [
                f"[bold]step {event.step}[/]  {event.total_usage.total_tokens:,} tokens so far"
            ]
            if event.text:
                lines.append(f"  [dim]model:[/] {one_line(event.text, 90)}")
            say(self.console, "\n".join(lines + self._lines))
            self._lines = []
            self._streamed = 0
            self._status(f"step {event.step + 1}: waiting for the model")
        elif isinstance(event, RunFinished):
            self._status("finished")
