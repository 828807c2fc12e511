"""``PytestPasses``: the caller's tests, run by the harness's own runner, judged from its record."""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import re
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from io_harness._process import run_process
from io_harness.errors import ConfigError
from io_harness.verify._base import CriterionBase, Mode, Subject, VerificationResult

__all__ = ["PytestPasses", "defined_tests"]

_RUNNER = Path(__file__).with_name("_pytest_runner.py")
_TEST_FILE = "test_criterion.py"
_PARAMS = re.compile(r"\[.*\]$")


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


@dataclass
class _Record:
    finished: bool = False
    collected: list[str] = field(default_factory=list)
    collect_errors: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    passed: set[str] = field(default_factory=set)
    unreadable_lines: int = 0

    @classmethod
    def read(cls, path: Path) -> _Record:
        record = cls()
        if not path.exists():
            return record
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                event: dict[str, Any] = json.loads(line)
            except json.JSONDecodeError:
                record.unreadable_lines += 1
                continue
            record._add(event)
        record.passed -= set(record.failed)
        return record

    def _add(self, event: dict[str, Any]) -> None:
        kind, nodeid = event.get("event"), str(event.get("nodeid", ""))
        if kind == "finished":
            self.finished = True
        elif kind == "collected":
            self.collected = [str(n) for n in event.get("nodeids", [])]
        elif kind == "collect_error":
            self.collect_errors.append(nodeid or "the test module")
        elif kind == "report":
            when, outcome = event.get("when"), event.get("outcome")
            if outcome == "passed" and when == "call":
                self.passed.add(nodeid)
            elif outcome != "passed":
                self.failed[nodeid] = f"{outcome} in {when}"


def _test_name(nodeid: str) -> str:
    return _PARAMS.sub("", nodeid.split("::", 1)[-1])


def _judge(record: _Record, expected: list[str]) -> tuple[bool, str]:
    if not record.finished:
        return False, "the criterion run ended before pytest finished its session"
    if record.collect_errors:
        return False, "collecting the criterion tests failed: " + ", ".join(record.collect_errors)
    if record.unreadable_lines:
        return False, "the harness's record of the run holds lines it did not write"
    passed_names = {_test_name(n) for n in record.passed}
    missing = [name for name in expected if name not in passed_names]
    failed_names = {_test_name(n) for n in record.failed}
    problems = [f"{_test_name(n)}: {why}" for n, why in sorted(record.failed.items())]
    problems += [f"{name}: did not run" for name in missing if name not in failed_names]
    if problems or not record.passed:
        return False, "criterion tests that did not pass:\n" + "\n".join(
            f"- {p}" for p in problems or ["no test ran"]
        )
    return True, f"all {len(record.passed)} criterion tests passed"


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

    def __init__(self, test_src: str, **data: Any) -> None:
        super().__init__(**{"test_src": test_src}, **data)

    @classmethod
    def from_file(cls, path: str | Path, **data: Any) -> PytestPasses:
        """The criterion whose tests are the text of ``path``."""
        try:
            return cls(Path(path).read_text(encoding="utf-8"), **data)
        except OSError as exc:
            raise ConfigError(f"PytestPasses: cannot read {path}: {exc.strerror}") from None

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
                [
                    sys.executable,
                    "-I",
                    "-B",
                    str(_RUNNER),
                    str(record_path),
                    str(subject.root),
                    str(tests_dir),
                ],
                cwd=tests_dir,
                timeout=subject.timeout(self.timeout),
                env={k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"},
            )
            record = _Record.read(record_path)
        passed, verdict = _judge(record, expected)
        if outcome.timed_out:
            passed, verdict = False, "the criterion tests were killed at the timeout"
        output = "\n".join(
            part for part in (verdict, outcome.stdout.strip(), outcome.stderr.strip()) if part
        )
        return VerificationResult(
            passed=passed, criterion=self.describe(), output=output, summary=verdict.splitlines()[0]
        )
