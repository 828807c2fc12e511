"""One agent's trace laid out step by step: what the template shows of each step.

Every row of the trace lands in exactly one step (the step it names), and a
row that belongs to a tool call (its gate decisions, its sandbox events, its
memory changes, its approval) is shown with that call. Messages follow the
rule ``ioh show`` uses: the n-th assistant message and what follows it (its
tool results, the check's feedback) are step n's; the task is step 0's.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from io_harness._report._diffs import FileChange, file_changes
from io_harness.messages import Message, TextBlock, ThinkingBlock, ToolCall, ToolResult
from io_harness.store import (
    ApprovalTrace,
    CompactionTrace,
    McpEventTrace,
    MemoryTrace,
    PermissionTrace,
    ProviderCallTrace,
    SandboxEventTrace,
    StepTrace,
    ToolCallTrace,
    Trace,
    TreeEventTrace,
    VerificationTrace,
)

__all__ = [
    "Argument",
    "Block",
    "CallView",
    "CheckPart",
    "CheckView",
    "Link",
    "MessageView",
    "PassView",
    "StepView",
    "steps_of",
]

_INLINE_CHARS = 80
"""An argument longer than this, or with a line break, is shown as a block of its own."""


@dataclass(frozen=True, slots=True)
class Argument:
    """One argument of a tool call: a short value inline, a long text as a block."""

    name: str
    text: str
    block: bool


@dataclass(slots=True)
class CallView:
    """A tool call with everything recorded about it."""

    anchor: str
    row: ToolCallTrace
    arguments: list[Argument]
    change: FileChange | None = None
    permissions: list[PermissionTrace] = field(default_factory=list)
    sandbox: list[SandboxEventTrace] = field(default_factory=list)
    memory: list[MemoryTrace] = field(default_factory=list)
    approvals: list[ApprovalTrace] = field(default_factory=list)
    tree: list[TreeEventTrace] = field(default_factory=list)
    """The spawn (or refusal) this call made, as the tree recorded it."""
    child: str | None = None
    """The anchor of the sub-agent this call spawned."""
    child_id: str | None = None


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
class PassView:
    """One compaction pass: its summaries and the messages it left out of the model's view."""

    step: int
    at: float
    summaries: tuple[str, ...]
    deleted: tuple[int, ...]


