"""Record the example suite's cassettes: two scripted models, each run once on each case.

    python examples/eval/record.py

``careful`` reads before it edits and solves both cases at its first try;
``hasty`` claims ``add`` is done before fixing it, then fixes it, and never gets
``greet`` right. Run this again after a change to the harness's prompts or tool
output: a replay is strict and refuses a request that differs from its recording.
It is also an example of the Python API: ``run_suite`` with a ``harness_for`` of
one's own, here recording each run.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from io_harness import CompletionResponse, Harness, Record, ToolCall, Usage
from io_harness.eval import Suite, SuiteProvider, SuiteRun, run_suite
from io_harness.testing import ScriptedProvider, call, reply

HERE = Path(__file__).parent


def said(text: str | None, calls: list[ToolCall], prompt: int, answer: int) -> CompletionResponse:
    """A scripted answer with token counts of the size a real model reports."""
    return reply(text, calls, Usage(input_tokens=prompt, output_tokens=answer))


GREETING = ('return "Hello " + name', 'return f"Hello, {name}!"', 'return "Hello, " + name')
"""greet.py's line as it is, as it should be, and as hasty writes it."""
SCRIPTS: dict[tuple[str, str], list[CompletionResponse]] = {
    ("careful", "add"): [
        said("Reading calc.py first.", [call("read_file", path="calc.py")], 610, 24),
        said(
            "add() subtracts; it should add.",
            [call("edit_file", path="calc.py", search="return a - b", replace="return a + b")],
            702,
            58,
        ),
    ],
    ("careful", "greet"): [
        said("Reading greet.py first.", [call("read_file", path="greet.py")], 622, 25),
        said(
            "The greeting lacks the comma and the exclamation mark.",
            [call("edit_file", path="greet.py", search=GREETING[0], replace=GREETING[1])],
            731,
            66,
        ),
    ],
    ("hasty", "add"): [
        said("add() looks right to me; done.", [], 540, 12),
        said(
            "I see: it subtracts.",
            [call("edit_file", path="calc.py", search="return a - b", replace="return a + b")],
            655,
            41,
        ),
    ],
    ("hasty", "greet"): [
        said(
            "Adding the comma.",
            [call("edit_file", path="greet.py", search=GREETING[0], replace=GREETING[2])],
            548,
            39,
        ),
        said("Done.", [], 611, 3),
        said("It is done.", [], 690, 5),
        said("Done, really.", [], 742, 5),
    ],
}


def recording(run: SuiteRun) -> Harness:
    """A harness whose model is the provider's script for the case, recorded to its cassette."""
    name = run.provider.name
    model = ScriptedProvider(SCRIPTS[name, run.case.name], name=f"{name}-model", model=f"{name}-1")
    cassette = HERE / "cassettes" / name / f"{run.case.name}.jsonl"
    return Harness(Record(model, cassette))


async def main() -> None:
    suite = Suite.from_toml(HERE / "suite.toml")
    once = suite.model_copy(
        update={
            "cases": tuple(case.model_copy(update={"repeat": 1}) for case in suite.cases),
            "providers": tuple(SuiteProvider(name=p.name) for p in suite.providers),
        }
    )
    result = await run_suite(once, harness_for=recording)
    for record in result.records:
        print(f"{record.provider}/{record.case}.jsonl: {record.outcome} in {record.steps} steps")


if __name__ == "__main__":
    asyncio.run(main())
