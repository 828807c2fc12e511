"""A run's trace by step: each step with the rows that name it, each tool call with its own.

``ioh show`` and the HTML report both render from this view; neither groups
rows itself. The rules, each applied here once:

- A row is the step its ``step`` column names; a memory change of no step is
  step 0's.
- A gate decision, a sandbox event, a memory change or an approval that names
  a tool call of its step (by call id) is that call's, the step's first call
  of that id; the rest stay with the step (the criterion's commands, a call
  refused before it had a row).
- A tree event (a spawn, a refused spawn) names the call that made it in its
  detail's ``call_id`` and is that call's, matched by id alone: a spawn is
  stored before its step commits. An id that several steps hold is the last
  such step's. A draw names no call and stays with its step.
- Messages: the n-th assistant message and what follows it (its tool results,
  the check's feedback) are step n's; the task, before them, is step 0's.
- A compaction pass is the edits stored at one time before one step; its
  answer is that step's last answered attempt begun before the edits were
  stored, since a pass's edits are stored as soon as its answer is in.

A step is in the view when any row, any of its calls' rows or any message
names it, so step 0 is there whenever the run has a task.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from io_harness.messages import Message
from io_harness.store._trace import (
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
    "CallRows",
    "CompactionPass",
    "StepMessage",
    "TraceStep",
    "compaction_passes",
    "message_steps",
    "trace_by_step",
]


@dataclass(frozen=True, slots=True)
class CompactionPass:
    """One compaction pass: the edits of the model's view stored together, at one time."""

    step: int
    """The step it ran before."""
    at: float
    summaries: tuple[str, ...]
    deleted: tuple[int, ...]
    """The positions (from 1) of the messages it left out of the model's view."""


@dataclass(frozen=True, slots=True)
class StepMessage:
    """A message of the conversation under its position (from 1)."""

    position: int
    message: Message
    left_out_before: int | None = None
    """The step before which a compaction pass left it out of the model's view."""


@dataclass(slots=True)
class CallRows:
    """A tool call's row and every row that names the call."""

    row: ToolCallTrace
    permissions: list[PermissionTrace] = field(default_factory=list)
    sandbox_events: list[SandboxEventTrace] = field(default_factory=list)
    memory: list[MemoryTrace] = field(default_factory=list)
    approvals: list[ApprovalTrace] = field(default_factory=list)
    tree_events: list[TreeEventTrace] = field(default_factory=list)
    """The spawn (or refused spawn) the call made."""


@dataclass(slots=True)
class TraceStep:
    """One step: its row, messages, model attempts and calls, and the rows on no call.

    The lists of gate decisions, sandbox events, memory changes, approvals and
    tree events hold those that name none of the step's calls; the
    ``every_*`` properties give a kind's rows of the step, on a call or not.
    """

    number: int
    row: StepTrace | None = None
    """The committed step; ``None``: no step of this number was committed."""
    messages: list[StepMessage] = field(default_factory=list)
    attempts: list[ProviderCallTrace] = field(default_factory=list)
    pass_attempts: set[int] = field(default_factory=set)
    """The attempts (by number) that answered a compaction pass, not the step's request."""
    calls: list[CallRows] = field(default_factory=list)
    verifications: list[VerificationTrace] = field(default_factory=list)
    permissions: list[PermissionTrace] = field(default_factory=list)
    sandbox_events: list[SandboxEventTrace] = field(default_factory=list)
    memory: list[MemoryTrace] = field(default_factory=list)
    approvals: list[ApprovalTrace] = field(default_factory=list)
    mcp_events: list[McpEventTrace] = field(default_factory=list)
    tree_events: list[TreeEventTrace] = field(default_factory=list)
    passes: list[CompactionPass] = field(default_factory=list)
    """The compaction passes that ran before this step's request."""

    @property
    def has_rows(self) -> bool:
        """Whether a row names the step (or a call of it): more than messages are its."""
        return bool(
            self.row is not None
            or self.attempts
            or self.calls
            or self.verifications
            or self.permissions
            or self.sandbox_events
            or self.memory
            or self.approvals
            or self.mcp_events
            or self.tree_events
            or self.passes
        )

    @property
    def answer(self) -> Message | None:
        """The model's answer this step holds (the step's assistant message), if any."""
        return next((m.message for m in self.messages if m.message.role == "assistant"), None)

    @property
    def every_permission(self) -> list[PermissionTrace]:
        """The step's gate decisions, its calls' included, in the order they were made."""
        return _in_order(self.permissions, (call.permissions for call in self.calls))

    @property
    def every_sandbox_event(self) -> list[SandboxEventTrace]:
        """What the sandbox did in the step, for its calls or not, in order."""
        return _in_order(self.sandbox_events, (call.sandbox_events for call in self.calls))

    @property
    def every_memory_change(self) -> list[MemoryTrace]:
        """The step's memory changes, its calls' included, in order."""
        return _in_order(self.memory, (call.memory for call in self.calls))