@dataclass(slots=True)
class StepView:
    """One step and every row of the trace that names it."""

    number: int
    anchor: str
    row: StepTrace | None = None
    messages: list[MessageView] = field(default_factory=list)
    attempts: list[ProviderCallTrace] = field(default_factory=list)
    calls: list[CallView] = field(default_factory=list)
    checks: list[CheckView] = field(default_factory=list)
    permissions: list[PermissionTrace] = field(default_factory=list)
    """Decisions on no listed call: the criterion's commands, a call refused before a row."""
    sandbox: list[SandboxEventTrace] = field(default_factory=list)
    memory: list[MemoryTrace] = field(default_factory=list)
    approvals: list[ApprovalTrace] = field(default_factory=list)
    mcp: list[McpEventTrace] = field(default_factory=list)
    tree: list[TreeEventTrace] = field(default_factory=list)
    passes: list[PassView] = field(default_factory=list)
    pass_attempts: set[int] = field(default_factory=set)
    """The attempts (by number) that answered a compaction pass, not the step's request."""

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
    children: dict[str, tuple[str, str]] | None = None,
) -> list[StepView]:
    """``trace``'s rows by step, anchors prefixed with ``prefix``.

    ``single_file`` names a single-file run's file; ``children`` maps a spawn
    call's id to its child's (anchor, run id).
    """
    steps: dict[int, StepView] = {}

    def step(number: int) -> StepView:
        if number not in steps:
            steps[number] = StepView(number, f"{prefix}-s{number}")
        return steps[number]

    for row in trace.steps:
        step(row.step).row = row
    for attempt in trace.provider_calls:
        step(attempt.step).attempts.append(attempt)

    approved = {
        a.request.call_id: a.request.diff for a in trace.approvals if a.request.diff is not None
    }
    changes = file_changes(trace.tool_calls, single_file, approved)
    cards: dict[tuple[int, str], CallView] = {}
    for call in trace.tool_calls:
        card = CallView(
            anchor=f"{prefix}-s{call.step}-c{call.seq}",
            row=call,
            arguments=_arguments(call.arguments),
            change=changes.get((call.step, call.seq)),
        )
        if call.name == "spawn_agent" and children and call.call_id in children:
            card.child, card.child_id = children[call.call_id]
        cards.setdefault((call.step, call.call_id), card)
        step(call.step).calls.append(card)

    for permission in trace.permissions:
        owner = cards.get((permission.step, permission.call_id))
        (owner.permissions if owner else step(permission.step).permissions).append(permission)
    for event in trace.sandbox_events:
        owner = cards.get((event.step, event.call_id))
        (owner.sandbox if owner else step(event.step).sandbox).append(event)
    for change in trace.memory:
        number = change.step or 0
        owner = cards.get((number, change.call_id or ""))
        (owner.memory if owner else step(number).memory).append(change)
    for approval in trace.approvals:
        owner = cards.get((approval.step, approval.request.call_id))
        (owner.approvals if owner else step(approval.step).approvals).append(approval)
    for mcp in trace.mcp_events:
        step(mcp.step).mcp.append(mcp)
    by_call = {card.row.call_id: card for card in cards.values()}
    for tree_event in trace.tree_events:
        # A spawn is stored before its step commits; it belongs with the call that made it.
        spawner = by_call.get(str(tree_event.detail.get("call_id", "")))
        (spawner.tree if spawner else step(tree_event.step).tree).append(tree_event)

    passes = _passes(trace.compactions)
    for one in passes:
        before = step(one.step)
        before.passes.append(one)
        # A pass's edits are stored as soon as its answer is in: its answer is the step's
        # last answered attempt begun before them.
        answered = [a for a in before.attempts if a.error_kind is None and a.started_at <= one.at]
        if answered:
            before.pass_attempts.add(max(answered, key=lambda a: a.started_at).attempt)
    for check in trace.verifications:
        step(check.step).checks.append(_check(check, f"{prefix}-s{check.step}-v{check.seq}"))

    left_out = {seq: one.step for one in passes for seq in one.deleted}
    links = {key: Link(card.row.name, card.anchor) for key, card in cards.items()}
    for position, (number, message) in enumerate(_by_step(trace.messages), start=1):
        if number == 0:
            continue  # the task is the agent's, shown above its steps
        told = None
        failed = [c for c in step(number).checks if not c.row.passed]
        if message.role == "user" and failed:
            failed[-1].feedback.append(message.text)
            told = failed[-1].anchor
        view = _message(position, message, number, links, left_out.get(position), told)
        step(number).messages.append(view)
    return [steps[number] for number in sorted(steps)]


def task_text(trace: Trace) -> str:
    """The task message the agent was given (its first message), as text."""
    return trace.messages[0].text if trace.messages else ""


def _by_step(messages: Sequence[Message]) -> Iterable[tuple[int, Message]]:
    number = 0
    for message in messages:
        number += message.role == "assistant"
        yield number, message


def _message(
    position: int,
    message: Message,
    number: int,
    links: dict[tuple[int, str], Link],
    left_out_before: int | None,
    feedback_of: str | None,
) -> MessageView:
    blocks: list[Block] = []
    calls: list[Link] = []
    results: list[Link] = []
    for block in message.content:
        if isinstance(block, TextBlock):
            blocks.append(Block("text", block.text))
        elif isinstance(block, ThinkingBlock):
            blocks.append(Block("thinking", "(redacted)" if block.redacted else block.text))
        elif isinstance(block, ToolCall):
            link = links.get((number, block.id))
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
            link = links.get((number, block.tool_use_id))
            if link is not None:
                results.append(Link(link.name, link.anchor, block.is_error))
                continue
            blocks.append(Block("result", block.content, "", block.is_error))
    return MessageView(
        position,
        message.role,
        tuple(blocks),
        tuple(calls),
        tuple(results),
        left_out_before,
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


def _passes(edits: Sequence[CompactionTrace]) -> list[PassView]:
    """Compaction passes from their rows: a pass's edits share its step and time."""
    grouped: dict[tuple[int, float], list[CompactionTrace]] = {}
    for edit in edits:
        grouped.setdefault((edit.step, edit.at), []).append(edit)
    return [
        PassView(
            step,
            at,
            tuple(e.text for e in rows if e.kind == "summary" and e.text),
            tuple(e.message for e in rows if e.kind == "delete" and e.message is not None),
        )
        for (step, at), rows in grouped.items()
    ]
