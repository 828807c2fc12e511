"""A child process for the deferral test: start a run that defers, or resume it with a decision.

Usage: approval_worker.py DB ROOT start|approve|approve-again|approve-and-die|resume

``approve-and-die`` approves, performs the act, and SIGKILLs itself before the
step's commit; ``resume`` then continues without a decision.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

from io_harness import (
    ConfigError,
    Decision,
    Policy,
    Store,
    TaskContract,
    WorkspaceFileContains,
    resume_sync,
    run_sync,
)
from io_harness.store._records import StepRecord
from io_harness.testing import ScriptedProvider, call, reply


def main() -> None:
    db, root, phase = sys.argv[1:4]
    store = Store.open(db)
    contract = TaskContract.workspace(
        "finish the app", Path(root), WorkspaceFileContains("src/app.py", "DONE")
    )
    if phase == "start":
        provider = ScriptedProvider(
            [
                reply(
                    calls=[
                        call("read_file", path="src/app.py"),
                        call(
                            "edit_file",
                            path="src/app.py",
                            search="n = 1",
                            replace="n = 1 + 1  # DONE",
                        ),
                    ]
                )
            ]
        )
        result = run_sync(
            contract, provider, store=store, run_id="deferred", policy=Policy.guarded()
        )
    else:
        if phase == "approve-and-die":

            def die(run_id: str, record: StepRecord) -> None:
                os.kill(os.getpid(), signal.SIGKILL)

            store.commit_step = die  # type: ignore[method-assign]
        decision = None if phase == "resume" else Decision.approve(by="test operator")
        try:
            result = resume_sync(
                "deferred", ScriptedProvider([reply("done")]), store=store, decision=decision
            )
        except ConfigError:
            print(json.dumps({"error": "ConfigError"}))
            return
    print(json.dumps({"outcome": result.outcome.value, "steps": result.steps}))


if __name__ == "__main__":
    main()
