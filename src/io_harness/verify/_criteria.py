"""The criteria a contract can name, each a pydantic model stored with its run."""

from __future__ import annotations

import difflib
import secrets
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field

from io_harness._confined import PathRefused, Workspace
from io_harness._scratch import scratch_folder
from io_harness.sandbox import SandboxOutcome
from io_harness.verify._base import (
    MISSING,
    CriterionBase,
    Mode,
    Subject,
    VerificationResult,
    given,
)
from io_harness.verify._pytest import PytestPasses
from io_harness.verify._record import PytestRecord, RunKey, copy_plugin, record_env

__all__ = [
    "AllOf",
    "AnyOf",
    "Command",
    "Criterion",
    "FileContains",
    "FileEquals",
    "PythonCompiles",
    "WorkspaceFileContains",
]

_SINGLE_FILE: frozenset[Mode] = frozenset({"file"})
_WORKSPACE: frozenset[Mode] = frozenset({"workspace"})


def _read_subject_file(path: Path | None) -> str | None:
    """The text of the contract's file, read from its folder's descriptor; ``None``: no file.

    The contract's path is the caller's, so a symlink it names is resolved
    once; the file there is then opened without following one.
    """
    if path is None:
        return None
    real = path.resolve()
    return _read_confined(Workspace(real.parent, called="the file's folder"), real.name)


def _read_confined(workspace: Workspace, file: str) -> str | None:
    """The text of ``file`` in ``workspace`` (undecodable bytes replaced); ``None``: no file.

    A path that is not a regular file inside is :class:`PathRefused`.
    """
    data = workspace.read_bytes(file)
    return None if data is None else data.decode("utf-8", errors="replace")


def _ending(outcome: SandboxOutcome) -> str:
    """How a command ended, in the words of its report (a cap hit is named)."""
    if outcome.timed_out:
        return "killed at the timeout"
    return outcome.summary


def process_summary(outcome: SandboxOutcome) -> str:
    """How a command ended and the last line it printed (where test runners summarise)."""
    lines = [line for line in outcome.stdout.splitlines() if line.strip()]
    return f"{_ending(outcome)}: {lines[-1][:100]}" if lines else _ending(outcome)


def process_report(outcome: SandboxOutcome, argv: Sequence[str] | None = None) -> str:
    """A command's ending, stdout and stderr, as the model and the trace see them."""
    ending = _ending(outcome)
    if outcome.cap_hit is not None:
        ending += f" (a cap of the {outcome.backend} sandbox)"
    parts = [f"$ {shlex.join(argv or outcome.argv)}", f"[{ending}]"]
    if outcome.stdout.strip():
        parts.append(outcome.stdout.rstrip())
    if outcome.stderr.strip():
        parts.append("[stderr]\n" + outcome.stderr.rstrip())
    if outcome.undone:
        parts.append("[undone by the harness: " + "; ".join(outcome.undone) + "]")
    return "\n".join(parts)


class FileContains(CriterionBase):
    """Single-file mode: the file contains ``needle``."""

    kind: Literal["file_contains"] = "file_contains"
    needle: str

    def __init__(self, needle: str = MISSING, **data: Any) -> None:
        super().__init__(**given(needle=needle), **data)

    def usable_in(self) -> frozenset[Mode]:
        return _SINGLE_FILE

    def describe(self) -> str:
        return f"the file contains the text {self.needle!r}"

    async def check(self, subject: Subject) -> VerificationResult:
        try:
            text = _read_subject_file(subject.file)
        except PathRefused as exc:
            return VerificationResult(passed=False, criterion=self.describe(), output=str(exc))
        if text is None:
            return VerificationResult(
                passed=False, criterion=self.describe(), output="the file does not exist"
            )
        found = self.needle in text
        output = "found" if found else f"the text {self.needle!r} is not in the file"
        return VerificationResult(passed=found, criterion=self.describe(), output=output)


class FileEquals(CriterionBase):
    """Single-file mode: the file's whole content is exactly ``text``."""

    kind: Literal["file_equals"] = "file_equals"
    text: str

    def __init__(self, text: str = MISSING, **data: Any) -> None:
        super().__init__(**given(text=text), **data)

    def usable_in(self) -> frozenset[Mode]:
        return _SINGLE_FILE

    def describe(self) -> str:
        return f"the file's whole content is exactly:\n{self.text}"

    async def check(self, subject: Subject) -> VerificationResult:
        try:
            actual = _read_subject_file(subject.file)
        except PathRefused as exc:
            return VerificationResult(passed=False, criterion=self.describe(), output=str(exc))
        if actual is None:
            return VerificationResult(
                passed=False, criterion=self.describe(), output="the file does not exist"
            )
        if actual == self.text:
            return VerificationResult(passed=True, criterion=self.describe(), output="equal")
        diff = difflib.unified_diff(
            self.text.splitlines(keepends=True),
            actual.splitlines(keepends=True),
            fromfile="expected",
            tofile="actual",
        )
        return VerificationResult(
            passed=False, criterion=self.describe(), output="".join(diff) or "differs"
        )


