"""Record the demo's cassette: a scripted model solving the demo, written by ``Record``.

Run ``make cassette`` (``python -m io_harness._demo.record``) after changing
the system prompt, tool descriptions or tool output: the demo replays
strictly and refuses a request that differs from the recording.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from io_harness import Policy, Record, RunOutcome, Store, TaskContract, Usage, run
from io_harness._demo import CASSETTE, prepare, use_this_python
from io_harness.testing import ScriptedProvider, call, reply

FIX_WORD_COUNT = (
    '    return len(text.split(" "))',
    "    return len(text.split())",
)
FIX_AVERAGE = (
    "    words = text.split()\n    return sum(",
    "    words = text.split()\n    if not words:\n        return 0.0\n    return sum(",
)


def script() -> ScriptedProvider:
    """A plausible model's answers, with token counts of the size a real model reports."""
    return ScriptedProvider(
        [
            reply(
                "I'll start by looking at the project.",
                [call("list_dir")],
                Usage(input_tokens=812, output_tokens=31),
            ),
            reply(
                "Let me read the code and its tests.",
                [
                    call("read_file", path="textstats.py"),
                    call("read_file", path="test_textstats.py"),
                ],
                Usage(input_tokens=905, output_tokens=58),
            ),
            reply(
                "word_count splits on single spaces only; split() handles any whitespace.",
                [
                    call(
                        "edit_file",
                        path="textstats.py",
                        search=FIX_WORD_COUNT[0],
                        replace=FIX_WORD_COUNT[1],
                    )
                ],
                Usage(input_tokens=1420, output_tokens=87),
            ),
            reply(
                "average_word_length divides by zero on an empty text; return 0.0 there.",
                [
                    call(
                        "edit_file",
                        path="textstats.py",
                        search=FIX_AVERAGE[0],
                        replace=FIX_AVERAGE[1],
                    )
                ],
                Usage(input_tokens=1536, output_tokens=112),
            ),
        ],
        name="demo-model",
        model="demo-model-1",
    )


async def _record(cassette: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="ioh-record-") as scratch:
        path = prepare(Path(scratch) / "demo")
        contract, policy = TaskContract.from_toml(path), Policy.from_toml(path)
        use_this_python()
        recorder = Record(script(), cassette)
        result = await run(contract, recorder, store=Store.memory(), policy=policy)
    if result.outcome is not RunOutcome.SUCCESS:
        raise SystemExit(f"the scripted demo did not succeed: {result}")
    print(f"wrote {cassette} ({result.steps} step{'s' * (result.steps != 1)}, verified)")


if __name__ == "__main__":
    asyncio.run(_record(CASSETTE))
