"""How ``ioh`` shows runs: the runs table, one run's trace, and live progress."""

from __future__ import annotations

import json
import shlex
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.status import Status
from rich.text import Text

from io_harness._terminal import escaped_json
from io_harness.cli._sandbox import cap_lines, sandbox_counts, sandbox_line
from io_harness.cli._text import escape, markup, say, shown
from io_harness.compaction._pass import Edit, View
from io_harness.compaction._settings import positions_text
from io_harness.loop import RunOutcome, RunResult
from io_harness.messages import Message, TextBlock, ThinkingBlock, ToolCall, ToolResult
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
from io_harness.pricing import format_money, run_spend
from io_harness.store import (
    CompactionTrace,
    MemoryTrace,
    PermissionTrace,
    ProviderCallTrace,
    RunSummary,
    SandboxEventTrace,
    StepTrace,
    ToolCallTrace,
    Trace,
    VerificationTrace,
)

__all__ = [
    "LiveReport",
    "Money",
    "ShowView",
    "render_result",
    "render_runs",
    "render_trace",
]

ShowView = Literal["transcript", "model"]
"""What ``ioh show`` prints: the run step by step, or the messages the model is sent."""

_SHOWN = 100


def _one_line(text: str, limit: int = _SHOWN) -> str:
    # Escaped first: then only a newline breaks a line, and every other character that
    # could (a carriage return, U+2028) is shown where it is, not taken for an end.
    visible = shown(text).strip()
    first = visible.split("\n", 1)[0]
    more = len(visible) > len(first) or len(first) > limit
    return escape(first[:limit] + (" ..." if more else ""))


def _when(epoch: float | None) -> str:
    return "-" if epoch is None else time.strftime("%m-%d %H:%M", time.localtime(epoch))


def _outcome_style(outcome: str | None, status: str = "running") -> str:
    if outcome is None:
        return f"[yellow]{escape(status)}[/]"
    colour = {"success": "green", "awaiting_approval": "yellow"}.get(outcome, "red")
    return f"[{colour}]{escape(outcome)}[/]"


def spend(cost_micros: int, unpriced_calls: int) -> str:
    """Priced spend, and how many calls it leaves out because they had no price."""
    if unpriced_calls and not cost_micros:
        return f"unpriced ({unpriced_calls} call{'s' if unpriced_calls != 1 else ''})"
    text = format_money(cost_micros)
    return f"{text} + {unpriced_calls} unpriced calls" if unpriced_calls else text


@dataclass(frozen=True, slots=True)
class Money:
    """What a run's spend is counted in: its price table's currency (``None``: the run has
    no price table), and its cost budget in micro-units (``None``: it has none)."""

    currency: str | None = None
    max_cost_micros: int | None = None


def render_runs(runs: list[RunSummary], currencies: dict[str, str | None]) -> RenderableType:
    """The listing ``ioh runs`` prints; ``currencies`` has each run's price table's currency
    (``None``: the run has none)."""
    if not runs:
        return Text("no runs in this store yet")
    return RunsListing(runs, currencies)


_RUNS_HEADER = ("run", "status", "steps", "tokens", "spend", "started")
_RIGHT_ALIGNED = frozenset({2, 3, 4})
_GOAL_MIN = 16
"""Below this many columns left for the goal, it gets a line of its own."""
_SHORTENED = (((1, 8), (4, 12)), ((0, 12),))
"""The cells cut (with an ellipsis) to fit a terminal, by column and the least each keeps:
status and spend first, the run id only if that is not enough."""


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


_COLOURS = {
    "success": "green",
    "running": "yellow",
    "awaiting": "yellow",
    "awaiting_approval": "yellow",
}


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"


def _arguments(raw: str) -> str:
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        return raw
    if isinstance(value, dict):
        return ", ".join(f"{k}={_argument(v)}" for k, v in value.items())
    return str(value)


_ARGUMENT_CHARS = 40
"""How much of one argument's JSON a trace line shows; a longer one is cut, visibly."""


def _argument(value: object) -> str:
    """One argument's JSON, cut with a count of what was left out when it is long."""
    text = escaped_json(json.dumps(value, ensure_ascii=False))
    if len(text) <= _ARGUMENT_CHARS:
        return text
    return f"{text[:_ARGUMENT_CHARS]}… [+{len(text) - _ARGUMENT_CHARS} chars]"


