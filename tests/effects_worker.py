"""A child process for the effects-exactly-once crash test.

Usage: python effects_worker.py DB ROOT {run,resume} KILL_AT COUNT

Each step edits story.txt with a replacement that holds its search text (so
an edit applied twice is visible, and breaks the next one) and writes a note.
KILL_AT says when the process SIGKILLs itself: at the COUNT-th model call
(``call``), just after the COUNT-th tool call returns (``tool``), just after
the COUNT-th intent is stored, before its call acts (``intent``), just after
the COUNT-th commit (``commit``), or ``never``. The answers are a pure
function of the conversation.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

from io_harness import (
    Budget,
    CompletionRequest,
    CompletionResponse,
    Store,
    TaskContract,
    ToolCall,
    Usage,
    WorkspaceFileContains,
    resume_sync,
    run_sync,
)
from io_harness.testing import ScriptedProvider, call, reply
from io_harness.tools import RunTools, ToolOutcome
from io_harness.tools._gated import Deferral

EDITS = 5
RUN_ID = "effects"


def story(upto: int) -> str:
    """story.txt after ``upto`` edits."""
    return "-".join(f"<{n}>" for n in range(upto + 1)) + "\n"


def contract(root: Path) -> TaskContract:
    return TaskContract.workspace(
        "grow the story, then write done.txt",
        root,
        WorkspaceFileContains("done.txt", "done"),
        budget=Budget(max_steps=EDITS + 5),
    )


def answer(turn: int) -> CompletionResponse:
    usage = Usage(input_tokens=100 + turn, output_tokens=5)
    if turn < EDITS:
        edit = call(
            "edit_file", path="story.txt", search=f"<{turn}>", replace=f"<{turn}>-<{turn + 1}>"
        )
        note = call("write_file", path=f"notes/{turn}.txt", content=f"edit {turn}\n")
        return reply(f"edit {turn}", [edit, note], usage)
    return reply("finishing", [call("write_file", path="done.txt", content="done\n")], usage)


class Killer:
    def __init__(self, kill_at: str, count: int) -> None:
        self.kill_at, self.count, self.seen = kill_at, count, 0

    def tick(self, moment: str) -> None:
        if moment == self.kill_at:
            self.seen += 1
            if self.seen == self.count:
                os.kill(os.getpid(), signal.SIGKILL)


def arm(killer: Killer, store: Store) -> ScriptedProvider:
    dispatch = RunTools.dispatch

    async def dispatch_then_tick(
        self: RunTools, call: ToolCall, **options: Any
    ) -> ToolOutcome | Deferral:
        outcome = await dispatch(self, call, **options)
        killer.tick("tool")
        return outcome

    RunTools.dispatch = dispatch_then_tick  # type: ignore[method-assign]
    for method, moment in (("commit_step", "commit"), ("journal_step", "intent")):
        original = getattr(store, method)

        def ticking(*args: Any, _original: Any = original, _moment: str = moment) -> None:
            _original(*args)
            killer.tick(_moment)

        setattr(store, method, ticking)

    def respond(request: CompletionRequest) -> CompletionResponse:
        killer.tick("call")
        return answer(sum(m.role == "assistant" for m in request.messages))

    return ScriptedProvider(respond)


def main() -> None:
    db, root, mode, kill_at, count = sys.argv[1:6]
    store = Store.open(db)
    provider = arm(Killer(kill_at, int(count)), store)
    if mode == "run":
        (Path(root) / "story.txt").write_text(story(0))
        result = run_sync(contract(Path(root)), provider, store=store, run_id=RUN_ID)
    else:
        result = resume_sync(RUN_ID, provider, store=store)
    print(json.dumps({"outcome": result.outcome.value, "steps": result.steps}))


if __name__ == "__main__":
    main()
