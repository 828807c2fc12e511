"""``PytestPasses``: the caller's tests, run by the harness's own runner, judged from its record."""

from __future__ import annotations

import ast
import importlib.util
import sys
import tempfile
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from io_harness._process import run_process
from io_harness._validation import read_config_text
from io_harness.errors import ConfigError
from io_harness.verify._base import (
    MISSING,
    CriterionBase,
    Mode,
    Subject,
    VerificationResult,
    given,
)
from io_harness.verify._record import PLUGIN_DIR, PytestRecord, record_env

__all__ = ["PytestPasses", "defined_tests"]

_RUNNER = PLUGIN_DIR / "ioh_runner.py"
_TEST_FILE = "test_criterion.py"


def defined_tests(test_src: str) -> list[str]:
    """The tests a source defines, as ``name`` or ``Class::name``, in order.

    Raises :class:`ConfigError` when the source does not parse or defines none.
    """
    try:
        tree = ast.parse(test_src)
    except SyntaxError as exc:
        raise ConfigError(f"PytestPasses: the test source does not parse: {exc}") from None
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith(
            "test"
        ):
            names.append(node.name)
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            names.extend(
                f"{node.name}::{item.name}"
                for item in node.body
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
                and item.name.startswith("test")
            )
    if not names:
        raise ConfigError("PytestPasses: the test source defines no test functions")
    return names


class PytestPasses(CriterionBase):
    """The caller's pytest tests pass against the subject.

    The tests run in a fresh folder through the harness's runner, with the
    subject's folder (the file's folder, or the workspace root) on
    ``sys.path``: tests import the subject by module name. The verdict comes
    from the runner's record of which tests ran and passed, compared with the
    tests ``test_src`` defines, so a subject that exits the interpreter, skips
    its module or leaves tests uncollected fails.
    """

    kind: Literal["pytest"] = "pytest"
    test_src: str
    timeout: float = Field(300.0, gt=0)

    def __init__(self, test_src: str = MISSING, **data: Any) -> None:
        super().__init__(**given(test_src=test_src), **data)

    @classmethod
    def from_file(cls, path: str | Path, **data: Any) -> PytestPasses:
        """The criterion whose tests are the text of ``path``."""
        return cls(read_config_text(Path(path), "PytestPasses"), **data)

    def check_config(self, mode: Mode) -> None:
        super().check_config(mode)
        defined_tests(self.test_src)
        if importlib.util.find_spec("pytest") is None:
            raise ConfigError("PytestPasses needs pytest installed beside io-harness")

    def describe(self) -> str:
        return (
            "these pytest tests, run by the harness against your code, all pass:\n"
            f"```python\n{self.test_src.rstrip()}\n```"
        )

    def commands(self) -> tuple[tuple[str, ...], ...]:
        return ((sys.executable, "-I", "-B", str(_RUNNER), "<subject>", "<criterion tests>"),)

    async def check(self, subject: Subject) -> VerificationResult:
        expected = defined_tests(self.test_src)
        with tempfile.TemporaryDirectory(prefix="ioh-criterion-") as scratch:
            tests_dir = Path(scratch, "tests")
            tests_dir.mkdir()
            (tests_dir / _TEST_FILE).write_text(self.test_src, encoding="utf-8")
            # The runner's own configuration: no ini file of the subject's is looked for.
            (tests_dir / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
            record_path = Path(scratch, "record.jsonl")
            outcome = await run_process(
                [sys.executable, "-I", "-B", str(_RUNNER), str(subject.root), str(tests_dir)],
                cwd=tests_dir,
                timeout=subject.timeout(self.timeout),
                env=record_env(record_path, python_path=False),
            )
            record = PytestRecord.read(record_path)
        passed, verdict = record.judge_defined(expected)
        if outcome.timed_out:
            passed, verdict = False, "the criterion tests were killed at the timeout"
        output = "\n".join(
            part for part in (verdict, outcome.stdout.strip(), outcome.stderr.strip()) if part
        )
        return VerificationResult(
            passed=passed, criterion=self.describe(), output=output, summary=verdict.splitlines()[0]
        )
