"""A run whose process dies mid-step resumes from its last committed step.

The first provider stands for a process that dies during its third model
call: nothing of that step is committed. ``resume`` continues the same
conversation with a new provider; the two committed steps are not repeated.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from io_harness import (
    RunOutcome,
    Store,
    TaskContract,
    Usage,
    WorkspaceFileContains,
    resume_sync,
    run_sync,
)
from io_harness.testing import ScriptedProvider, call, reply


class ProcessDied(BaseException):
    """Stands for SIGKILL: it escapes the run without a chance to commit."""


USAGE = Usage(input_tokens=100, output_tokens=10)

with tempfile.TemporaryDirectory() as scratch:
    root = Path(scratch, "ws")
    root.mkdir()
    contract = TaskContract.workspace(
        "write hello.txt", root, WorkspaceFileContains("hello.txt", "hello")
    )
    store = Store.open(Path(scratch, "runs.db"))

    dying = ScriptedProvider(
        [
            reply(calls=[call("list_dir")], usage=USAGE),
            reply(calls=[call("find", name_glob="*.txt")], usage=USAGE),
            ProcessDied(),
        ]
    )
    try:
        run_sync(contract, dying, store=store, run_id="demo-run")
    except ProcessDied:
        print("the process died during step 3; steps committed:", store.runs()[0].steps)

    fresh = ScriptedProvider(
        [reply(calls=[call("write_file", path="hello.txt", content="hello")], usage=USAGE)]
    )
    result = resume_sync("demo-run", fresh, store=store)

    assert result.outcome is RunOutcome.SUCCESS
    assert result.steps == 3 and result.usage.total_tokens == 3 * USAGE.total_tokens
    tokens = result.usage.total_tokens
    print(f"resumed to {result.outcome.value}: {result.steps} steps, {tokens} tokens")
    store.close()
