"""Single-file mode: the agent may read and write one file, judged by your pytest tests."""

from __future__ import annotations

import tempfile
from pathlib import Path

from io_harness import PytestPasses, RunOutcome, TaskContract, run_sync
from io_harness.testing import ScriptedProvider, call, reply

CRITERION = """
from slug import slugify

def test_lowercases_and_joins_words():
    assert slugify("Hello World") == "hello-world"

def test_drops_punctuation():
    assert slugify("Ready, set: go!") == "ready-set-go"
"""

SOLUTION = """import re


def slugify(text: str) -> str:
    return "-".join(re.findall(r"[a-z0-9]+", text.lower()))
"""

with tempfile.TemporaryDirectory() as scratch:
    contract = TaskContract.file(
        "write slugify(text) in slug.py",
        Path(scratch, "slug.py"),
        verify=PytestPasses(CRITERION),
        constraints=["use only the standard library"],
    )
    provider = ScriptedProvider([reply(calls=[call("write_file", content=SOLUTION)])])

    result = run_sync(contract, provider)

    assert result.outcome is RunOutcome.SUCCESS, result
    print(result.verification.summary if result.verification else "not checked")