def render_trace(
    trace: Trace, view: ShowView = "transcript", currency: str | None = None
) -> RenderableType:
    """The report ``ioh show`` prints: each step's calls, checks and draws, then the outcome.

    A compacted run's report says how many passes ran; each step whose messages
    a pass left out of the model's view is marked, and each pass is shown, with
    its summary, in the step it ran before. ``view="model"`` prints instead the
    messages the model is sent at the run's end: those left out are missing, and
    the summaries follow the task in the first. ``currency`` is the run's price
    table's (``None``: the run has none, and its spend is ``unpriced``).
    """
    run = trace.run
    parts: list[RenderableType] = []
    elapsed = (run.finished_at or time.time()) - run.started_at
    state = _outcome_style(run.outcome, run.status)
    passes = _passes(trace.compactions)
    parts.append(
        markup(
            f"[bold]{escape(run.id)}[/]  {state}  {run.steps} steps  "
            f"{run.tokens:,} tokens  {elapsed:.1f} s\n"
            f"goal: {escape(run.goal, one_line=True)}\n"
            f"provider: {escape(f'{run.provider} ({run.model})', one_line=True)}\n"
            f"spend: {escape(run_spend(run.cost_micros, run.unpriced_calls, currency))}\n"
            f"{sandbox_line(trace)}"
        )
    )
    if view == "model":
        parts.extend(_model_view(trace, len(passes)))
        return Group(*parts)
    if passes:
        parts.append(
            markup(
                f"compaction: {_count(len(passes), 'pass', 'passes')}; "
                "[bold]--view model[/] shows what the model was sent"
            )
        )
    texts = dict(_assistant_texts(trace))
    left_out = _left_out(trace.messages, passes)
    by_step = _by_step(trace)
    for step in sorted(by_step.keys() | left_out.keys() | {one.step for one in passes}):
        rows = by_step.get(step, _StepRows())
        here = [one for one in passes if one.step == step]
        lines = [_step_heading(step, rows.steps), *left_out.get(step, [])]
        lines.extend(line for one in here for line in _pass_lines(one))
        if texts.get(step):
            lines.append(f"  [dim]model:[/] {_one_line(texts[step])}")
        lines.extend(_row_lines(rows, here, currency or ""))
        parts.append(markup("\n".join(lines)))
    if trace.sandbox_events:
        parts.append(markup(sandbox_counts(trace.sandbox_events)))
    parts.append(markup(f"outcome: {state}"))
    return Group(*parts)


def _row_lines(rows: _StepRows, passes: Sequence[_Pass], currency: str = "") -> list[str]:
    """A step's rows: its model calls (a compaction pass's said so, each cost in
    ``currency``), the gate's decisions, its tool calls, memory changes, checks and cap hits."""
    lines: list[str] = []
    answered_passes = _pass_attempts(rows.provider_calls, passes)
    for index, attempt in enumerate(rows.provider_calls):
        if attempt.error_kind:
            lines.append(
                f"  [red]provider attempt {attempt.attempt} failed:[/] "
                f"{escape(attempt.provider)}: {escape(attempt.error_kind)}: "
                f"{_one_line(attempt.error_message or '')}"
            )
        elif index in answered_passes:
            lines.append(f"  [dim]compaction pass answered by {_answer_line(attempt, currency)}[/]")
        else:
            lines.append(f"  [dim]answered by {_answer_line(attempt, currency)}[/]")
    lines.extend(_permission_lines(rows.permissions))
    for call in rows.tool_calls:
        mark = "[red]error[/]" if call.is_error else "[green]ok[/]"
        kind = "" if call.kind == "builtin" else f"[dim]{escape(call.kind)}[/] "
        lines.append(
            f"  {mark} {kind}{escape(call.name, one_line=True)}"
            f"({escape(_arguments(call.arguments), one_line=True)}) "
            f"-> {_one_line(call.result, 70)}"
        )
    for change in rows.memory:
        value = f" = {_one_line(change.value, 50)}" if change.op == "set" and change.value else ""
        key = escape(change.key, one_line=True)
        lines.append(f"  [dim]memory {escape(change.op)}[/] {key}{value}")
    for check in rows.verifications:
        verdict = "[green]PASS[/]" if check.passed else "[red]FAIL[/]"
        trigger = check.trigger.replace("_", " ")
        lines.append(f"  check ({escape(trigger)}): {verdict} {escape(check.summary)}")
    lines.extend(cap_lines(rows.sandbox_events))
    return lines


