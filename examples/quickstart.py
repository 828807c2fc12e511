"""The README's example: a workspace contract verified by pytest, run offline.

A scripted provider stands in for the model, so this runs anywhere; swap in
a real provider and the contract stays the same.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

from io_harness import Command, Harness, RunOutcome, Store, TaskContract
from io_harness.testing import ScriptedProvider, call, reply


def make_repo(root: Path) -> None:
    (root / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (root / "test_calc.py").write_text(
        "from calc import add\n\ndef test_add():\n    assert add(2, 3) == 5\n"
    )


async def main() -> None:
    with tempfile.TemporaryDirectory() as scratch:
        repo = Path(scratch, "repo")
        repo.mkdir()
        make_repo(repo)

        contract = TaskContract.workspace(
            "make the test suite pass",
            root=repo,
            verify=Command([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]),
        )
        provider = ScriptedProvider(
            [
                reply("Reading the code.", [call("read_file", path="calc.py")]),
                reply(
                    "add() subtracts; fixing it.",
                    [call("edit_file", path="calc.py", search="a - b", replace="a + b")],
                ),
            ]
        )
        store = Store.open(Path(scratch, "runs.db"))
        result = await Harness(provider, store=store).run(contract)

        assert result.outcome is RunOutcome.SUCCESS
        print(f"{result.outcome.value} in {result.steps} steps: {result.verification.summary}")
        for summary in store.runs():
            print(summary.id, summary.outcome, summary.steps)
        store.close()


if __name__ == "__main__":
    asyncio.run(main())
