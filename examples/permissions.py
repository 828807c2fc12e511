"""A policy over the agent's acts: a refusal the model reads, and an ask that waits.

The policy denies reading ``secrets/`` and leaves writes at the default
*ask*. With no approver, the first write the model asks for stops the run
with ``AWAITING_APPROVAL``; the act, its request and the step so far are in
the store. ``resume`` with ``Decision.approve()`` (here the same process; it
could be any later one) performs the write once and the run goes on to pass
its criterion.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from io_harness import (
    Act,
    Decision,
    Policy,
    RunOutcome,
    Store,
    TaskContract,
    ToolResult,
    WorkspaceFileContains,
    resume_sync,
    run_sync,
)
from io_harness.testing import ScriptedProvider, call, reply

with tempfile.TemporaryDirectory() as scratch:
    root = Path(scratch, "repo")
    (root / "secrets").mkdir(parents=True)
    (root / "secrets" / "token.txt").write_text("hunter2\n")
    (root / "app.py").write_text("n = 1\n")

    # Read allowed, write and exec asked, net denied, secrets denied: the default,
    # with one layer of our own on top.
    policy = Policy.guarded().layer("app").deny_read("secrets/*")
    print(policy.explain(Act.READ, "secrets/token.txt").describe())
    print(policy.explain(Act.WRITE, "app.py").describe())

    contract = TaskContract.workspace(
        "set n to 2 in app.py", root, WorkspaceFileContains("app.py", "n = 2")
    )
    with Store.open(Path(scratch, "runs.db")) as store:
        first = ScriptedProvider(
            [
                reply(calls=[call("read_file", path="secrets/token.txt")]),
                reply(calls=[call("write_file", path="app.py", content="n = 2\n")]),
            ]
        )
        waiting = run_sync(contract, first, store=store, policy=policy)

        # The refusal reached the model as the result of its first call.
        (refusal,) = first.requests[1].messages[-1].content
        assert isinstance(refusal, ToolResult) and refusal.is_error
        print("the model read:", refusal.content)
        assert "refused by the policy: read secrets/token.txt: deny" in refusal.content

        assert waiting.outcome is RunOutcome.AWAITING_APPROVAL
        assert waiting.request is not None and waiting.request_id == waiting.request.id
        print(f"{waiting.outcome.value}: {waiting.request.describe()}")
        assert (root / "app.py").read_text() == "n = 1\n"  # nothing written yet

        # Later — any process with the same store — a person approves.
        after = ScriptedProvider([reply("done")])
        done = resume_sync(waiting.run_id, after, store=store, decision=Decision.approve())

        assert done.outcome is RunOutcome.SUCCESS
        assert (root / "app.py").read_text() == "n = 2\n"
        rows = store.trace(done.run_id).permissions
        decisions = [(r.act, r.target, r.decision) for r in rows]
        for act, target, decision in decisions:
            print(f"  {act:5} {target:17} {decision}")
        assert decisions == [
            ("read", "secrets/token.txt", "refused"),
            ("write", "app.py", "deferred"),
            ("write", "app.py", "approved"),
        ]
        print(f"{done.outcome.value} after {done.steps} steps")