@dataclass
class _StepRows:
    """One step's rows of every table ``ioh show`` reports."""

    steps: list[StepTrace] = field(default_factory=list)
    provider_calls: list[ProviderCallTrace] = field(default_factory=list)
    permissions: list[PermissionTrace] = field(default_factory=list)
    tool_calls: list[ToolCallTrace] = field(default_factory=list)
    verifications: list[VerificationTrace] = field(default_factory=list)
    sandbox_events: list[SandboxEventTrace] = field(default_factory=list)
    memory: list[MemoryTrace] = field(default_factory=list)


def _by_step(trace: Trace) -> dict[int, _StepRows]:
    steps: dict[int, _StepRows] = {}

    def rows(step: int) -> _StepRows:
        return steps.setdefault(step, _StepRows())

    for s in trace.steps:
        rows(s.step).steps.append(s)
    for attempt in trace.provider_calls:
        rows(attempt.step).provider_calls.append(attempt)
    for permission in trace.permissions:
        rows(permission.step).permissions.append(permission)
    for call in trace.tool_calls:
        rows(call.step).tool_calls.append(call)
    for check in trace.verifications:
        rows(check.step).verifications.append(check)
    for event in trace.sandbox_events:
        rows(event.step).sandbox_events.append(event)
    for change in trace.memory:
        rows(change.step or 0).memory.append(change)
    return steps


# -- compaction ------------------------------------------------------------------------


@dataclass
class _Pass:
    """One compaction pass, from its rows: a pass's edits are stored together, at one time."""

    step: int
    """The step it ran before."""
    at: float
    summaries: list[str] = field(default_factory=list)
    deleted: list[int] = field(default_factory=list)
    """The positions (from 1) of the messages it left out of the model's view."""


def _passes(edits: Sequence[CompactionTrace]) -> list[_Pass]:
    passes: dict[tuple[int, float], _Pass] = {}
    for edit in edits:
        one = passes.setdefault((edit.step, edit.at), _Pass(edit.step, edit.at))
        if edit.kind == "summary" and edit.text:
            one.summaries.append(edit.text)
        elif edit.kind == "delete" and edit.message is not None:
            one.deleted.append(edit.message)
    return list(passes.values())


def _pass_lines(one: _Pass) -> list[str]:
    """A pass, in the step it ran before: what it left out, then its summary, whole."""
    gone = (
        f"{_count(len(one.deleted), 'message', 'messages')} ({positions_text(one.deleted)}) "
        "left out of the model's view"
        if one.deleted
        else "no message left out"
    )
    lines = [f"  [yellow]compaction:[/] {gone}"]
    if not one.summaries:
        lines.append("    [dim]no summary[/]")
    for text in one.summaries:
        first, *rest = shown(text).strip().splitlines() or [""]
        lines.append(f"    [dim]summary:[/] {escape(first)}")
        lines.extend(f"    {escape(line)}".rstrip() for line in rest)
    return lines


_PARTS = {
    "assistant": "the model's answer",
    "tool": "the tool results",
    "user": "the check's feedback",
}
"""What a step's message is, by role, when a pass left out only some of the step's."""


def _left_out(messages: Sequence[Message], passes: Sequence[_Pass]) -> dict[int, list[str]]:
    """Each step's notes on its messages a pass left out of the model's view, by step."""
    deleted_by = {seq: one.step for one in passes for seq in one.deleted}
    by_step: dict[int, list[int]] = {}
    for seq, step in enumerate(_message_steps(messages), start=1):
        by_step.setdefault(step, []).append(seq)
    notes: dict[int, list[str]] = {}
    for step, own in by_step.items():
        for before in sorted({deleted_by[seq] for seq in own if seq in deleted_by}):
            gone = [seq for seq in own if deleted_by.get(seq) == before]
            what = "" if gone == own else _parts([messages[seq - 1] for seq in gone]) + " "
            note = f"[{what}left out of the model's view by the compaction before step {before}]"
            notes.setdefault(step, []).append(f"  [dim]{escape(note)}[/]")
    return notes


def _parts(messages: Sequence[Message]) -> str:
    names = list(dict.fromkeys(_PARTS.get(m.role, m.role) for m in messages))
    return " and ".join(names)


def _message_steps(messages: Sequence[Message]) -> list[int]:
    """Each message's step: the n-th assistant message and what follows it (its tool results,
    the check's feedback) are step n's; the task, before them, is step 0's."""
    steps: list[int] = []
    step = 0
    for message in messages:
        step += message.role == "assistant"
        steps.append(step)
    return steps


