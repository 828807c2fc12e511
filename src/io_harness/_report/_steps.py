"""One agent's trace laid out step by step: what the template shows of each step.

The steps, and which rows are a tool call's, are the trace by step
(``store/_by_step.py``), the view ``ioh show`` prints too. What is added here
is the page's: anchors, arguments laid out, each write's file change, a
spawn's link to its child's section, a check's parts and the feedback the
model read after it, and each message's blocks with links to the call cards
that show its calls and results whole.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from io_harness._report._diffs import FileChange, file_changes
from io_harness.messages import TextBlock, ThinkingBlock, ToolCall, ToolResult
from io_harness.store import StepTrace, ToolCallTrace, Trace, VerificationTrace
from io_harness.store._by_step import CallRows, StepMessage, TraceStep, trace_by_step

__all__ = [
    "Argument",
    "Block",
    "CallView",
    "CheckPart",
    "CheckView",
    "Link",
    "MessageView",
    "StepView",
    "steps_of",
    "task_text",
]

_INLINE_CHARS = 80
"""An argument longer than this, or with a line break, is shown as a block of its own."""


@dataclass(frozen=True, slots=True)
class Argument:
    """One argument of a tool call: a short value inline, a long text as a block."""

    name: str
    text: str
    block: bool


@dataclass(frozen=True, slots=True)
class CallView:
    """A tool call's card: the call with every row that names it, and what the page adds."""

    anchor: str
    rows: CallRows
    arguments: list[Argument]
    change: FileChange | None = None
    child: str | None = None
    """The anchor of the sub-agent this call spawned."""
    child_id: str | None = None

    @property
    def row(self) -> ToolCallTrace:
        """The call's row."""
        return self.rows.row


@dataclass(frozen=True, slots=True)
class CheckPart:
    """One verdict of a criterion's tree (an AllOf's or AnyOf's parts are indented)."""

    depth: int
    passed: bool
    criterion: str
    summary: str
    output: str


@dataclass(slots=True)
class CheckView:
    """One check of the criterion, its verdict, what it saw and the feedback the model read."""

    anchor: str
    row: VerificationTrace
    parts: list[CheckPart]
    raw: str | None = None
    """The stored result, when it does not load as a verdict."""
    feedback: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Block:
    """One content block of a message."""

    kind: str
    """``text``, ``thinking``, ``call`` or ``result`` (one no call card shows)."""
    text: str = ""
    name: str = ""
    is_error: bool = False


@dataclass(frozen=True, slots=True)
class Link:
    """A call or result a message holds that a call card shows whole."""

    name: str
    anchor: str
    is_error: bool = False


@dataclass(frozen=True, slots=True)
class MessageView:
    """A message of the conversation, under its position (from 1).

    ``blocks`` are what only the message shows; its tool calls and results
    that a call card shows whole are ``calls`` and ``results``, links to them.
    """

    position: int
    role: str
    blocks: tuple[Block, ...]
    calls: tuple[Link, ...] = ()
    results: tuple[Link, ...] = ()
    left_out_before: int | None = None
    """The step before which a compaction pass left it out of the model's view."""
    feedback_of: str | None = None
    """The anchor of the failed check whose feedback this message is (shown there whole)."""


@dataclass(frozen=True, slots=True)
class StepView:
    """One step of the page: the step's rows (``rows``), and its cards and messages.

    ``rows`` keeps the rows no card shows: the model's attempts, the
    compaction passes before the step, and the decisions, sandbox and MCP
    events, memory changes, approvals and tree events that name no call.
    """

    anchor: str
    rows: TraceStep
    messages: list[MessageView]
    """The step's messages; step 0's (the task) are shown above the steps, not here."""
    calls: list[CallView]
    checks: list[CheckView]

    @property
    def number(self) -> int:
        """The step's number; 0 for rows of no step (the run's start, its closing record)."""
        return self.rows.number

    @property
    def row(self) -> StepTrace | None:
        """The committed step; ``None``: begun and not committed (a failure, a deferral)."""
        return self.rows.row

    @property
    def verdict(self) -> bool | None:
        """The step's last check: passed, failed, or ``None`` when none ran."""
        return self.checks[-1].row.passed if self.checks else None

    @property
    def said(self) -> str:
        """The model's words in this step (its answer's text), for the step list."""
        return " ".join(
            block.text
            for message in self.messages
            if message.role == "assistant"
            for block in message.blocks
            if block.kind == "text"
        )

    @property
    def label(self) -> str:
        """``step N``; rows of no step (the run's start, its closing record) say so."""
        return f"step {self.number}" if self.number else "before step 1"


