"""The trace of one run as typed records: one record type per table, one field per column.

Field names are the column names, so a reader of ``store.trace(run_id)`` and
a reader of the SQLite file speak the same language. JSON columns are decoded
where the value is what a reader wants (``changed``, ``argv``, ``data``,
``detail``, an approval's ``request`` and ``decision``); a column that holds
text as it was sent (a tool call's ``arguments``, a check's ``result``) stays
text, with a ``parsed_`` property beside it. The run id is left out of each
row: every row of a trace belongs to its run.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from io_harness.messages import Message, Usage
from io_harness.policy._approval import ApprovalRequest, Decision
from io_harness.store._records import RunSummary
from io_harness.store._rows import (
    ApprovalStatus,
    Count,
    JsonObjectText,
    JsonText,
    Moment,
    Seconds,
    StoredRecord,
    decoded_json,
)

if TYPE_CHECKING:
    from io_harness.verify import VerificationResult

__all__ = [
    "ApprovalTrace",
    "EventTrace",
    "McpEventTrace",
    "MemoryTrace",
    "PermissionTrace",
    "ProviderCallTrace",
    "RecordT",
    "SandboxChoiceTrace",
    "SandboxEventTrace",
    "StepTrace",
    "ToolCallTrace",
    "Trace",
    "TraceRecord",
    "TreeEventTrace",
    "VerificationTrace",
]


def _json(value: object) -> object:
    """A JSON column's text decoded (within the stored depth); a value built in Python as
    it is."""
    return decoded_json(value)


class TraceRecord(StoredRecord):
    """One stored row of a trace; :meth:`columns` are the columns a store selects for it."""


RecordT = TypeVar("RecordT", bound=TraceRecord)


class StepTrace(TraceRecord):
    """One committed step (``steps``): when it ran, its token draw and what it cost."""

    row_key: ClassVar[tuple[str, ...]] = ("step",)

    step: int
    started_at: Moment
    finished_at: Moment
    input_tokens: Count
    output_tokens: Count
    cache_read_tokens: Count
    cache_write_tokens: Count
    reasoning_tokens: Count
    cost_micros: Count
    """The step's model calls' priced cost, in micro-units (0: unpriced)."""

    @property
    def usage(self) -> Usage:
        """The step's token counts as one :class:`Usage`."""
        return _usage(self)


class ProviderCallTrace(TraceRecord):
    """One attempt at a model call (``provider_calls``), answered or failed."""

    row_key: ClassVar[tuple[str, ...]] = ("step", "attempt")

    step: int
    attempt: int
    """1 for the first try of the step's call."""
    provider: str
    """The provider that was asked (a Fallback's member names itself)."""
    model: str
    """The model asked for; ``served_model`` is the one that answered."""
    started_at: Moment
    latency: Seconds
    """Seconds until the answer (or the failure)."""
    input_tokens: Count
    output_tokens: Count
    cache_read_tokens: Count
    cache_write_tokens: Count
    reasoning_tokens: Count
    finish_reason: str | None
    error_kind: str | None
    """The ProviderError kind when the attempt failed; ``None`` when it was answered."""
    error_status: int | None
    error_message: str | None
    served_model: str | None
    time_to_first_token: Seconds | None
    """Seconds to the first streamed token; ``None`` when not streamed."""
    cost_micros: Count | None
    """What the attempt cost, in micro-units; ``None``: its model has no price."""

    @property
    def usage(self) -> Usage:
        """The attempt's token counts as one :class:`Usage`."""
        return _usage(self)


class ToolCallTrace(TraceRecord):
    """One tool call and the observation it produced (``tool_calls``)."""

    row_key: ClassVar[tuple[str, ...]] = ("step", "seq")

    step: int
    seq: int
    """Order within the step, from 1."""
    call_id: str
    name: str
    arguments: JsonText
    """The arguments as JSON text; see :attr:`parsed_arguments`."""
    result: str
    """The observation the model read."""
    is_error: bool
    changed: tuple[str, ...]
    """The paths the call changed."""
    kind: str
    """Which kind of tool answered: ``builtin``, ``caller`` or ``mcp``."""
    duration: Seconds | None
    """Seconds the tool ran; ``None`` when it did not run (refused), or stored before v5."""
    error: str | None
    """What failed inside the tool: its exception or a timeout."""

    @field_validator("changed", mode="before")
    @classmethod
    def _decode(cls, value: object) -> object:
        return _json(value)

    @property
    def parsed_arguments(self) -> Any:
        """The arguments as a JSON value (a dict when the model sent an object)."""
        return json.loads(self.arguments)


