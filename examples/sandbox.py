"""Commands in a sandbox: caps that kill, and the exec tool inside a run.

First the sandbox on its own: ``select`` picks the best backend this machine
offers (bubblewrap on a Linux machine with it installed), a runaway loop is
killed at its CPU cap, and a write outside the workspace fails. Then a run
whose agent may call ``exec``: the model runs the tests, fixes the code and
the run is verified; every command it ran is a row in ``sandbox_events``.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

from io_harness import (
    Command,
    RunOutcome,
    Store,
    TaskContract,
    ToolResult,
    run_sync,
)
from io_harness.errors import SandboxError
from io_harness.sandbox import SandboxConfig, SandboxLimits, select
from io_harness.testing import ScriptedProvider, call, reply

try:
    sandbox = select(SandboxConfig(limits=SandboxLimits(cpu_seconds=1, wall_seconds=30)))
except SandboxError as exc:
    # No backend here can deny the network; the floor would run only if accepted.
    print(f"no sandbox on this machine: {exc}")
    sys.exit(0)
print(f"backend: {sandbox.name}")


async def show_caps(workspace: Path) -> None:
    spin = await sandbox.run([sys.executable, "-c", "while True: pass"], workdir=workspace)
    print(f"a busy loop: {spin.summary}")
    assert spin.cap_hit == "cpu"

    escape = "open('/usr/escaped.txt', 'w')"
    outside = await sandbox.run([sys.executable, "-c", escape], workdir=workspace)
    print(f"a write outside the workspace: {outside.summary}")
    if sandbox.name != "floor":
        assert outside.exit_code != 0 and not Path("/usr/escaped.txt").exists()


with tempfile.TemporaryDirectory() as scratch:
    root = Path(scratch, "repo")
    root.mkdir()
    asyncio.run(show_caps(root))

    (root / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    check = "from calc import add; assert add(2, 3) == 5, add(2, 3)"
    contract = TaskContract.workspace(
        "make add() add",
        root,
        Command([sys.executable, "-c", check]),
        tools=["exec"],
    )
    # The fix changes the file's size: Python trusts a cached .pyc of the same size
    # and second, and the model's own run of the check left one behind.
    fix = call("edit_file", path="calc.py", search="a - b", replace="a + b  # was a - b")
    provider = ScriptedProvider(
        [
            reply(calls=[call("exec", argv=[sys.executable, "-c", check])]),
            reply(calls=[fix]),
            reply("fixed"),
        ]
    )
    with Store.open(Path(scratch, "runs.db")) as store:
        result = run_sync(contract, provider, store=store, sandbox=sandbox)
        (observation,) = provider.requests[1].messages[-1].content
        assert isinstance(observation, ToolResult)
        print("the model read:", observation.content.splitlines()[0])
        assert result.outcome is RunOutcome.SUCCESS, result
        kinds = [row.kind for row in store.trace(result.run_id).sandbox_events]
        print(f"{result.outcome.value} in {result.sandbox}; sandbox events: {kinds}")
        assert "exec" in kinds and result.sandbox == sandbox.name