class _Ordered(Protocol):
    @property
    def seq(self) -> int: ...


_OrderedT = TypeVar("_OrderedT", bound=_Ordered)


def _in_order(own: list[_OrderedT], claimed: Iterable[list[_OrderedT]]) -> list[_OrderedT]:
    """A step's rows of one kind, merged back in the order of the table's ``seq``."""
    return sorted([*own, *(row for rows in claimed for row in rows)], key=lambda row: row.seq)


def trace_by_step(trace: Trace) -> list[TraceStep]:
    """``trace``'s rows by step, in step order (see the module for the rules)."""
    steps = _Steps()
    for row in trace.steps:
        steps[row.step].row = row
    for attempt in trace.provider_calls:
        steps[attempt.step].attempts.append(attempt)
    for call in trace.tool_calls:
        steps.add_call(call)
    steps.attach(trace)
    passes = compaction_passes(trace.compactions)
    for one in passes:
        steps.add_pass(one)
    for check in trace.verifications:
        steps[check.step].verifications.append(check)
    left_out = {position: one.step for one in passes for position in one.deleted}
    owners = message_steps(trace.messages)
    for position, (number, message) in enumerate(zip(owners, trace.messages, strict=True), 1):
        steps[number].messages.append(StepMessage(position, message, left_out.get(position)))
    return steps.in_order()


class _Steps(dict[int, TraceStep]):
    """The steps as they are filled: a number asked for is a step from then on."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: dict[tuple[int, str], CallRows] = {}
        """Each step's first call of an id, by (step, call id)."""

    def __missing__(self, number: int) -> TraceStep:
        step = self[number] = TraceStep(number)
        return step

    def add_call(self, row: ToolCallTrace) -> None:
        call = CallRows(row)
        self.calls.setdefault((row.step, row.call_id), call)
        self[row.step].calls.append(call)

    def attach(self, trace: Trace) -> None:
        """Each row that names a call to the call, the others to their step."""
        for permission in trace.permissions:
            owner = self.calls.get((permission.step, permission.call_id))
            (owner.permissions if owner else self[permission.step].permissions).append(permission)
        for event in trace.sandbox_events:
            owner = self.calls.get((event.step, event.call_id))
            (owner.sandbox_events if owner else self[event.step].sandbox_events).append(event)
        for change in trace.memory:
            number = change.step or 0
            owner = self.calls.get((number, change.call_id or ""))
            (owner.memory if owner else self[number].memory).append(change)
        for approval in trace.approvals:
            owner = self.calls.get((approval.step, approval.request.call_id))
            (owner.approvals if owner else self[approval.step].approvals).append(approval)
        for mcp in trace.mcp_events:
            self[mcp.step].mcp_events.append(mcp)
        by_id = {call.row.call_id: call for call in self.calls.values()}
        for tree in trace.tree_events:
            spawner = by_id.get(str(tree.detail.get("call_id", "")))
            (spawner.tree_events if spawner else self[tree.step].tree_events).append(tree)

    def add_pass(self, one: CompactionPass) -> None:
        before = self[one.step]
        before.passes.append(one)
        answered = [a for a in before.attempts if a.error_kind is None and a.started_at <= one.at]
        if answered:
            before.pass_attempts.add(max(answered, key=lambda a: a.started_at).attempt)

    def in_order(self) -> list[TraceStep]:
        return [self[number] for number in sorted(self)]


def compaction_passes(edits: Sequence[CompactionTrace]) -> list[CompactionPass]:
    """Compaction passes from their rows, in the order they ran: a pass's edits share its
    step and its time."""
    grouped: dict[tuple[int, float], list[CompactionTrace]] = {}
    for edit in edits:
        grouped.setdefault((edit.step, edit.at), []).append(edit)
    return [
        CompactionPass(
            step,
            at,
            tuple(e.text for e in rows if e.kind == "summary" and e.text),
            tuple(e.message for e in rows if e.kind == "delete" and e.message is not None),
        )
        for (step, at), rows in grouped.items()
    ]


def message_steps(messages: Sequence[Message]) -> list[int]:
    """Each message's step: the n-th assistant message and what follows it are step n's; the
    task, before them, is step 0's."""
    steps: list[int] = []
    number = 0
    for message in messages:
        number += message.role == "assistant"
        steps.append(number)
    return steps
