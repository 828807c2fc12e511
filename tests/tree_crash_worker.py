"""A child process for the tree crash tests: runs (or resumes) a three-level tree, or dies trying.

Usage: python tree_crash_worker.py DB ROOT {run,resume,run-ask,approve} KILL_AT COUNT

The tree: the root spawns two middle agents in one turn; each middle spawns
two leaves in one turn, then writes its own file; each leaf writes a note,
then its file. At most three sub-agents run at once. KILL_AT says when the
process SIGKILLs itself: at the COUNT-th provider call (``call``, while it is
in flight), just after the COUNT-th tool call returns (``tool``), just after
the COUNT-th commit (``commit``), or ``never``. The answers are a pure function
of each agent's conversation, so a new process resuming the tree gets the
answers the dead one would have. ``run-ask`` runs the tree under a policy that
asks before a leaf writes its file (no approver: the tree pauses), and
``approve`` resumes it with an approval.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

from io_harness import (
    Budget,
    CompletionRequest,
    CompletionResponse,
    Containment,
    Decision,
    Harness,
    Policy,
    Price,
    PriceTable,
    Store,
    TaskContract,
    ToolCall,
    Usage,
    WorkspaceFileContains,
)
from io_harness.testing import ScriptedProvider, call, reply
from io_harness.tools import RunTools, ToolOutcome
from io_harness.tools._gated import Deferral

ROOT_ID = "tree"
MIDDLES = ("middle a", "middle b")
LEAVES = {"middle a": ("leaf a1", "leaf a2"), "middle b": ("leaf b1", "leaf b2")}
PRICES = PriceTable({"scripted": Price(input=Decimal("1"), output=Decimal("2"))})
CONTAINMENT = Containment(max_depth=2, max_total_agents=7, max_concurrent_agents=3)
ASKED = "notes/leaf-a2.txt"
"""The file a leaf writes that ``run-ask`` and ``approve`` ask about."""


def contract(root: Path) -> TaskContract:
    return TaskContract.workspace(
        "coordinate", root, WorkspaceFileContains("root.txt", "done"), budget=Budget(max_steps=6)
    )


def file_of(goal: str) -> str:
    return goal.replace(" ", "-") + ".txt"


def spawn(goal: str) -> ToolCall:
    verify = {"kind": "workspace_file_contains", "file": file_of(goal), "needle": "done"}
    return call("spawn_agent", goal=goal, verify=verify)


def write(path: str, text: str = "done\n") -> ToolCall:
    return call("write_file", path=path, content=text)


def answer(goal: str, turn: int) -> CompletionResponse:
    usage = Usage(input_tokens=100 + 10 * turn + len(goal), output_tokens=5 + turn)
    if goal == "coordinate":
        if turn == 0:
            return reply("splitting", [spawn(m) for m in MIDDLES], usage)
        return reply("finishing", [write("root.txt")], usage)
    if goal in LEAVES:
        if turn == 0:
            return reply(f"{goal}: splitting", [spawn(leaf) for leaf in LEAVES[goal]], usage)
        return reply(f"{goal}: finishing", [write(file_of(goal))], usage)
    if turn == 0:
        return reply(f"{goal}: noting", [write(f"notes/{file_of(goal)}", f"{goal}\n")], usage)
    return reply(f"{goal}: finishing", [write(file_of(goal))], usage)


class Killer:
    """Counts provider calls, tool calls and commits; SIGKILLs the process at the chosen one."""

    def __init__(self, kill_at: str, count: int) -> None:
        self.kill_at, self.count, self.seen = kill_at, count, 0

    def tick(self, moment: str) -> None:
        if moment == self.kill_at:
            self.seen += 1
            if self.seen == self.count:
                os.kill(os.getpid(), signal.SIGKILL)


def provider(killer: Killer) -> ScriptedProvider:
    def respond(request: CompletionRequest) -> CompletionResponse:
        goal = str(request.messages[0].text)
        turn = sum(m.role == "assistant" for m in request.messages)
        killer.tick("call")
        return answer(goal, turn)

    return ScriptedProvider(respond)


def arm(killer: Killer, store: Store) -> None:
    dispatch = RunTools.dispatch

    async def dispatch_then_tick(
        self: RunTools, call: ToolCall, **options: Any
    ) -> ToolOutcome | Deferral:
        outcome = await dispatch(self, call, **options)
        killer.tick("tool")
        return outcome

    RunTools.dispatch = dispatch_then_tick  # type: ignore[method-assign]
    commit = store.commit_step

    def commit_then_tick(run_id: str, record: Any) -> None:
        commit(run_id, record)
        killer.tick("commit")

    store.commit_step = commit_then_tick  # type: ignore[method-assign]


def main() -> None:
    db, root, mode, kill_at, count = sys.argv[1:6]
    store = Store.open(db)
    killer = Killer(kill_at, int(count))
    arm(killer, store)
    asks = mode in ("run-ask", "approve")
    policy = Policy.default().layer("review").ask_write(ASKED) if asks else None
    harness = Harness(
        provider(killer), store=store, prices=PRICES, containment=CONTAINMENT, policy=policy
    )
    if mode in ("run", "run-ask"):
        result = harness.run_sync(contract(Path(root)), run_id=ROOT_ID)
    elif mode == "approve":
        result = harness.resume_sync(ROOT_ID, decision=Decision.approve(by="test"))
    else:
        result = harness.resume_sync(ROOT_ID)
    print(json.dumps({"outcome": result.outcome.value, "steps": result.steps}))


if __name__ == "__main__":
    main()
