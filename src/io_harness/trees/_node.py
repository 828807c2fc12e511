"""One agent of a tree as its engine sees it: its draws on the ledger and its spawns in flight.

The spawn call only starts the child: the calls of one turn go on, so
several spawns of a turn run at once (up to ``max_concurrent_agents``,
tree-wide), and the turn waits for them all before its results go back to
the model, in spawn order (:meth:`AgentNode.settle`). A spawn looks for the
child its call made already (a step redone after a crash), so a child is
created once and resumed, never started twice.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass

from io_harness.contract import TaskContract
from io_harness.loop._outcome import RunOutcome, RunResult
from io_harness.loop._progress import DoneCall, StepProgress
from io_harness.policy._approval import ApprovalRequest
from io_harness.policy._gate import Gate
from io_harness.store._records import TreeEventRow
from io_harness.tools._base import ToolOutcome
from io_harness.trees._child import child_spec
from io_harness.trees._containment import SPAWN_TOOL, SpawnCap
from io_harness.trees._report import child_report
from io_harness.trees._spawn import SpawnArgs, SpawnTool
from io_harness.trees._tree import Tree

__all__ = ["AgentNode", "Spawned"]


@dataclass
class Spawned:
    """A child this turn started: its run, its drive, the goal it was given."""

    run_id: str
    task: asyncio.Task[RunResult]
    goal: str


class AgentNode:
    """One agent of a tree, as its engine sees it: its place and its spawns in flight."""

    def __init__(
        self, tree: Tree, run_id: str, depth: int, contract: TaskContract, gate: Gate
    ) -> None:
        self.tree = tree
        self.run_id = run_id
        self.depth = depth
        self.contract = contract
        self.gate = gate
        self._spawned: dict[str, Spawned] = {}
        self._rows: list[TreeEventRow] = []

    # -- what the engine asks ------------------------------------------------------

    def tool(self) -> SpawnTool:
        """This agent's ``spawn_agent``."""
        return SpawnTool(self)

    def take_rows(self) -> list[TreeEventRow]:
        """The tree rows this agent made since last asked (refused spawns, draws)."""
        rows, self._rows = self._rows, []
        return rows

    def draw(self, tokens: int, cost_micros: int) -> None:
        """One provider call of this agent, drawn on the tree's ledger and kept as a row."""
        detail = self.tree.ledger.draw(tokens, cost_micros)
        self._rows.append(TreeEventRow("draw", json.dumps(detail), time.time()))

    def exhausted(self) -> RunOutcome | None:
        """The budget outcome this agent ends with when the tree's ledger is spent."""
        spent = self.tree.ledger.exhausted()
        if spent is None:
            return None
        return {
            "tokens": RunOutcome.TOKEN_BUDGET_EXCEEDED,
            "cost": RunOutcome.COST_BUDGET_EXCEEDED,
            "wall": RunOutcome.TIME_BUDGET_EXCEEDED,
        }[spent]

    async def settle(self, done: Sequence[DoneCall]) -> list[DoneCall] | ApprovalRequest:
        """Wait for this turn's children; their results in place of the spawn calls' stand-ins.

        A child that paused for approval pauses this agent too: its request
        is returned (the first, in spawn order), and every other child of the
        turn has ended or paused first.
        """
        spawned, self._spawned = self._spawned, {}
        if not spawned:
            return list(done)
        try:
            results = await asyncio.gather(
                *(s.task for s in spawned.values()), return_exceptions=True
            )
        finally:
            for s in spawned.values():
                s.task.cancel()
        outcomes = dict(zip(spawned, results, strict=True))
        for result in outcomes.values():
            if isinstance(result, RunResult) and result.outcome.awaits:
                assert result.request is not None
                return result.request
        settled = []
        for call in done:
            if call.call_id not in spawned:
                settled.append(call)
                continue
            text, is_error, changed = child_report(
                self, spawned[call.call_id], outcomes[call.call_id]
            )
            settled.append(
                call.model_copy(update={"result": text, "is_error": is_error, "changed": changed})
            )
        return settled

    def abandon(self) -> None:
        """Cancel the children still in flight (the agent is ending mid-turn)."""
        for s in self._spawned.values():
            s.task.cancel()
        self._spawned.clear()

    # -- spawning ------------------------------------------------------------------

    async def spawn_again(self, progress: StepProgress) -> None:
        """Drive on the children of a journaled turn's spawns that were done but not settled.

        A journal is stored mid-turn, before the turn's children are waited
        for, so each spawn call it records as done has a child still at work
        (or never started): each is found by its call and driven again.
        """
        # A refused or malformed spawn is an error observation: it started nothing.
        done = {d.call_id for d in progress.done if d.name == SPAWN_TOOL and not d.is_error}
        for call in progress.assistant.tool_calls:
            if call.id in done:
                with self.gate.calling(call.id):
                    await self.spawn(SpawnArgs.model_validate(call.arguments), call.id)

    async def spawn(self, args: SpawnArgs, call_id: str) -> ToolOutcome:
        """Start the child the call ``call_id`` asks for, or find the one it made already."""
        store = self.tree.store
        existing = store.child_run(self.run_id, call_id)
        if existing is None:
            refused = self.tree.ledger.refusal(self.depth + 1)
            if refused is not None:
                return self._refuse(call_id, *refused)
            spec = child_spec(self, call_id, args)
            self.tree.driver.create_child(spec, self)
            self.tree.ledger.admit()
            existing = spec.run_id
        task = asyncio.create_task(self._drive(existing), name=f"ioh-agent-{existing}")
        self._spawned[call_id] = Spawned(existing, task, args.goal)
        return ToolOutcome(f"sub-agent {existing} started")

    async def _drive(self, run_id: str) -> RunResult:
        async with self.tree.ledger.slot():
            return await self.tree.driver.drive_child(run_id, self)

    def _refuse(self, call_id: str, cap: SpawnCap, reason: str) -> ToolOutcome:
        detail = {"call_id": call_id, "cap": cap, "reason": reason}
        self._rows.append(TreeEventRow("refuse", json.dumps(detail), time.time()))
        return ToolOutcome(f"spawn_agent refused ({cap}): {reason}", is_error=True)
