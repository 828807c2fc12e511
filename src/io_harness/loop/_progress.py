"""A step part-way through its tool calls: what a deferral stores and a resume continues."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from io_harness.messages import FinishReason, Message, ToolResult, Usage
from io_harness.store._records import ToolCallRow

__all__ = ["DoneCall", "Intent", "StepProgress"]


class DoneCall(BaseModel):
    """A tool call of the step that has run (or been refused), with its observation."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    call_id: str
    name: str
    arguments_json: str
    result: str
    is_error: bool
    changed: tuple[str, ...] = ()
    kind: str = "builtin"
    duration: float | None = None
    error: str | None = None

    def row(self) -> ToolCallRow:
        """The call as the store's ``tool_calls`` row."""
        return ToolCallRow(
            call_id=self.call_id,
            name=self.name,
            arguments_json=self.arguments_json,
            result=self.result,
            is_error=self.is_error,
            changed=self.changed,
            kind=self.kind,
            duration=self.duration,
            error=self.error,
        )

    def result_block(self) -> ToolResult:
        """The observation as the model reads it."""
        return ToolResult(tool_use_id=self.call_id, content=self.result, is_error=self.is_error)


class Intent(BaseModel):
    """A call about to act, stored before it does: what the files it writes held then.

    ``files`` maps each target (as the policy names it) to the sha256 of its
    bytes, or ``""`` when it did not exist. A step redone after a crash
    compares them with the files now to tell whether the call took effect.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    call_id: str
    files: dict[str, str] = {}


class StepProgress(BaseModel):
    """The model's answer for a step and the calls of it done so far.

    ``cleared`` lists the acts of the next call that were already allowed
    before an approver deferred the one after them; a resume re-checks each,
    and asks again about one whose target has changed.
    """

    model_config = ConfigDict(extra="forbid")

    assistant: Message
    usage: Usage
    finish_reason: FinishReason | None = None
    provider: str
    cost_micros: int
    unpriced: bool
    started_at: float
    done: list[DoneCall] = []
    cleared: list[tuple[str, str]] = []
    """The acts (act, canonical target) of the next call allowed before the deferral."""
    intent: Intent | None = None
    """The call that was about to act when this progress was last stored."""
