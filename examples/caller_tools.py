"""The caller's own tool: a ticket lookup the agent calls beside the built-in file tools.

``@tool`` makes a typed function a tool: its name, docstring and parameters
become the spec the model is shown, and each call's arguments are checked
against the parameters before the function runs. Arguments that do not fit
come back to the model as an observation naming the field. Each call is an
``exec`` of the tool's name for the policy, and a ``tool_calls`` row of
kind ``caller`` in the trace.

A scripted provider stands in for the model, so this runs offline.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from io_harness import FileContains, Harness, RunOutcome, Store, TaskContract, ToolResult, tool
from io_harness.testing import ScriptedProvider, call, reply

TICKETS = {"T-42": {"title": "login page times out", "status": "resolved", "owner": "ana"}}


@tool
def lookup_ticket(ticket_id: str) -> dict[str, str]:
    """Look up a support ticket by its id.

    Args:
        ticket_id: The ticket's id, such as "T-42".
    """
    return TICKETS.get(ticket_id, {"error": f"no ticket {ticket_id}"})


async def main() -> None:
    print(lookup_ticket.spec().model_dump_json(indent=2))

    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch, "status.txt")
        contract = TaskContract.file(
            "write the status of ticket T-42 into status.txt", report, FileContains("resolved")
        )
        provider = ScriptedProvider(
            [
                reply("Looking it up.", [call("lookup_ticket", id="T-42")]),
                reply("The argument is ticket_id.", [call("lookup_ticket", ticket_id="T-42")]),
                reply(calls=[call("write_file", content="T-42: resolved (owner: ana)\n")]),
            ]
        )
        with Store.open(Path(scratch, "runs.db")) as store:
            harness = Harness(provider, store=store, tools=[lookup_ticket])
            result = await harness.run(contract)

            assert result.outcome is RunOutcome.SUCCESS, result
            print(f"{result.outcome.value} in {result.steps} steps: {report.read_text().strip()}")

            # What the model read after each of its two lookups.
            for request in provider.requests[1:3]:
                observation = request.messages[-1].content[0]
                assert isinstance(observation, ToolResult)
                print("the model read:", observation.content)

            for row in store.trace(result.run_id).tool_calls:
                ran = f"{row.duration * 1000:.2f} ms" if row.duration is not None else "did not run"
                print(f"  step {row.step} {row.kind:7} {row.name:13} error={row.is_error} {ran}")
            kinds = [(row.kind, row.is_error) for row in store.trace(result.run_id).tool_calls]
            assert kinds == [("caller", True), ("caller", False), ("builtin", False)], kinds


if __name__ == "__main__":
    asyncio.run(main())