class VerificationTrace(TraceRecord):
    """One check of the criterion (``verifications``)."""

    row_key: ClassVar[tuple[str, ...]] = ("step", "seq")

    step: int
    seq: int
    """Order within the step, from 1."""
    trigger: str
    """What ran it: ``file_changed``, ``turn_ended`` or ``resumed``."""
    passed: bool
    criterion: str
    """The success condition's sentence, as the model was shown it."""
    summary: str
    """The verdict in one line."""
    result: JsonObjectText
    """The VerificationResult JSON, the check's output included; see :attr:`parsed_result`."""
    duration: Seconds

    @property
    def parsed_result(self) -> VerificationResult:
        """The whole verdict, with what the check saw."""
        from io_harness.verify import VerificationResult

        return VerificationResult.model_validate_json(self.result)


class EventTrace(TraceRecord):
    """One run event as observers received it (``events``)."""

    row_key: ClassVar[tuple[str, ...]] = ("seq",)

    seq: int
    step: int
    kind: str
    at: Moment
    data: dict[str, Any]
    """The event's fields."""

    @field_validator("data", mode="before")
    @classmethod
    def _decode(cls, value: object) -> object:
        return _json(value)


class PermissionTrace(TraceRecord):
    """One verdict of the gate and what was decided on it (``permissions``)."""

    row_key: ClassVar[tuple[str, ...]] = ("seq",)

    seq: int
    """Order within the run, from 1."""
    step: int
    call_id: str
    """The tool call that asked; ``""`` for the criterion's commands."""
    act: str
    """``read``, ``write``, ``exec`` or ``net``."""
    target: str
    """The canonical path, program or ``host[:port]``."""
    argv: tuple[str, ...] | None
    """The whole command, for an exec."""
    effect: str
    """The policy's verdict: ``allow``, ``ask`` or ``deny``."""
    rule: str | None
    """The rule that decided; ``None``: the act's default."""
    layer: str | None
    decision: str
    """``allowed``, ``refused``, ``approved``, ``denied``, ``deferred`` or ``skipped``."""
    decided_by: str
    """``policy``, ``remembered``, the approver, or who gave a stored decision."""
    reason: str
    at: Moment

    @field_validator("argv", mode="before")
    @classmethod
    def _decode(cls, value: object) -> object:
        return _json(value)


class ApprovalTrace(TraceRecord):
    """An action an approver deferred (``approvals``): pending, decided, performing or done."""

    row_key: ClassVar[tuple[str, ...]] = ("id",)

    id: str
    """The request id ``ioh approve`` and ``resume(decision=...)`` refer to."""
    step: int
    status: ApprovalStatus
    """``pending``, ``decided``, ``performing`` or ``done``."""
    request: ApprovalRequest
    progress: JsonObjectText
    """The interrupted step so far, as JSON (the loop's own format)."""
    decision: Decision | None
    """The decision once one was stored."""
    created_at: Moment
    decided_at: Moment | None

    @field_validator("request", "decision", mode="before")
    @classmethod
    def _decode(cls, value: object) -> object:
        return _json(value)


class McpEventTrace(TraceRecord):
    """One thing an MCP server of the run did (``mcp_events``)."""

    row_key: ClassVar[tuple[str, ...]] = ("seq",)

    seq: int
    """Order within the run, from 1."""
    step: int
    """The step it happened in; 0 while the run started."""
    server: str
    kind: str
    """``start``, ``handshake``, ``list``, ``call``, ``restart`` or ``close``."""
    detail: dict[str, Any]
    """What ``kind`` says: the tool, its duration and outcome, the tool count, an error."""
    at: Moment

    @field_validator("detail", mode="before")
    @classmethod
    def _decode(cls, value: object) -> object:
        return _json(value)


class CompactionTrace(TraceRecord):
    """One edit of the run's view by a compaction pass (``compactions``)."""

    row_key: ClassVar[tuple[str, ...]] = ("seq",)

    seq: int
    step: int
    """The step the pass ran before."""
    kind: str
    """``summary`` or ``delete``."""
    message: int | None
    """The deleted message's position in the conversation, from 1."""
    text: str | None
    """The summary."""
    at: Moment