class WorkspaceFileContains(CriterionBase):
    """Workspace mode: the file at ``file`` (relative to the root) contains ``needle``."""

    kind: Literal["workspace_file_contains"] = "workspace_file_contains"
    file: str
    needle: str

    def __init__(self, file: str = MISSING, needle: str = MISSING, **data: Any) -> None:
        super().__init__(**given(file=file, needle=needle), **data)

    def usable_in(self) -> frozenset[Mode]:
        return _WORKSPACE

    def describe(self) -> str:
        return f"{self.file} contains the text {self.needle!r}"

    async def check(self, subject: Subject) -> VerificationResult:
        try:
            text = _read_confined(Workspace(subject.root), self.file)
        except PathRefused as exc:
            return VerificationResult(passed=False, criterion=self.describe(), output=str(exc))
        if text is None:
            output = f"{self.file} does not exist"
        else:
            output = "found" if self.needle in text else f"the text is not in {self.file}"
        return VerificationResult(
            passed=text is not None and self.needle in text,
            criterion=self.describe(),
            output=output,
        )


class Command(CriterionBase):
    """A command, run without a shell in the root, exits with ``expect_exit``.

    It runs in the workspace root (single-file mode: the file's folder). At
    ``timeout`` seconds the whole process group is killed and the check fails.
    """

    kind: Literal["command"] = "command"
    argv: tuple[str, ...] = Field(min_length=1)
    expect_exit: int = 0
    timeout: float = Field(300.0, gt=0)

    def __init__(self, argv: Sequence[str] = MISSING, **data: Any) -> None:
        super().__init__(**given(argv=argv), **data)

    def describe(self) -> str:
        return f"the command `{shlex.join(self.argv)}` exits with status {self.expect_exit}"

    def commands(self) -> tuple[tuple[str, ...], ...]:
        return (self.argv,)

    async def check(self, subject: Subject) -> VerificationResult:
        pytest_args_at = _pytest_args_start(self.argv)
        if pytest_args_at is None:
            outcome = await subject.execute(self.argv, timeout=subject.timeout(self.timeout))
            passed = outcome.cap_hit is None and outcome.exit_code == self.expect_exit
            return VerificationResult(
                passed=passed,
                criterion=self.describe(),
                output=process_report(outcome),
                summary=process_summary(outcome),
            )
        # A pytest run is judged from the signed record of its own session too, so a
        # subject that ends the interpreter early or leaves no test collected cannot pass.
        key = RunKey()
        with (
            scratch_folder("plugin") as plugin,
            scratch_folder("record") as records,
        ):
            # A per-run module name: a workspace file cannot stand in for the plugin.
            module = f"ioh_record_{secrets.token_hex(8)}"
            copy_plugin(Path(plugin), module=module)
            record_path = Path(records, "record.jsonl")
            argv = [*self.argv[:pytest_args_at], "-p", module, *self.argv[pytest_args_at:]]
            outcome = await subject.execute(
                argv,
                timeout=subject.timeout(self.timeout),
                env=record_env(
                    record_path,
                    python_path=Path(plugin),
                    base={} if subject.sandbox is not None else None,
                ),
                readable=[Path(plugin)],
                writable=[Path(records)],
                stdin=key.stdin,
            )
            record = PytestRecord.read(record_path, key, runner=False)
        passed = outcome.cap_hit is None and outcome.exit_code == self.expect_exit
        report, summary = process_report(outcome, self.argv), process_summary(outcome)
        if passed and self.expect_exit == 0:
            passed, verdict = record.judge_suite()
            report += f"\n[the harness's record of the session: {verdict}]"
            summary = summary if passed else verdict
        return VerificationResult(
            passed=passed, criterion=self.describe(), output=report, summary=summary
        )


def _pytest_args_start(argv: Sequence[str]) -> int | None:
    """Where pytest's own arguments begin, when ``argv`` runs pytest; else ``None``."""
    if Path(argv[0]).name in ("pytest", "py.test"):
        return 1
    for index, arg in enumerate(argv[1:-1], start=1):
        if arg == "-m":
            return index + 2 if argv[index + 1] == "pytest" else None
        if arg == "-c" or not arg.startswith("-"):
            return None  # a script or -c code runs, not a module
    return None


_COMPILE_SCRIPT = """
import sys
bad = 0
for path in sys.argv[1:]:
    try:
        with open(path, "rb") as handle:
            compile(handle.read(), path, "exec", dont_inherit=True)
    except (SyntaxError, ValueError, OSError) as exc:
        bad += 1
        print(f"{path}: {type(exc).__name__}: {exc}")
print(f"{len(sys.argv) - 1 - bad} of {len(sys.argv) - 1} files compile")
sys.exit(1 if bad else 0)
"""


