"""A child process for the caller-tool tests that cross a process boundary.

Usage: harness_worker.py DB ROOT PHASE

- ``ask``: a harness whose policy asks before ``open_ticket`` runs; no
  approver, so the run defers (``AWAITING_APPROVAL``).
- ``approve``: a new harness resumes that run with an approval.
- ``crash``: a permissive run whose tool SIGKILLs the process while it
  opens the ticket named ``b`` (the second step), before the step commits.
- ``resume``: a new harness resumes the crashed run.

Every call of the tool appends its title to ``ROOT/../ledger.txt``, so the
parent can count what ran. The model's answers are a pure function of the
conversation, so a resumed run gets the answers the dead one would have.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from functools import partial
from pathlib import Path

import support
from io_harness import (
    Act,
    CompletionRequest,
    CompletionResponse,
    Decision,
    Effect,
    Harness,
    Policy,
    Rule,
    Store,
    Tool,
    tool,
)
from io_harness.testing import ScriptedProvider, call, reply

TITLES = ("a", "b")


contract = partial(support.contract, goal="open the tickets, then write done.txt", max_steps=10)
"""The task: a ticket for each of TITLES, then done.txt."""


def respond(request: CompletionRequest) -> CompletionResponse:
    turn = sum(m.role == "assistant" for m in request.messages)
    if turn < len(TITLES):
        return reply(calls=[call("open_ticket", title=TITLES[turn], priority=2)])
    return reply(calls=[call("write_file", path="done.txt", content="done\n")])


def ticket_tool(ledger: Path, die_on: str | None) -> Tool:
    @tool
    def open_ticket(title: str, priority: int = 3) -> dict[str, object]:
        """Open a ticket in the team's tracker.

        Args:
            title: What the ticket is about.
            priority: 1 (urgent) to 5 (some day).
        """
        with ledger.open("a") as out:
            out.write(f"{title}\n")
        if title == die_on:
            os.kill(os.getpid(), signal.SIGKILL)
        return {"id": f"T-{title}", "priority": priority}

    return open_ticket


def main() -> None:
    db, root, phase = sys.argv[1:4]
    ledger = Path(root).parent / "ledger.txt"
    tools = [ticket_tool(ledger, "b" if phase == "crash" else None)]
    policy = Policy.permissive()
    if phase in ("ask", "approve"):
        policy = policy.layer("tickets").ask_exec("open_ticket")
    harness = Harness(
        ScriptedProvider(respond),
        store=Store.open(db),
        policy=policy,
        tools=tools,
    )
    if phase in ("ask", "crash"):
        result = harness.run_sync(contract(Path(root)), run_id=phase)
    elif phase == "approve":
        # Approved, and remembered: the second ticket is opened without asking again.
        remember = (Rule(act=Act.EXEC, glob="open_ticket", effect=Effect.ALLOW),)
        decision = Decision.approve(remember=remember, by="test operator")
        result = harness.resume_sync("ask", decision=decision)
    else:
        result = harness.resume_sync("crash")
    print(json.dumps({"outcome": result.outcome.value, "steps": result.steps}))


if __name__ == "__main__":
    main()