class TreeEventTrace(TraceRecord):
    """One thing the run did as an agent of a tree (``tree_events``)."""

    row_key: ClassVar[tuple[str, ...]] = ("seq",)

    seq: int
    """Order within the tree, from 1."""
    step: int
    kind: str
    """``spawn`` (``child``, ``goal``, ``call_id``), ``refuse`` (``cap``, ``reason``,
    ``call_id``) or ``draw`` (``tokens``, ``cost_micros``, the tree's totals after it)."""
    detail: dict[str, Any]
    at: Moment

    @field_validator("detail", mode="before")
    @classmethod
    def _decode(cls, value: object) -> object:
        return _json(value)


class SandboxEventTrace(TraceRecord):
    """One thing the sandbox did for a command (``sandbox_events``)."""

    row_key: ClassVar[tuple[str, ...]] = ("seq",)

    seq: int
    """Order within the run, from 1."""
    step: int
    call_id: str
    """The exec tool call; ``""`` for the criterion's commands."""
    kind: str
    """``create``, ``exec``, ``cap_hit``, ``net`` or ``destroy``."""
    backend: str
    """The sandbox's name; ``none`` when the command ran directly."""
    detail: dict[str, Any]
    """What ``kind`` says: mode and limits, argv and duration, the cap, the connection."""
    at: Moment

    @field_validator("detail", mode="before")
    @classmethod
    def _decode(cls, value: object) -> object:
        return _json(value)


class MemoryTrace(TraceRecord):
    """One change the run made to memory (``memory_log``)."""

    row_key: ClassVar[tuple[str, ...]] = ("seq",)

    seq: int
    """Order of changes in the store, from 1."""
    workspace: str
    """The workspace's canonical root: memory is kept per workspace."""
    key: str
    op: str
    """``set``, ``forget`` or ``evict``."""
    value: str | None
    """The value set, or the value lost."""
    step: int | None
    """The step whose tool call made the change."""
    call_id: str | None
    """The tool call that made the change (an eviction names the set that caused it)."""
    at: Moment


class SandboxChoiceTrace(BaseModel):
    """The sandbox of a run's last start or resume (the ``runs.sandbox`` column)."""

    model_config = ConfigDict(frozen=True)

    backend: str
    """The backend's name; ``none`` when commands ran directly."""
    why: str = ""
    """Why this backend: selected for which configuration, given, or opted out."""
    config: dict[str, Any] | None = None
    """The SandboxConfig it was selected for, as JSON values; ``None``: none was."""

    @classmethod
    def from_json(cls, text: str | None) -> SandboxChoiceTrace | None:
        """The column's record; ``None`` when it is empty (stored before v4).

        Text that does not load is kept as the ``why`` of the backend
        ``(unreadable)``, so ``ioh show`` still says what was stored.
        """
        if not text:
            return None
        try:
            return cls.model_validate_json(text)
        except ValidationError:
            return cls(backend="(unreadable)", why=text)


class Trace(BaseModel):
    """Everything stored about one run, row by row, for reports and audits."""

    model_config = ConfigDict(frozen=True)

    run: RunSummary
    messages: tuple[Message, ...]
    steps: tuple[StepTrace, ...]
    provider_calls: tuple[ProviderCallTrace, ...]
    tool_calls: tuple[ToolCallTrace, ...]
    verifications: tuple[VerificationTrace, ...]
    events: tuple[EventTrace, ...]
    permissions: tuple[PermissionTrace, ...] = ()
    """Every verdict of the gate and the decision on it."""
    approvals: tuple[ApprovalTrace, ...] = ()
    """Every deferred action, pending, decided or done."""
    sandbox_events: tuple[SandboxEventTrace, ...] = ()
    """What the sandbox did for each command: create, exec, cap_hit, net, destroy."""
    sandbox: SandboxChoiceTrace | None = None
    """The sandbox of the run's last start (``None``: stored before sandboxes were recorded)."""
    memory: tuple[MemoryTrace, ...] = ()
    """Every change the run made to memory: set, forget, evict."""
    mcp_events: tuple[McpEventTrace, ...] = ()
    """What the run's MCP servers did: start, handshake, list, call, restart, close."""
    tree_events: tuple[TreeEventTrace, ...] = ()
    """What the run did as an agent of a tree: spawns, refused spawns, draws on the ledger."""
    compactions: tuple[CompactionTrace, ...] = ()
    """The edits compaction passes made to the model's view (the messages are all kept)."""


def _usage(row: StepTrace | ProviderCallTrace) -> Usage:
    return Usage(
        input_tokens=row.input_tokens,
        output_tokens=row.output_tokens,
        cache_read_tokens=row.cache_read_tokens,
        cache_write_tokens=row.cache_write_tokens,
        reasoning_tokens=row.reasoning_tokens,
    )