class PythonCompiles(CriterionBase):
    """The named Python files compile (none named: the file, or every ``.py`` in the root)."""

    kind: Literal["python_compiles"] = "python_compiles"
    paths: tuple[str, ...] = ()
    timeout: float = Field(120.0, gt=0)

    def __init__(self, paths: Sequence[str] = (), **data: Any) -> None:
        super().__init__(**{"paths": paths}, **data)

    def describe(self) -> str:
        if self.paths:
            return f"these files compile as Python: {', '.join(self.paths)}"
        return "the Python code compiles"

    def commands(self) -> tuple[tuple[str, ...], ...]:
        return ((sys.executable, "-I", "-B", "-c", "<compile each file>", *self.paths),)

    def _targets(self, subject: Subject) -> list[str]:
        if self.paths:
            return list(self.paths)
        if subject.file is not None:
            return [subject.file.name]
        return [found.rel for found in Workspace(subject.root).walk() if found.name.endswith(".py")]

    async def check(self, subject: Subject) -> VerificationResult:
        targets = self._targets(subject)
        if not targets:
            return VerificationResult(
                passed=False, criterion=self.describe(), output="there are no Python files"
            )
        outcome = await subject.execute(
            [sys.executable, "-I", "-B", "-c", _COMPILE_SCRIPT, *targets],
            timeout=subject.timeout(self.timeout),
            mode="read_only",
        )
        return VerificationResult(
            passed=outcome.exit_code == 0 and outcome.cap_hit is None,
            criterion=self.describe(),
            output=outcome.stdout.strip() or process_report(outcome),
            summary=process_summary(outcome),
        )


class _Combination(CriterionBase):
    criteria: tuple[Criterion, ...] = Field(min_length=1)

    def __init__(self, *criteria: Criterion, **data: Any) -> None:
        if criteria:
            data["criteria"] = criteria
        super().__init__(**data)

    def check_config(self, mode: Mode) -> None:
        for part in self.criteria:
            part.check_config(mode)

    def commands(self) -> tuple[tuple[str, ...], ...]:
        return tuple(argv for part in self.criteria for argv in part.commands())

    def _listing(self, heading: str) -> str:
        return heading + "\n" + "\n".join(f"- {c.describe()}" for c in self.criteria)


class AllOf(_Combination):
    """Every part passes. All parts are checked, so the model sees every failure."""

    kind: Literal["all_of"] = "all_of"

    def __init__(self, *criteria: Criterion, **data: Any) -> None:
        # Its own, though _Combination's is the same: pydantic's mypy plugin would
        # otherwise type the class as called with its fields by keyword only.
        super().__init__(*criteria, **data)

    def describe(self) -> str:
        return self._listing("all of these hold:")

    async def check(self, subject: Subject) -> VerificationResult:
        parts = tuple([await c.check(subject) for c in self.criteria])
        passing = sum(p.passed for p in parts)
        return VerificationResult(
            passed=passing == len(parts),
            criterion=self.describe(),
            output=_summarise(parts),
            summary=f"{passing} of {len(parts)} conditions hold",
            parts=parts,
        )


class AnyOf(_Combination):
    """At least one part passes; checking stops at the first that does."""

    kind: Literal["any_of"] = "any_of"

    def __init__(self, *criteria: Criterion, **data: Any) -> None:
        super().__init__(*criteria, **data)  # typed positionally, as AllOf's

    def describe(self) -> str:
        return self._listing("at least one of these holds:")

    async def check(self, subject: Subject) -> VerificationResult:
        parts: list[VerificationResult] = []
        for criterion in self.criteria:
            parts.append(await criterion.check(subject))
            if parts[-1].passed:
                break
        return VerificationResult(
            passed=parts[-1].passed,
            criterion=self.describe(),
            output=_summarise(tuple(parts)),
            summary=parts[-1].summary if parts[-1].passed else "none of the conditions holds",
            parts=tuple(parts),
        )


def _summarise(parts: tuple[VerificationResult, ...]) -> str:
    return "\n\n".join(
        f"[{'pass' if p.passed else 'FAIL'}] {p.criterion.splitlines()[0]}\n{p.output}".rstrip()
        for p in parts
    )


Criterion = Annotated[
    FileContains
    | FileEquals
    | WorkspaceFileContains
    | Command
    | PythonCompiles
    | PytestPasses
    | AllOf
    | AnyOf,
    Field(discriminator="kind"),
]
"""Any criterion; stored and loaded by its ``kind``."""

AllOf.model_rebuild()
AnyOf.model_rebuild()
