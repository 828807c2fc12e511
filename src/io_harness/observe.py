"""Run events: what observers receive as a run works, and what the trace stores.

Each event is a pydantic model tagged by ``kind``. The loop stores a step's
events in the step's transaction and hands them to the observer after that
commit, so an observer never sees a step the store does not hold. Three kinds
reach the observer as they happen instead: :class:`RunStarted`,
:class:`Retrying` and :class:`TokenStreamed`; the last is never stored (the
answer it is part of is).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from io_harness.messages import StreamDelta, Usage

__all__ = [
    "AwaitingApproval",
    "Observer",
    "Retrying",
    "RunEvent",
    "RunFinished",
    "RunStarted",
    "StepFinished",
    "TokenStreamed",
    "ToolCalled",
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


class Verified(_Event):
    """The criterion was checked."""

    kind: Literal["verified"] = "verified"
    trigger: Trigger
    passed: bool
    criterion: str
    summary: str
    output: str


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


RunEvent = Annotated[
    RunStarted
    | Retrying
    | TokenStreamed
    | ToolCalled
    | Verified
    | AwaitingApproval
    | StepFinished
    | RunFinished,
    Field(discriminator="kind"),
]
"""Any run event."""

Observer = Callable[[Any], None] | Callable[[Any], Awaitable[None]]
"""A callable given each :data:`RunEvent`; it may be a coroutine function."""
