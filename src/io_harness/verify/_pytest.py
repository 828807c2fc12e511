"""``PytestPasses``: the caller's tests, run by the harness's own runner, judged from its record."""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import os
import sys
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from io_harness._scratch import scratch_folder
from io_harness._validation import read_config_text
from io_harness.errors import ConfigError
from io_harness.sandbox import SandboxOutcome
from io_harness.verify._base import (
    MISSING,
    CriterionBase,
    Mode,
    Subject,
    VerificationResult,
    given,
)
from io_harness.verify._record import PLUGIN_DIR, PytestRecord, RunKey, copy_plugin

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

    The tests run from a folder the harness owns, through the harness's runner
    (``python -I -B``, its own ini file, no conftest, no plugin autoload), in
    the subject's sandbox with the subject's folder (the file's folder, or the
    workspace root) read-only and on ``sys.path``: tests import the subject by
    module name. The verdict comes from the runner's signed record of which
    tests ran and passed, compared with the tests ``test_src`` defines, and
    from the runner's exit status, never from the status alone; a record that
    is not whole, or that notes a change to pytest's outcome machinery or the
    criterion's code, fails. See ``docs/verification.md`` for what a pass
    proves.
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
        key = RunKey()
        with (
            scratch_folder("criterion") as harness,
            scratch_folder("record") as records,
        ):
            harness_dir = Path(harness)
            runner_dir, tests_dir = harness_dir / "runner", harness_dir / "tests"
            runner_dir.mkdir()
            tests_dir.mkdir()
            copy_plugin(runner_dir, runner=True)
            (tests_dir / _TEST_FILE).write_text(self.test_src, encoding="utf-8")
            # The runner's own configuration: no ini file of the subject's is looked for.
            (tests_dir / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
            before = _fingerprint_files(harness_dir)
            record_path = Path(records, "record.jsonl")
            outcome = await subject.execute(
                [
                    sys.executable,
                    "-I",
                    "-B",
                    str(runner_dir / "ioh_runner.py"),
                    str(subject.root),
                    str(tests_dir),
                    str(record_path),
                ],
                timeout=subject.timeout(self.timeout),
                env=runner_env(sandboxed=subject.sandbox is not None),
                mode="read_only",
                readable=[harness_dir],
                writable=[Path(records)],
                stdin=key.stdin,
            )
            after = _fingerprint_files(harness_dir)
            changed = sorted(
                n for n in before.keys() | after.keys() if before.get(n) != after.get(n)
            )
            record = PytestRecord.read(record_path, key, runner=True)
        passed, verdict = _verdict(outcome, record, expected, changed)
        output = "\n".join(
            part for part in (verdict, outcome.stdout.strip(), outcome.stderr.strip()) if part
        )
        return VerificationResult(
            passed=passed, criterion=self.describe(), output=output, summary=verdict.splitlines()[0]
        )


def _verdict(
    outcome: SandboxOutcome, record: PytestRecord, expected: list[str], changed: list[str]
) -> tuple[bool, str]:
    """The criterion's verdict: how the runner ended, the harness's files, then the record."""
    if outcome.spawn_error is not None:
        return False, f"the criterion's runner could not start: {outcome.spawn_error}"
    if outcome.cap_hit is not None:
        return False, f"the criterion tests were {outcome.summary} ({outcome.backend} sandbox)"
    if changed:
        return False, "the criterion's own files were changed during the run: " + ", ".join(changed)
    passed, verdict = record.judge_defined(expected)
    if passed and outcome.exit_code != 0:
        return False, f"the criterion's runner ended with {outcome.summary}, not exit status 0"
    return passed, verdict


def _fingerprint_files(folder: Path) -> dict[str, str]:
    """Each file under ``folder`` (relative name) with the SHA-256 of its content."""
    return {
        path.relative_to(folder).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


_KEPT_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "SYSTEMROOT", "TERM")


def runner_env(*, sandboxed: bool) -> dict[str, str]:
    """The runner's environment: no plugin autoload, and nothing of the harness's secrets.

    A sandbox gives the command its own basics (``PATH``, a private ``HOME``);
    without one a few of the harness's pass (no API keys, no ``PYTEST_ADDOPTS``
    or ``PYTEST_PLUGINS``). ``python -I`` ignores the ``PYTHON*`` variables.
    """
    env = {} if sandboxed else {k: os.environ[k] for k in _KEPT_ENV if k in os.environ}
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    return env
