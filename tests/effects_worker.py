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
import sys
from functools import partial
from pathlib import Path

import support
from io_harness import (
    CompletionRequest,
    CompletionResponse,
    Store,
    Usage,
    resume_sync,
    run_sync,
)
from io_harness.testing import ScriptedProvider, call, reply
from support import Killer, arm

EDITS = 5
RUN_ID = "effects"


def story(upto: int) -> str:
    """story.txt after ``upto`` edits."""
    return "-".join(f"<{n}>" for n in range(upto + 1)) + "\n"


contract = partial(
    support.contract, goal="grow the story, then write done.txt", max_steps=EDITS + 5
)
"""The task: EDITS edits of story.txt, then done.txt, with steps to spare."""


def answer(turn: int) -> CompletionResponse:
    usage = Usage(input_tokens=100 + turn, output_tokens=5)
    if turn < EDITS:
        edit = call(
            "edit_file", path="story.txt", search=f"<{turn}>", replace=f"<{turn}>-<{turn + 1}>"
        )
        note = call("write_file", path=f"notes/{turn}.txt", content=f"edit {turn}\n")
        return reply(f"edit {turn}", [edit, note], usage)
    return reply("finishing", [call("write_file", path="done.txt", content="done\n")], usage)


def provider(killer: Killer) -> ScriptedProvider:
    def respond(request: CompletionRequest) -> CompletionResponse:
        killer.tick("call")
        return answer(sum(m.role == "assistant" for m in request.messages))

    return ScriptedProvider(respond)


def main() -> None:
    db, root, mode, kill_at, count = sys.argv[1:6]
    store = Store.open(db)
    killer = Killer(kill_at, int(count))
    arm(killer, store, commit_step="commit", journal_step="intent")
    scripted = provider(killer)
    if mode == "run":
        (Path(root) / "story.txt").write_text(story(0))
        result = run_sync(contract(Path(root)), scripted, store=store, run_id=RUN_ID)
    else:
        result = resume_sync(RUN_ID, scripted, store=store)
    print(json.dumps({"outcome": result.outcome.value, "steps": result.steps}))


if __name__ == "__main__":
    main()
