"""What every criterion shares: the subject it checks and the result it returns."""

from __future__ import annotations

import abc
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, model_validator

from io_harness._validation import CheckedModel
from io_harness.errors import ConfigError
from io_harness.sandbox import Sandbox, SandboxEvent, SandboxMode, SandboxOutcome, run_direct

__all__ = ["MISSING", "CriterionBase", "Mode", "Subject", "VerificationResult", "given"]

Mode = Literal["file", "workspace"]

MISSING: Any = object()
"""The default of a criterion's required positional fields, so a missing one is named.

Pydantic calls a model's own ``__init__`` when it validates nested data (a
contract from TOML), so a required positional parameter would fail with a
``TypeError`` instead of a validation error naming the field.
"""


def given(**fields: Any) -> dict[str, Any]:
    """The fields a caller passed, leaving out those still :data:`MISSING`."""
    return {name: value for name, value in fields.items() if value is not MISSING}


@dataclass(frozen=True, slots=True)
class Subject:
    """What a criterion checks: the contract's file or workspace, and the time left."""

    mode: Mode
    root: Path
    """The workspace root; in single-file mode, the file's folder."""
    file: Path | None = None
    """The file, in single-file mode."""
    deadline: float | None = None
    """``time.monotonic()`` value by which checks must end, from the wall budget."""
    sandbox: Sandbox | None = None
    """Where the criterion's commands run; ``None``: directly, as child processes."""
    events: list[SandboxEvent] = field(default_factory=list)
    """What the sandbox did while checking, in order, for the trace."""

    def timeout(self, wanted: float) -> float:
        """``wanted`` seconds, cut to the time the run has left."""
        if self.deadline is None:
            return wanted
        return max(0.0, min(wanted, self.deadline - time.monotonic()))

    async def execute(
        self,
        argv: Sequence[str],
        *,
        timeout: float,
        env: Mapping[str, str] | None = None,
        mode: SandboxMode | None = None,
        readable: Sequence[Path] = (),
        writable: Sequence[Path] = (),
        stdin: bytes | None = None,
    ) -> SandboxOutcome:
        """Run one of the criterion's commands in the root, in the sandbox when there is one.

        ``timeout`` (already cut by :meth:`timeout`) becomes the wall-clock cap.
        """
        if self.sandbox is None:
            return await run_direct(argv, cwd=self.root, timeout=timeout, env=env, stdin=stdin)
        limits = self.sandbox.config.limits
        outcome = await self.sandbox.run(
            argv,
            workdir=self.root,
            env=env,
            limits=limits.model_copy(update={"wall_seconds": max(timeout, 0.001)}),
            mode=mode,
            readable=readable,
            writable=writable,
            stdin=stdin,
        )
        self.events.extend(outcome.events)
        return outcome


class VerificationResult(BaseModel):
    """The verdict of one criterion, with what the check saw."""

    model_config = ConfigDict(frozen=True)

    passed: bool
    criterion: str
    """The sentence the model is shown as its success condition."""
    output: str = ""
    """What the check saw: command output, the difference, the failing tests."""
    summary: str = ""
    """The verdict in one line, for reports."""
    parts: tuple[VerificationResult, ...] = ()
    """The verdicts of the parts of an ``AllOf`` or ``AnyOf``."""

    @model_validator(mode="after")
    def _default_summary(self) -> VerificationResult:
        if not self.summary:
            lines = [line for line in self.output.splitlines() if line.strip()]
            first = lines[0] if lines else ("passed" if self.passed else "failed")
            object.__setattr__(self, "summary", first[:120])
        return self


class CriterionBase(CheckedModel, abc.ABC):
    """A deterministic success condition the harness checks; the model cannot."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    @abc.abstractmethod
    def describe(self) -> str:
        """The success condition as a sentence the model is shown."""

    def check_config(self, mode: Mode) -> None:
        """Raise :class:`ConfigError` when this criterion cannot judge a ``mode`` run."""
        if mode not in self.usable_in():
            names = {"file": "single-file", "workspace": "workspace"}
            raise ConfigError(
                f"{type(self).__name__} is a {names[next(iter(self.usable_in()))]} criterion "
                f"and cannot check a {names[mode]} contract"
            )

    def usable_in(self) -> frozenset[Mode]:
        """The contract modes this criterion can check."""
        return frozenset({"file", "workspace"})

    def commands(self) -> tuple[tuple[str, ...], ...]:
        """The commands a check runs (each an exec the policy must allow outright)."""
        return ()

    @abc.abstractmethod
    async def check(self, subject: Subject) -> VerificationResult:
        """Judge the subject now."""
