"""A child process for the crash tests: runs (or resumes) a scripted run, or dies trying.

Usage: python crash_worker.py DB ROOT {run,continue,resume} RUN_ID KILL_STEP KILL_AT

KILL_AT says where the process SIGKILLs itself at step KILL_STEP: ``call``
(while the model call is in flight), ``tool`` (just after the step's tool
wrote its file, before the step commits), ``observer`` (just after the step
committed) or ``never`` (the parent kills it from outside). The answers are
a pure function of the conversation, so a new process resuming the run gets
the same answers the dead one would have.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

import support
from io_harness import (
    Budget,
    CompletionRequest,
    CompletionResponse,
    Harness,
    Store,
    ToolCall,
    Usage,
    resume_sync,
    run_sync,
)
from io_harness.testing import ScriptedProvider, call, reply
from io_harness.tools import RunTools, ToolOutcome
from io_harness.tools._gated import Deferral

STEPS = 8


contract = partial(support.contract, goal="write the notes, then done.txt", max_steps=STEPS + 5)
"""The task: STEPS - 1 notes, then done.txt, with steps to spare."""


def answer(turn: int) -> CompletionResponse:
    usage = Usage(input_tokens=100 + 10 * turn, output_tokens=7 + turn)
    if turn < STEPS - 1:
        note = call("write_file", path=f"notes/{turn}.txt", content=f"note {turn}\n")
        return reply(f"writing note {turn}", [note], usage)
    return reply("finishing", [call("write_file", path="done.txt", content="done\n")], usage)


def provider(kill_step: int, kill_at: str) -> ScriptedProvider:
    def respond(request: CompletionRequest) -> CompletionResponse:
        turn = sum(m.role == "assistant" for m in request.messages)
        if kill_at == "call" and turn + 1 == kill_step:
            os.kill(os.getpid(), signal.SIGKILL)
        if kill_at == "never":
            time.sleep(0.005)  # leaves the parent's kill time to land mid-step
        return answer(turn)

    return ScriptedProvider(respond)


def die_after_tool_call(kill_step: int) -> None:
    """Make the process SIGKILL itself once the tool call of step ``kill_step`` returns."""
    dispatch = RunTools.dispatch
    calls = 0

    async def dispatch_then_die(
        self: RunTools, call: ToolCall, **options: Any
    ) -> ToolOutcome | Deferral:
        nonlocal calls
        outcome = await dispatch(self, call, **options)
        calls += 1  # one tool call per step
        if calls == kill_step:
            os.kill(os.getpid(), signal.SIGKILL)
        return outcome

    RunTools.dispatch = dispatch_then_die  # type: ignore[method-assign]


def main() -> None:
    db, root, mode, run_id, kill_step, kill_at = sys.argv[1:7]
    store = Store.open(db)
    if kill_at == "tool":
        die_after_tool_call(int(kill_step))

    def observer(event: object) -> None:
        if (
            kill_at == "observer"
            and getattr(event, "kind", "") == "step_finished"
            and getattr(event, "step", 0) == int(kill_step)
        ):
            os.kill(os.getpid(), signal.SIGKILL)

    scripted = provider(int(kill_step), kill_at)
    if mode == "run":
        result = run_sync(
            contract(Path(root)), scripted, store=store, run_id=run_id, observer=observer
        )
    elif mode == "continue":  # a run stopped at a small step cap, given the room it needs
        harness = Harness(scripted, store=store, observer=observer)
        more = Budget(max_steps=STEPS + 5)
        result = asyncio.run(harness.continue_run(run_id, budget=more, message="go on"))
    else:
        result = resume_sync(run_id, scripted, store=store)
    print(
        json.dumps(
            {
                "outcome": result.outcome.value,
                "steps": result.steps,
                "tokens": result.usage.total_tokens,
            }
        )
    )


if __name__ == "__main__":
    main()