def steps_of(
    trace: Trace,
    prefix: str,
    *,
    single_file: str | None = None,
    children: Mapping[str, tuple[str, str]] | None = None,
) -> list[StepView]:
    """``trace``'s steps as the page shows them, anchors prefixed with ``prefix``.

    Every step a row names is shown; step 0 only when a row names it, as its
    messages (the task) are shown above the steps. ``single_file`` names a
    single-file run's file; ``children`` maps a spawn call's id to its
    child's (anchor, run id).
    """
    approved = {
        a.request.call_id: a.request.diff for a in trace.approvals if a.request.diff is not None
    }
    changes = file_changes(trace.tool_calls, single_file, approved)
    return [
        _step_view(step, prefix, changes, children or {})
        for step in trace_by_step(trace)
        if step.number or step.has_rows
    ]


def _step_view(
    step: TraceStep,
    prefix: str,
    changes: Mapping[tuple[int, int], FileChange],
    children: Mapping[str, tuple[str, str]],
) -> StepView:
    calls = [_call_view(call, prefix, changes, children) for call in step.calls]
    checks = [_check(row, f"{prefix}-s{row.step}-v{row.seq}") for row in step.verifications]
    links: dict[str, Link] = {}
    for card in calls:  # a message's call is the step's first of its id, as a row's is
        links.setdefault(card.row.call_id, Link(card.row.name, card.anchor))
    failed = [check for check in checks if not check.row.passed]
    messages = []
    for placed in step.messages if step.number else ():
        told = None
        if placed.message.role == "user" and failed:
            failed[-1].feedback.append(placed.message.text)
            told = failed[-1].anchor
        messages.append(_message(placed, links, told))
    return StepView(f"{prefix}-s{step.number}", step, messages, calls, checks)


def _call_view(
    call: CallRows,
    prefix: str,
    changes: Mapping[tuple[int, int], FileChange],
    children: Mapping[str, tuple[str, str]],
) -> CallView:
    row = call.row
    child = children.get(row.call_id) if row.name == "spawn_agent" else None
    return CallView(
        anchor=f"{prefix}-s{row.step}-c{row.seq}",
        rows=call,
        arguments=_arguments(row.arguments),
        change=changes.get((row.step, row.seq)),
        child=child[0] if child else None,
        child_id=child[1] if child else None,
    )


def task_text(trace: Trace) -> str:
    """The task message the agent was given (its first message), as text."""
    return trace.messages[0].text if trace.messages else ""


def _message(
    placed: StepMessage, links: Mapping[str, Link], feedback_of: str | None
) -> MessageView:
    """A message's blocks, its calls and results that a card shows as links to the card."""
    message = placed.message
    blocks: list[Block] = []
    calls: list[Link] = []
    results: list[Link] = []
    for block in message.content:
        if isinstance(block, TextBlock):
            blocks.append(Block("text", block.text))
        elif isinstance(block, ThinkingBlock):
            blocks.append(Block("thinking", "(redacted)" if block.redacted else block.text))
        elif isinstance(block, ToolCall):
            link = links.get(block.id)
            if link is not None:
                calls.append(link)
                continue
            text = (
                block.arguments
                if isinstance(block.arguments, str)
                else json.dumps(block.arguments, indent=2, ensure_ascii=False)
            )
            blocks.append(Block("call", text, block.name))
        elif isinstance(block, ToolResult):
            link = links.get(block.tool_use_id)
            if link is not None:
                results.append(Link(link.name, link.anchor, block.is_error))
                continue
            blocks.append(Block("result", block.content, "", block.is_error))
    return MessageView(
        placed.position,
        message.role,
        tuple(blocks),
        tuple(calls),
        tuple(results),
        placed.left_out_before,
        feedback_of,
    )


def _arguments(raw: str) -> list[Argument]:
    try:
        value: Any = json.loads(raw)
    except ValueError:
        return [Argument("(not JSON)", raw, True)]
    if not isinstance(value, dict):
        return [Argument("(arguments)", json.dumps(value, indent=2, ensure_ascii=False), True)]
    shown = []
    for name, item in value.items():
        if name == "argv" and isinstance(item, list) and all(isinstance(a, str) for a in item):
            text = shlex.join(item)  # a command reads best as the shell would take it
            shown.append(Argument(name, text, "\n" in text or len(text) > _INLINE_CHARS))
            continue
        if isinstance(item, str):
            text = item
            block = "\n" in item or len(item) > _INLINE_CHARS
        else:
            text = json.dumps(item, ensure_ascii=False)
            if len(text) > _INLINE_CHARS:
                text, block = json.dumps(item, indent=2, ensure_ascii=False), True
            else:
                block = False
        shown.append(Argument(str(name), text, block))
    return shown


def _check(row: VerificationTrace, anchor: str) -> CheckView:
    try:
        result = row.parsed_result
    except ValueError:
        return CheckView(anchor, row, [], raw=row.result)
    parts: list[CheckPart] = []
    pending = [(0, result)]
    while pending:
        depth, one = pending.pop(0)
        parts.append(CheckPart(depth, one.passed, one.criterion, one.summary, one.output))
        pending[:0] = [(depth + 1, part) for part in one.parts]
    return CheckView(anchor, row, parts)
