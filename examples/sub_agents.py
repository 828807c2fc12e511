"""Sub-agents: the agent hands two parts of its task to children that run at once.

``Harness(containment=Containment(...))`` offers every agent ``spawn_agent``.
Each child is a run in the store, works in the parent's workspace under the
parent's policy (narrowed further if the spawn says so) until its own
criterion passes, and draws on the tree's one ledger. The parent's next turn
reads each child's result, in spawn order. ``store.tree(root)`` lists the
agents; ``ioh tree ROOT`` draws them.

A scripted provider stands in for the model (it answers each agent by its
goal), so this runs offline.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from io_harness import (
    CompletionRequest,
    CompletionResponse,
    Containment,
    Harness,
    RunOutcome,
    Store,
    TaskContract,
    ToolCall,
    WorkspaceFileContains,
)
from io_harness.testing import ScriptedProvider, call, reply


def spawn(goal: str, file: str) -> ToolCall:
    verify = {"kind": "workspace_file_contains", "file": file, "needle": "ok"}
    return call("spawn_agent", goal=goal, verify=verify)


def model(request: CompletionRequest) -> CompletionResponse:
    """Each agent's answers, by its goal (the first message) and how far it has got."""
    goal = str(request.messages[0].text)
    turn = sum(m.role == "assistant" for m in request.messages)
    if goal == "write the report":
        if turn == 0:
            return reply(
                "Two parts, two helpers.",
                [spawn("write the intro", "intro.md"), spawn("write the body", "body.md")],
            )
        return reply("Joining them.", [call("write_file", path="report.md", content="ok\n")])
    file = "intro.md" if "intro" in goal else "body.md"
    return reply(f"Writing {file}.", [call("write_file", path=file, content="ok\n")])


async def main() -> None:
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch, "work")
        work.mkdir()
        contract = TaskContract.workspace(
            "write the report", work, WorkspaceFileContains("report.md", "ok")
        )
        with Store.open(Path(scratch, "runs.db")) as store:
            harness = Harness(
                ScriptedProvider(model),
                store=store,
                containment=Containment(max_depth=1, max_concurrent_agents=2),
            )
            result = await harness.run(contract, run_id="report")

            assert result.outcome is RunOutcome.SUCCESS, result
            for node in store.tree("report"):
                print(
                    f"{'  ' * node.depth}{node.run.id}: {node.run.goal!r} "
                    f"{node.run.outcome} in {node.run.steps} steps"
                )
            print("files:", sorted(p.name for p in work.iterdir()))


if __name__ == "__main__":
    asyncio.run(main())
