"""What ``ioh show`` prints: the run's header, then each step's calls, checks and draws.

The steps are the trace by step (``store/_by_step.py``), the view the HTML
report renders too; this module only says how a step reads on a terminal.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Sequence
from typing import Any, Literal

from rich.console import Group, RenderableType

from io_harness.cli._brief import call_arguments, count, one_line, outcome_style
from io_harness.cli._check_tail import tail_lines
from io_harness.cli._model_view import model_view
from io_harness.cli._sandbox import cap_lines, sandbox_counts, sandbox_line
from io_harness.cli._text import Hanging, escape, markup, shown
from io_harness.compaction._settings import positions_text
from io_harness.messages import Message
from io_harness.pricing import format_money, run_spend
from io_harness.store import PermissionTrace, ProviderCallTrace, Trace, VerificationTrace
from io_harness.store._by_step import CompactionPass, TraceStep, trace_by_step

__all__ = ["ShowView", "render_trace"]

ShowView = Literal["transcript", "model"]
"""What ``ioh show`` prints: the run step by step, or the messages the model is sent."""

_PARTS = {
    "assistant": "the model's answer",
    "tool": "the tool results",
    "user": "the check's feedback",
}
"""What a step's message is, by role, when a pass left out only some of the step's."""


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
    steps = trace_by_step(trace)
    passes = sum(len(step.passes) for step in steps)
    parts: list[RenderableType] = [_header(trace, currency)]
    if view == "model":
        parts.extend(model_view(trace, passes))
        return Group(*parts)
    if passes:
        parts.append(
            markup(
                f"compaction: {count(passes, 'pass', 'passes')}; "
                "[bold]--view model[/] shows what the model was sent"
            )
        )
    whole = f"ioh show {shlex.quote(trace.run.id)} --json"
    continued = _continuations(trace)
    for step in steps:
        if _shown(step):
            parts.append(Hanging("\n".join(_step_lines(step, currency or "", whole))))
        parts.extend(Hanging(line) for line in continued.pop(step.number, []))
    parts.extend(Hanging(line) for lines in continued.values() for line in lines)
    if trace.sandbox_events:
        parts.append(markup(sandbox_counts(trace.sandbox_events)))
    parts.append(markup(f"outcome: {outcome_style(trace.run.outcome, trace.run.status)}"))
    return Group(*parts)


def _header(trace: Trace, currency: str | None) -> RenderableType:
    """The run in five lines: id, state and totals; goal; provider; spend; sandbox."""
    run = trace.run
    elapsed = (run.finished_at or time.time()) - run.started_at
    return Hanging(
        f"[bold]{escape(run.id)}[/]  {outcome_style(run.outcome, run.status)}  "
        f"{count(run.steps, 'step', 'steps')}  {count(run.tokens, 'token', 'tokens')}  "
        f"{elapsed:.1f} s\n"
        f"goal: {escape(run.goal, one_line=True)}\n"
        f"provider: {escape(f'{run.provider} ({run.model})', one_line=True)}\n"
        f"spend: {escape(run_spend(run.cost_micros, run.unpriced_calls, currency))}\n"
        f"{sandbox_line(trace)}"
    )


def _continuations(trace: Trace) -> dict[int, list[str]]:
    """Each time the run was continued, by the step it went on after: what it had stopped
    with, the budget it went on under, and what was said to the model."""
    found: dict[int, list[str]] = {}
    for event in trace.events:
        if event.kind != "run_continued":
            continue
        data = event.data
        given = data.get("budget")
        budget: dict[str, Any] = given if isinstance(given, dict) else {}
        limits = ", ".join(f"{key} {value}" for key, value in budget.items() if value is not None)
        line = (
            f"[bold]continued[/] after step {event.step} (it had stopped: "
            f"{escape(str(data.get('stopped')))}), under {escape(limits)}"
        )
        said = data.get("said")
        if isinstance(said, str):
            line += f"\n  [dim]said to the model:[/] {escape(said, one_line=True)}"
        found.setdefault(event.step, []).append(line)
    return found


def _shown(step: TraceStep) -> bool:
    """Whether ``ioh show`` prints the step: it holds a row of what a step's lines say (a
    step, an attempt, a call, a decision, a check, a sandbox event, a memory change), a
    compaction pass, or a message a pass left out."""
    return bool(
        step.row is not None
        or step.attempts
        or step.calls
        or step.permissions
        or step.verifications
        or step.sandbox_events
        or step.memory
        or step.passes
        or any(m.left_out_before is not None for m in step.messages)
    )


def _step_lines(step: TraceStep, currency: str, whole: str) -> list[str]:
    """A step: its heading, what compaction left out and did before it, the model's words,
    then its rows; ``whole`` is the command that shows a check's whole output."""
    lines = [_step_heading(step), *_left_out(step)]
    lines.extend(line for one in step.passes for line in _pass_lines(one))
    answer = step.answer
    if answer is not None and answer.text:
        lines.append(f"  [dim]model:[/] {one_line(answer.text)}")
    lines.extend(_row_lines(step, currency, whole))
    return lines


