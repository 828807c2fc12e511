"""``spawn_agent``: its arguments and the tool, which hands the call to its agent's node."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import ConfigDict, Field

from io_harness.tools._base import Args, HarnessTool, ToolContext, ToolOutcome
from io_harness.trees._containment import SPAWN_TOOL

if TYPE_CHECKING:
    from io_harness.trees._node import AgentNode

__all__ = ["SpawnArgs", "SpawnTool"]


class SpawnArgs(Args):
    """``spawn_agent``'s arguments."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=False)

    goal: str = Field(min_length=1, description="What the sub-agent is to achieve.")
    verify: dict[str, Any] = Field(
        description=(
            "How its work is checked, as in a contract: "
            '{"kind": "workspace_file_contains", "file": "a.txt", "needle": "text"}, '
            '{"kind": "command", "argv": ["python", "-m", "pytest", "-q"]}, '
            '{"kind": "pytest", "test_src": "def test_x(): ..."}'
        )
    )
    max_steps: int | None = Field(None, ge=1, description="Its step budget.")
    deny_write: list[str] = Field(default_factory=list, description="Paths it may not write.")
    deny_exec: list[str] = Field(default_factory=list, description="Programs it may not run.")
    deny_net: list[str] = Field(default_factory=list, description="Hosts it may not reach.")
    isolate: bool = Field(
        False,
        description=(
            "Work in a private copy of the workspace; its changed files come back when "
            "yours have not changed since."
        ),
    )


class SpawnTool(HarnessTool[SpawnArgs]):
    """``spawn_agent``: hand part of the task to a sub-agent; its result is the observation."""

    name = SPAWN_TOOL
    description = (
        "Hand part of the task to a sub-agent that works in the same workspace under your "
        "policy (narrowed further by deny_write, deny_exec and deny_net) until its criterion "
        "passes. Several spawns in one turn run at once; each result (outcome, steps, tokens, "
        "cost, the files it wrote, its last words, the check's feedback if it failed) comes "
        "back in the next turn, in spawn order."
    )
    args = SpawnArgs

    def __init__(self, node: AgentNode) -> None:
        self.node = node

    async def invoke(self, args: SpawnArgs, context: ToolContext) -> ToolOutcome:
        """Start (or find again) the child; the observation is filled in when the turn ends."""
        return await self.node.spawn(args, context.call_id)
