"""The rows the loop hands the store and the views the store hands back.

The store knows nothing of the loop: it writes these records and reads them
back. A step's records are committed together or not at all.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict

from io_harness.messages import Message, Usage

__all__ = [
    "ApprovalRow",
    "CompactionRow",
    "EventRow",
    "Finish",
    "McpEventRow",
    "NewRun",
    "PermissionRow",
    "ProviderAttempt",
    "RunSummary",
    "SandboxEventRow",
    "StepRecord",
    "StoredRun",
    "ToolCallRow",
    "TreeEventRow",
    "TreeNode",
    "TreePlace",
    "VerificationRow",
]


@dataclass(frozen=True, slots=True)
class TreePlace:
    """Where a run sits in a sub-agent tree: its root, its parent, its depth, its spawn call."""

    root_id: str
    parent_id: str | None = None
    depth: int = 0
    spawn_call: str | None = None
    tree_json: str | None = None
    """The root's Containment JSON; a child's spawn settings (its isolated copy, say)."""


@dataclass(frozen=True, slots=True)
class CompactionRow:
    """One edit of a run's view: a ``summary`` (its text) or a ``delete`` of a message (its seq)."""

    kind: str
    step: int
    message: int | None = None
    text: str | None = None
    at: float = 0.0


@dataclass(frozen=True, slots=True)
class TreeEventRow:
    """One thing a tree did: a spawn, a refused spawn, a draw on the ledger."""

    kind: str
    detail_json: str
    at: float


@dataclass(frozen=True, slots=True)
class NewRun:
    """A run as created: its identity, what it will do, its first messages."""

    id: str
    goal: str
    contract_json: str
    system_prompt: str
    tools_json: str
    provider: str
    model: str
    started_at: float
    messages: tuple[Message, ...]
    events: tuple[EventRow, ...] = ()
    policy_json: str | None = None
    """The Policy the run is governed by, as JSON."""
    labels: dict[str, str] = field(default_factory=dict)
    """The caller's labels for the run (``ioh`` keeps the provider specs here)."""
    sandbox_json: str | None = None
    """The sandbox the run's commands run in: ``{backend, why, config}`` as JSON."""
    prices_json: str | None = None
    """The PriceTable the run is priced with, as JSON, so a resume needs none."""
    setup_json: str | None = None
    """What the harness supplied: caller tools (name and spec hash), skills folders, memory."""
    tree: TreePlace | None = None
    """Where the run sits in a sub-agent tree; ``None``: it is in none."""
    tree_events: tuple[TreeEventRow, ...] = ()
    """Written with the run: a child's ``spawn`` row (recorded as its parent's)."""


@dataclass(frozen=True, slots=True)
class EventRow:
    """One run event as stored: its step, kind, when, and its JSON."""

    step: int
    kind: str
    at: float
    data_json: str


@dataclass(frozen=True, slots=True)
class ProviderAttempt:
    """One attempt at one model call, answered or failed."""

    attempt: int
    provider: str
    model: str
    started_at: float
    latency: float
    usage: Usage = field(default_factory=Usage)
    finish_reason: str | None = None
    error_kind: str | None = None
    error_status: int | None = None
    error_message: str | None = None
    served_model: str | None = None
    time_to_first_token: float | None = None
    cost_micros: int | None = None
    """What the attempt cost; ``None`` when its model has no price."""

    @property
    def unpriced(self) -> bool:
        """An answered attempt whose cost is unknown (a failed one used no tokens)."""
        return self.cost_micros is None and self.error_kind is None


@dataclass(frozen=True, slots=True)
class ToolCallRow:
    """One tool call and the observation it produced."""

    call_id: str
    name: str
    arguments_json: str
    result: str
    is_error: bool
    changed: tuple[str, ...]
    kind: str = "builtin"
    """Which kind of tool answered: ``builtin``, ``caller`` or ``mcp``."""
    duration: float | None = None
    """Seconds the tool ran; ``None`` when it did not run (refused, bad arguments)."""
    error: str | None = None
    """What failed inside the tool: its exception or a timeout."""


@dataclass(frozen=True, slots=True)
class VerificationRow:
    """One check of the criterion."""

    trigger: str
    passed: bool
    criterion: str
    summary: str
    result_json: str
    duration: float


@dataclass(frozen=True, slots=True)
class PermissionRow:
    """One verdict of the gate and what was decided on it."""

    call_id: str
    act: str
    target: str
    argv_json: str | None
    effect: str
    rule: str | None
    layer: str | None
    decision: str
    decided_by: str
    reason: str
    at: float


@dataclass(frozen=True, slots=True)
class SandboxEventRow:
    """One thing the sandbox did for a command: create, exec, cap_hit or destroy."""

    call_id: str
    """The exec tool call; ``""`` for the criterion's commands."""
    kind: str
    backend: str
    detail_json: str
    at: float


@dataclass(frozen=True, slots=True)
class McpEventRow:
    """One thing an MCP server of the run did: start, handshake, list, call, restart, close."""

    server: str
    kind: str
    detail_json: str
    at: float


@dataclass(frozen=True, slots=True)
class ApprovalRow:
    """An action an approver deferred, with the step it interrupted.

    ``status`` is ``pending`` until a decision is stored (``decided``) and
    ``done`` once the step that performs the decision is committed.
    """

    id: str
    run_id: str
    step: int
    status: str
    request_json: str
    progress_json: str
    decision_json: str | None
    created_at: float
    decided_at: float | None = None


