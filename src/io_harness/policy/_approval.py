"""What an approver is asked and what it answers."""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict

from io_harness.policy._rules import Act, Rule, Verdict

__all__ = ["ApprovalContext", "ApprovalRequest", "Approver", "Decision"]


class ApprovalRequest(BaseModel):
    """One act the policy asks about, with the tool call that wants it.

    ``id`` names the request for a deferral (``ioh approve`` and
    :func:`~io_harness.resume` refer to it). ``diff`` shows what a write would
    change against the current file; ``argv`` is the whole command of an exec.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    run_id: str
    step: int
    call_id: str
    tool: str
    arguments: dict[str, Any]
    act: Act
    target: str
    argv: tuple[str, ...] | None = None
    diff: str | None = None
    verdict: Verdict
    question: str | None = None
    """Set when the request is the model's question to the person (``ask_user``): what it
    asks. Its decision is an answer (:meth:`Decision.answered`), not an approval."""
    choices: tuple[str, ...] | None = None
    """The answers a question allows, when the model gave a list."""

    def describe(self) -> str:
        """The act and target in one line, e.g. ``write src/app.py (write_file)``; a command's
        argv as a shell would read it back, so an argument with a space is one argument."""
        if self.question is not None:
            return f"question {self.question!r} ({self.tool})"
        shown = shlex.join(self.argv) if self.argv else self.target
        return f"{self.act.value} {shown} ({self.tool})"


@dataclass(frozen=True, slots=True)
class ApprovalContext:
    """What an approver may want beside the request: the run's goal and where it is."""

    goal: str
    run_id: str
    step: int
    verdict: Verdict

    @property
    def rule(self) -> Rule | None:
        """The rule that asked (``None``: the act's default asks)."""
        return self.verdict.rule

    @property
    def layer(self) -> str | None:
        """The layer of the rule that asked."""
        return self.verdict.layer


class Decision(BaseModel):
    """An approver's answer: approve (perhaps changed), deny with a reason, or defer.

    Build one with :meth:`approve`, :meth:`deny` or :meth:`defer`. ``by`` names
    who decided in the trace (the approver's class name when empty).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["approve", "deny", "defer", "answer"]
    modified: dict[str, Any] | None = None
    remember: tuple[Rule, ...] = ()
    reason: str = ""
    by: str = ""
    answer: str | None = None
    """The person's answer to a question (``kind="answer"``), as the model reads it."""

    @classmethod
    def approve(
        cls,
        modified: Mapping[str, Any] | None = None,
        remember: Sequence[Rule] = (),
        *,
        by: str = "",
    ) -> Decision:
        """Let the act happen.

        ``modified`` replaces the tool call's arguments; the changed call is
        checked against the policy again and a deny still refuses it.
        ``remember`` adds rules to the run's remembered layer: an allow there
        answers later asks without asking, and never beats a deny.
        """
        return cls(
            kind="approve",
            modified=dict(modified) if modified is not None else None,
            remember=tuple(remember),
            by=by,
        )

    @classmethod
    def deny(cls, reason: str, *, by: str = "") -> Decision:
        """Refuse the act; ``reason`` reaches the model with the refusal."""
        return cls(kind="deny", reason=reason, by=by)

    @classmethod
    def answered(cls, text: str, *, by: str = "") -> Decision:
        """Answer a question the model asked (``ask_user``); ``text`` is the tool's result."""
        return cls(kind="answer", answer=text, by=by)

    @classmethod
    def defer(cls) -> Decision:
        """Decide later: the action is stored and the run stops awaiting approval."""
        return cls(kind="defer")


@runtime_checkable
class Approver(Protocol):
    """Decides the acts the policy asks about."""

    async def decide(self, request: ApprovalRequest, context: ApprovalContext) -> Decision:
        """The decision on ``request``."""
        ...