def _step_heading(step: TraceStep) -> str:
    row = step.row
    if row is None and any(approval.status == "pending" for approval in step.approvals):
        # The step an act of which awaits a decision: ioh pending names it by this number.
        return f"[bold]step {step.number}[/]  [yellow]awaits a decision[/] (not committed yet)"
    if row is None:
        return f"[bold]after step {step.number - 1}[/]"
    return (
        f"[bold]step {step.number}[/]  {count(row.usage.total_tokens, 'token', 'tokens')}  "
        f"{row.finished_at - row.started_at:.2f} s"
    )


def _row_lines(step: TraceStep, currency: str, whole: str) -> list[str]:
    """A step's rows: its model calls (a compaction pass's said so, each cost in
    ``currency``), the gate's decisions, its tool calls, memory changes, checks (a failed
    one with the end of its output) and cap hits."""
    lines = [_attempt_line(attempt, step, currency) for attempt in step.attempts]
    lines.extend(_permission_lines(step.every_permission))
    lines.extend(_question_lines(step))
    for call in step.calls:
        row = call.row
        mark = "[red]error[/]" if row.is_error else "[green]ok[/]"
        kind = "" if row.kind == "builtin" else f"[dim]{escape(row.kind)}[/] "
        lines.append(
            f"  {mark} {kind}{escape(row.name, one_line=True)}"
            f"({escape(call_arguments(row.arguments), one_line=True)}) "
            f"-> {one_line(row.result, 70)}"
        )
    for change in step.every_memory_change:
        value = f" = {one_line(change.value, 50)}" if change.op == "set" and change.value else ""
        key = escape(change.key, one_line=True)
        lines.append(f"  [dim]memory {escape(change.op)}[/] {key}{value}")
    for check in step.verifications:
        lines.extend(_check_lines(check, whole))
    lines.extend(cap_lines(step.every_sandbox_event))
    return lines


def _question_lines(step: TraceStep) -> list[str]:
    """The questions the model asked in the step (``ask_user``) and what answered them."""
    lines = []
    every = [*step.approvals, *(a for call in step.calls for a in call.approvals)]
    for approval in every:
        question = approval.request.question
        if question is None:
            continue
        decision = approval.decision
        if decision is None:
            said = "[yellow]awaits an answer[/]"
        elif decision.kind == "answer":
            said = f"answered by {escape(decision.by or 'nobody', one_line=True)}: "
            said += one_line(decision.answer or "", 70)
        else:
            said = f"not answered ({escape(decision.reason, one_line=True)})"
        lines.append(f"  [dim]asked[/] {one_line(question, 70)} -> {said}")
    return lines


def _check_lines(check: VerificationTrace, whole: str) -> list[str]:
    """A check and its verdict; under a failed one, the end of what the check saw."""
    verdict = "[green]PASS[/]" if check.passed else "[red]FAIL[/]"
    trigger = check.trigger.replace("_", " ")
    lines = [f"  check ({escape(trigger)}): {verdict} {escape(check.summary)}"]
    if check.passed:
        return lines
    try:
        output = check.parsed_result.output
    except ValueError:  # a damaged row: its summary is all there is to show
        return lines
    return lines + tail_lines(output, whole)


def _attempt_line(attempt: ProviderCallTrace, step: TraceStep, currency: str) -> str:
    if attempt.error_kind:
        return (
            f"  [red]provider attempt {attempt.attempt} failed:[/] "
            f"{escape(attempt.provider)}: {escape(attempt.error_kind)}: "
            f"{one_line(attempt.error_message or '')}"
        )
    if attempt.attempt in step.pass_attempts:
        return f"  [dim]compaction pass answered by {_answer_line(attempt, currency)}[/]"
    return f"  [dim]answered by {_answer_line(attempt, currency)}[/]"


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


def _permission_lines(rows: Sequence[PermissionTrace]) -> list[str]:
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


def _pass_lines(one: CompactionPass) -> list[str]:
    """A pass, in the step it ran before: what it left out, then its summary, whole."""
    gone = (
        f"{count(len(one.deleted), 'message', 'messages')} ({positions_text(one.deleted)}) "
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


def _left_out(step: TraceStep) -> list[str]:
    """The step's notes on its messages a pass left out of the model's view, one a pass."""
    notes = []
    own = step.messages
    for before in sorted({m.left_out_before for m in own if m.left_out_before is not None}):
        gone = [m.message for m in own if m.left_out_before == before]
        what = "" if len(gone) == len(own) else _parts(gone) + " "
        note = f"[{what}left out of the model's view by the compaction before step {before}]"
        notes.append(f"  [dim]{escape(note)}[/]")
    return notes


def _parts(messages: Sequence[Message]) -> str:
    names = list(dict.fromkeys(_PARTS.get(m.role, m.role) for m in messages))
    return " and ".join(names)