@dataclass(frozen=True, slots=True)
class Finish:
    """How a run ended."""

    outcome: str
    finished_at: float
    error_json: str | None = None


@dataclass(slots=True)
class StepRecord:
    """Everything one step produced; committed in one transaction.

    ``step`` is 1-based. A record without messages is not a step (the model
    did not answer): it carries what happened before a call that was not
    made or failed — a resumed run's check, failed attempts — and the run's
    end; it writes no ``steps`` row.
    """

    step: int
    started_at: float
    finished_at: float = 0.0
    messages: list[Message] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    attempts: list[ProviderAttempt] = field(default_factory=list)
    tool_calls: list[ToolCallRow] = field(default_factory=list)
    verifications: list[VerificationRow] = field(default_factory=list)
    events: list[EventRow] = field(default_factory=list)
    permissions: list[PermissionRow] = field(default_factory=list)
    sandbox_events: list[SandboxEventRow] = field(default_factory=list)
    mcp_events: list[McpEventRow] = field(default_factory=list)
    finish: Finish | None = None
    remembered_json: str | None = None
    """The run's whole list of remembered rules, when this step changed it."""
    policy_json: str | None = None
    """A policy that replaces the run's from now on (an explicit resume under another)."""
    sandbox_json: str | None = None
    """The sandbox a resume chose (``{backend, why, config}``), stored over the run's."""
    defers: ApprovalRow | None = None
    """The action this record stops at; the run becomes ``awaiting``."""
    resolves: ApprovalRow | None = None
    """The deferred action this record performs (its decision included); it becomes done."""
    earlier_cost_micros: int = 0
    """What this step's model call cost when it was committed before a deferral."""
    tree_events: list[TreeEventRow] = field(default_factory=list)
    """What the run did as an agent of a tree: refused spawns, draws on the ledger."""
    journal_json: str | None = None
    """The step's answer, stored before its calls run (a record that is not yet the step)."""
    compactions: list[CompactionRow] = field(default_factory=list)
    """The edits a compaction pass before this step's model call made."""
    extra_usage: Usage = field(default_factory=Usage)
    """Tokens of calls that are not the step's answer (a compaction pass): the run's totals
    count them, the step's row does not."""
    numbered_on: bool = False
    """The first record after a continuation: the stopped run's last record may have left
    attempts and checks under this step, so this one's are numbered on from those."""

    @property
    def cost_micros(self) -> int:
        """The priced cost of this record's attempts."""
        return sum(a.cost_micros or 0 for a in self.attempts)

    @property
    def step_cost_micros(self) -> int:
        """What this step's model calls cost, those committed before a deferral included."""
        return self.cost_micros + self.earlier_cost_micros

    @property
    def unpriced_calls(self) -> int:
        """This record's answered attempts that have no price."""
        return sum(1 for a in self.attempts if a.unpriced)

    @property
    def counts_as_step(self) -> bool:
        """Whether the model answered in this step (an answered call is a step)."""
        return bool(self.messages)


@dataclass(frozen=True, slots=True)
class StoredRun:
    """A run loaded back from the store: enough to resume it or report it."""

    id: str
    goal: str
    contract_json: str
    system_prompt: str
    tools_json: str
    provider: str
    model: str
    status: str
    outcome: str | None
    steps: int
    usage: Usage
    cost_micros: int
    unpriced_calls: int
    started_at: float
    finished_at: float | None
    error_json: str | None
    verification_json: str | None
    messages: list[Message]
    policy_json: str | None = None
    """The run's Policy JSON; ``None`` for a run stored before policies existed."""
    labels: dict[str, str] = field(default_factory=dict)
    remembered_json: str | None = None
    pending: ApprovalRow | None = None
    """The deferred action the run waits on, when ``status`` is ``awaiting``."""
    sandbox_json: str | None = None
    """The sandbox of the run's last start, ``{backend, why, config}``; ``None`` before v4."""
    prices_json: str | None = None
    """The PriceTable the run was started with; ``None``: unpriced, or stored before v5."""
    setup_json: str | None = None
    """What the harness supplied (see :class:`NewRun`); ``None`` before v5."""
    tree: TreePlace | None = None
    """Where the run sits in a sub-agent tree; ``None``: in none."""
    journal_json: str | None = None
    """The answer of the step in flight, stored before its calls ran; ``None``: none."""
    compactions: tuple[CompactionRow, ...] = ()
    """The edits of the run's view, in order."""


class RunSummary(BaseModel):
    """One line of ``store.runs()``: what ``ioh runs`` prints."""

    model_config = ConfigDict(frozen=True)

    id: str
    goal: str
    status: str
    outcome: str | None
    steps: int
    tokens: int
    cost_micros: int
    unpriced_calls: int
    provider: str
    model: str
    started_at: float
    finished_at: float | None
    labels: dict[str, str] = {}
    """The caller's labels for the run."""


class TreeNode(BaseModel):
    """One agent of a tree, as ``store.tree()`` lists it: its run and its place."""

    model_config = ConfigDict(frozen=True)

    run: RunSummary
    parent_id: str | None
    depth: int
    spawn_call: str | None
