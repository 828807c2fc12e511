"""Run events: what observers receive as a run works, and what the trace stores.

Each event is a pydantic model tagged by ``kind``. The loop stores a step's
events in the step's transaction and hands them to the observer after that
commit, so an observer never sees a step the store does not hold. Four kinds
reach the observer as they happen instead: :class:`RunStarted`,
:class:`Retrying`, :class:`TokenStreamed` and :class:`ToolStarted`; and
:class:`RunStopped` comes last, when the loop lets go of a run that did not
finish (it paused, or an exception ended it).

Some events are told to observers and never stored, because the store keeps
what they say in its own tables or they exist only for a live view:
:class:`TokenStreamed`, :class:`ToolStarted`, :class:`ProviderCalled` (one per
attempt at a model call, told after the commit that holds its
``provider_calls`` row, before the step's other events) and
:class:`RunStopped`. The fields declared ``exclude`` are told and not stored
either. The ``at``, ``started_at`` and ``duration`` fields say when a thing
happened, whenever the observer is told of it: what exports timings
(``io_harness.otel``) reads them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from io_harness.messages import CompletionRequest, CompletionResponse, StreamDelta, Usage

__all__ = [
    "AwaitingApproval",
    "Observer",
    "ProviderCalled",
    "Retrying",
    "RunContinued",
    "RunEvent",
    "RunFinished",
    "RunStarted",
    "RunStopped",
    "StepFinished",
    "TokenStreamed",
    "ToolCalled",
    "ToolStarted",
    "Trigger",
    "Verified",
]

Trigger = Literal["file_changed", "turn_ended", "resumed"]
"""Why the criterion was checked: a file changed, the model ended its turn, or the
first step after a resume (a crash may have cut off a write's check)."""


class _Event(BaseModel):
    model_config = ConfigDict(frozen=True)

    run_id: str
    step: int
    """The step the event belongs to; 0 before the first step."""


class RunStarted(_Event):
    """A run began, or resumed from its last committed step."""

    kind: Literal["run_started"] = "run_started"
    goal: str
    provider: str
    model: str
    resumed: bool = False
    policy_replaced: bool = False
    """The resume replaced the run's stored policy (explicitly)."""
    parent_id: str | None = Field(None, exclude=True)
    """The run whose ``spawn_agent`` call made this one, for a sub-agent (told, not stored:
    the run's row holds it)."""
    spawn_call: str | None = Field(None, exclude=True)
    """That ``spawn_agent`` call's id (told, not stored)."""
    at: float | None = Field(None, exclude=True)
    """When this start (or resumption) began, Unix time (told, not stored)."""


class Retrying(_Event):
    """A provider call failed transiently and will be tried again after ``delay`` seconds."""

    kind: Literal["retrying"] = "retrying"
    attempt: int
    error_kind: str
    message: str
    delay: float


class TokenStreamed(_Event):
    """A piece of the model's answer arrived (live only: not stored)."""

    kind: Literal["token"] = "token"
    provider: str
    attempt: int
    delta: StreamDelta


class ProviderCalled(_Event):
    """One attempt at a model call ended, answered or failed (told, never stored).

    Told after the commit that holds the attempt's ``provider_calls`` row,
    with what that row holds. ``request`` and ``response`` are the live
    objects, for observers that record content; they are left out of the
    event's data (``model_dump``).
    """

    kind: Literal["provider_called"] = "provider_called"
    attempt: int
    """1 for the first attempt of the step's first call; counts on through the step."""
    provider: str
    """The provider asked (with a Fallback, the member)."""
    model: str
    """The model asked for."""
    served_model: str | None = None
    """The model that answered, as the provider named it."""
    started_at: float
    """When the attempt began, Unix time."""
    duration: float
    """Seconds until the answer or the failure."""
    usage: Usage = Field(default_factory=Usage)
    finish_reason: str | None = None
    error_kind: str | None = None
    """The ProviderError kind of a failed attempt; ``None`` when it was answered."""
    error_status: int | None = None
    error_message: str | None = None
    time_to_first_token: float | None = None
    """Seconds to the first streamed piece; ``None`` when not streamed."""
    cost_micros: int | None = None
    """What the attempt cost; ``None`` when its model has no price."""
    purpose: Literal["answer", "compaction"] = "answer"
    """Whether the call asked for the step's answer or for a compaction pass."""
    request: CompletionRequest | None = Field(None, exclude=True)
    """What the model was sent."""
    response: CompletionResponse | None = Field(None, exclude=True)
    """The answer, on the attempt that got one."""


class ToolStarted(_Event):
    """A tool call of the model's answer begins (told as it happens, never stored)."""

    kind: Literal["tool_started"] = "tool_started"
    call_id: str
    name: str
    at: float
    """When the call began (its acts' checks first), Unix time."""


class ToolCalled(_Event):
    """A tool call ran (or was refused) and produced an observation."""

    kind: Literal["tool_called"] = "tool_called"
    call_id: str
    name: str
    arguments: dict[str, Any] | str
    result: str
    is_error: bool
    changed: tuple[str, ...] = ()
    tool_kind: str = "builtin"
    """Which kind of tool answered: ``builtin``, ``caller`` or ``mcp``."""
    started_at: float | None = None
    """When the call began, Unix time (the acts' checks, then the tool)."""
    duration: float | None = None
    """Seconds from ``started_at`` to the observation (a spawn: until its child started)."""
    error: str | None = None
    """What failed inside the tool (its exception, a timeout), when something did."""


class Verified(_Event):
    """The criterion was checked."""

    kind: Literal["verified"] = "verified"
    trigger: Trigger
    passed: bool
    criterion: str
    summary: str
    output: str
    started_at: float | None = None
    """When the check began, Unix time."""
    duration: float | None = None
    """Seconds the check took."""


class AwaitingApproval(_Event):
    """An approver deferred an act: the run stops until a decision is given."""

    kind: Literal["awaiting_approval"] = "awaiting_approval"
    request_id: str
    act: str
    target: str
    tool: str
    rule: str | None = None
    layer: str | None = None


class StepFinished(_Event):
    """A step was committed."""

    kind: Literal["step_finished"] = "step_finished"
    usage: Usage
    total_usage: Usage
    tool_calls: int
    text: str = ""
    provider: str = ""
    """The provider that answered (with a Fallback, the member that did)."""
    cost_micros: int | None = None
    """What the step's model calls cost; ``None`` when one had no price."""
    total_cost_micros: int = 0
    """The run's priced spend so far."""


class RunFinished(_Event):
    """The run ended with an outcome."""

    kind: Literal["run_finished"] = "run_finished"
    outcome: str
    steps: int
    usage: Usage
    error: str | None = None
    cost_micros: int = 0
    unpriced_calls: int = 0
    finished_at: float | None = None
    """When the run ended, Unix time."""


class RunContinued(_Event):
    """A run that had stopped without success was given more and goes on (stored).

    ``step`` is its last committed step; ``stopped`` the outcome it had ended with;
    ``budget`` the budget it goes on under (replacing the one it had); ``said`` the
    user turn added before its next step, if one was.
    """

    kind: Literal["run_continued"] = "run_continued"
    stopped: str
    budget: dict[str, Any]
    said: str | None = None
    at: float
    """When it was continued, Unix time."""


class RunStopped(_Event):
    """The loop let go of a run that did not finish (told, never stored).

    ``awaiting_approval``: it waits for a decision, on an act of its own or
    of a sub-agent's; ``awaiting_answer``: for the answer to a question; ``error``: an
    exception ended the drive (``error`` names it). A finished run says
    :class:`RunFinished` instead.
    """

    kind: Literal["run_stopped"] = "run_stopped"
    reason: Literal["awaiting_approval", "awaiting_answer", "error"]
    error: str | None = None
    at: float
    """When the loop let go, Unix time."""


RunEvent = Annotated[
    RunStarted
    | Retrying
    | TokenStreamed
    | ProviderCalled
    | ToolStarted
    | ToolCalled
    | Verified
    | AwaitingApproval
    | StepFinished
    | RunFinished
    | RunContinued
    | RunStopped,
    Field(discriminator="kind"),
]
"""Any run event."""

Observer = Callable[[Any], Awaitable[None] | None]
"""A callable given each :data:`RunEvent`; it may be a coroutine function (what it returns
is awaited when it is awaitable)."""
