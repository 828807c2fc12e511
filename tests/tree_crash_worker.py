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
import sys
from decimal import Decimal
from functools import partial
from pathlib import Path

import support
from io_harness import (
    CompletionRequest,
    CompletionResponse,
    Containment,
    Decision,
    Harness,
    Policy,
    Price,
    PriceTable,
    Store,
    Usage,
)
from io_harness.testing import ScriptedProvider, reply
from support import Killer, arm, spawn, write

ROOT_ID = "tree"
MIDDLES = ("middle a", "middle b")
LEAVES = {"middle a": ("leaf a1", "leaf a2"), "middle b": ("leaf b1", "leaf b2")}
PRICES = PriceTable({"scripted": Price(input=Decimal("1"), output=Decimal("2"))})
CONTAINMENT = Containment(max_depth=2, max_total_agents=7, max_concurrent_agents=3)
ASKED = "notes/leaf-a2.txt"
"""The file a leaf writes that ``run-ask`` and ``approve`` ask about."""


contract = partial(support.contract, goal="coordinate", file="root.txt", max_steps=6)
"""The root's task: its middles' files, then root.txt."""


def file_of(goal: str) -> str:
    return goal.replace(" ", "-") + ".txt"


def answer(goal: str, turn: int) -> CompletionResponse:
    usage = Usage(input_tokens=100 + 10 * turn + len(goal), output_tokens=5 + turn)
    if goal == "coordinate":
        if turn == 0:
            return reply("splitting", [spawn(m, file_of(m)) for m in MIDDLES], usage)
        return reply("finishing", [write("root.txt")], usage)
    if goal in LEAVES:
        if turn == 0:
            return reply(
                f"{goal}: splitting", [spawn(leaf, file_of(leaf)) for leaf in LEAVES[goal]], usage
            )
        return reply(f"{goal}: finishing", [write(file_of(goal))], usage)
    if turn == 0:
        return reply(f"{goal}: noting", [write(f"notes/{file_of(goal)}", f"{goal}\n")], usage)
    return reply(f"{goal}: finishing", [write(file_of(goal))], usage)


def provider(killer: Killer) -> ScriptedProvider:
    def respond(request: CompletionRequest) -> CompletionResponse:
        goal = str(request.messages[0].text)
        turn = sum(m.role == "assistant" for m in request.messages)
        killer.tick("call")
        return answer(goal, turn)

    return ScriptedProvider(respond)


def main() -> None:
    db, root, mode, kill_at, count = sys.argv[1:6]
    store = Store.open(db)
    killer = Killer(kill_at, int(count))
    arm(killer, store, commit_step="commit")
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