def _pass_attempts(attempts: Sequence[ProviderCallTrace], passes: Sequence[_Pass]) -> set[int]:
    """Which of a step's attempts (by index) answered a compaction pass.

    A pass's edits are stored as soon as its answer is in, so its answer is the
    last attempt of the step begun before them.
    """
    found: set[int] = set()
    for one in passes:
        before = [
            index
            for index, attempt in enumerate(attempts)
            if attempt.error_kind is None and attempt.started_at <= one.at
        ]
        if before:
            found.add(max(before, key=lambda index: attempts[index].started_at))
    return found


def _model_view(trace: Trace, passes: int) -> list[RenderableType]:
    """The messages the model is sent at the run's end, each under its position and step."""
    view = View(
        Edit("summary" if e.kind == "summary" else "delete", e.step, e.message, e.text)
        for e in trace.compactions
    )
    messages = trace.messages
    shown_messages = view.apply(messages)
    how = (
        f"after {_count(passes, 'compaction pass', 'compaction passes')}"
        if passes
        else "no compaction: the whole transcript"
    )
    parts: list[RenderableType] = [
        markup(
            f"[bold]the model's view after step {trace.run.steps}:[/] {len(shown_messages)} of "
            f"{_count(len(messages), 'message', 'messages')}, {how}\n"
            "[dim](the system prompt, with the success condition, goes with every request)[/]"
        )
    ]
    owners = _message_steps(messages)
    for seq, message in zip(view.kept(messages), shown_messages, strict=True):
        where = "the task" if seq == 1 else f"step {owners[seq - 1]}"
        lines = [f"[bold]#{seq} {escape(message.role)}[/] [dim]({where})[/]"]
        # A tool message answers the calls of the message before it.
        calls = messages[seq - 2].tool_calls if seq > 1 else ()
        lines.extend(_block_lines(message, {call.id: call.name for call in calls}))
        parts.append(markup("\n".join(lines)))
    return parts


def _block_lines(message: Message, names: dict[str, str]) -> list[str]:
    """A message's blocks as the model is sent them: text whole, calls and results in brief.

    ``names`` names the calls a tool message's results answer, by call id.
    """
    lines: list[str] = []
    for block in message.content:
        if isinstance(block, TextBlock):
            lines.extend(f"  {escape(line)}".rstrip() for line in shown(block.text).splitlines())
        elif isinstance(block, ThinkingBlock):
            said = "redacted" if block.redacted else f"{len(block.text):,} characters"
            lines.append(f"  [dim](thinking: {said})[/]")
        elif isinstance(block, ToolCall):
            arguments = (
                block.arguments
                if isinstance(block.arguments, str)
                else json.dumps(block.arguments, default=str)
            )
            called = escape(f"{block.name}({_arguments(arguments)})", one_line=True)
            lines.append(f"  [dim]calls[/] {called}")
        elif isinstance(block, ToolResult):
            mark = "[red]error[/]" if block.is_error else "[green]ok[/]"
            name = names.get(block.tool_use_id, block.tool_use_id)
            lines.append(
                f"  {mark} {escape(name, one_line=True)} -> {_one_line(block.content, 70)}"
            )
    return lines


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _permission_lines(rows: list[PermissionTrace]) -> list[str]:
    """The gate's decisions in a step; plain allows are counted, not listed."""
    lines = []
    allowed = 0
    for row in rows:
        if row.decision == "allowed" and row.decided_by == "policy":
            allowed += 1
            continue
        colour = "green" if row.decision == "approved" else "yellow"
        why = (
            f"rule '{row.rule}' in layer '{row.layer}'"
            if row.rule
            else f"the default for {row.act}"
        )
        by = f" by {row.decided_by}" if row.decided_by != "policy" else ""
        reason = f": {row.reason}" if row.reason else ""
        lines.append(
            f"  [{colour}]{escape(row.decision)}{escape(by, one_line=True)}[/] {escape(row.act)} "
            f"{escape(row.target, one_line=True)} ({escape(why, one_line=True)})"
            f"{escape(reason, one_line=True)}"
        )
    if allowed:
        lines.append(f"  [dim]policy allowed {allowed} act{'s' if allowed != 1 else ''}[/]")
    return lines


def _answer_line(attempt: ProviderCallTrace, currency: str = "") -> str:
    model = attempt.served_model or attempt.model
    parts = [f"{escape(attempt.provider)} ({escape(model)})"]
    if attempt.finish_reason:
        parts.append(f"finish {escape(attempt.finish_reason)}")
    if attempt.time_to_first_token is not None:
        parts.append(f"first token {attempt.time_to_first_token:.2f} s")
    cost = attempt.cost_micros
    parts.append("unpriced" if cost is None else f"cost {escape(format_money(cost, currency))}")
    return ", ".join(parts)


def _assistant_texts(trace: Trace) -> list[tuple[int, str]]:
    # The n-th assistant message is step n's answer.
    assistants = [m for m in trace.messages if m.role == "assistant"]
    return [(n, m.text) for n, m in enumerate(assistants, start=1)]


def _step_heading(step: int, rows: list[StepTrace]) -> str:
    if not rows:
        return f"[bold]after step {step - 1}[/]"
    row = rows[0]
    return (
        f"[bold]step {step}[/]  {row.usage.total_tokens:,} tokens  "
        f"{row.finished_at - row.started_at:.2f} s"
    )


def render_result(result: RunResult, store_hint: str, money: Money | None = None) -> RenderableType:
    """The closing lines of ``ioh run``, ``ioh resume`` and ``ioh demo``.

    ``money`` is the run's currency and cost budget: the spend is shown in the
    one, and a run stopped by the other says why.
    """
    money = money or Money()
    lines = [
        f"outcome: {_outcome_style(result.outcome.value)} after {result.steps} steps, "
        f"{result.usage.total_tokens:,} tokens"
    ]
    stopped = _cost_stop(result, money)
    if stopped:
        lines.append(f"[red]stopped:[/] {escape(stopped)}")
    if result.verification is not None:
        verdict = "verified" if result.verification.passed else "not verified"
        criterion = escape((shown(result.verification.criterion).splitlines() or [""])[0])
        lines.append(f"{verdict}: {criterion}")
    if result.error is not None:
        lines.append(f"[red]provider error:[/] {escape(str(result.error))}")
    if result.cost_micros or result.unpriced_calls or money.currency is not None:
        said = run_spend(result.cost_micros, result.unpriced_calls, money.currency)
        lines.append(f"spend: {escape(said)}")
    if result.sandbox == "none":
        lines.append("[yellow]commands ran without a sandbox[/]")
    elif result.sandbox is not None:
        lines.append(f"commands ran in the sandbox: {escape(result.sandbox)}")
    if result.request is not None:
        run_id = escape(shlex.quote(result.run_id)) + escape(store_hint)
        lines.append(
            f"[yellow]awaiting approval:[/] {escape(result.request.describe(), one_line=True)}\n"
            f"decide: ioh approve {run_id} [--remember] | ioh deny {run_id} --reason TEXT"
            " (ioh pending shows the diff)"
        )
    lines.append(f"trace: ioh show {escape(shlex.quote(result.run_id))}{escape(store_hint)}")
    return markup("\n".join(lines))


def _cost_stop(result: RunResult, money: Money) -> str:
    """Why a run stopped on its cost budget: spent, or too small for the call it would make.

    The loop stops before a call the budget cannot cover: its prompt's tokens at
    the model's cheapest input price already cost more than what is left.
    """
    budget = money.max_cost_micros
    if result.outcome is not RunOutcome.COST_BUDGET_EXCEEDED or budget is None:
        return ""
    limit = format_money(budget, money.currency or "")
    if result.cost_micros >= budget:
        return f"the cost budget of {limit} is spent"
    if result.steps == 0 and not result.cost_micros:
        return (
            f"the cost budget of {limit} could not cover the least the first call would cost "
            "(its prompt at the model's cheapest input price), so no call was made"
        )
    spent = format_money(result.cost_micros, money.currency or "")
    return (
        f"what is left of the cost budget of {limit} ({spent} spent) could not cover the "
        "least the next call would cost"
    )


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
            self._lines.append(f"  {mark} {name} -> {_one_line(event.result, 70)}")
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
                lines.append(f"  [dim]model:[/] {_one_line(event.text, 90)}")
            say(self.console, "\n".join(lines + self._lines))
            self._lines = []
            self._streamed = 0
            self._status(f"step {event.step + 1}: waiting for the model")
        elif isinstance(event, RunFinished):
            self._status("finished")
