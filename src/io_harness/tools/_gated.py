"""A tool call through the gate: each of its acts checked, asked, deferred or refused."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

from io_harness.messages import ToolCall
from io_harness.policy._approval import ApprovalRequest, Decision
from io_harness.policy._gate import Access, Cleared, Deferred, Gate, Refused
from io_harness.policy._rules import Effect, Verdict, normalise_target
from io_harness.tools._base import Args, Tool, ToolOutcome, validated
from io_harness.tools._workspace import PathRefused

__all__ = ["Authorized", "Deferral", "ResumePoint", "authorize_call"]


@dataclass(frozen=True, slots=True)
class Deferral:
    """A call stopped at an act the approver will decide later.

    ``cleared`` acts of the call were already allowed; the next resume starts
    at the one ``request`` asks about.
    """

    request: ApprovalRequest
    cleared: int


@dataclass(frozen=True, slots=True)
class ResumePoint:
    """Where a deferred call goes on: after ``cleared`` acts, with the decision on the next.

    The decision holds only for the act ``request`` showed: if the call's act
    now has another target (a symlink changed meanwhile), it is asked again.
    """

    request: ApprovalRequest
    cleared: int
    decision: Decision | None
    interrupted: bool = False
    """A process died while performing the approved act: it is not performed again."""


@dataclass(frozen=True, slots=True)
class Authorized:
    """Every act of the call is cleared; ``rewritten`` holds an approver's new arguments."""

    args: Args
    rewritten: dict[str, Any] | None = None


async def authorize_call(
    gate: Gate, call: ToolCall, tool: Tool[Any], args: Args, resume_at: ResumePoint | None
) -> Authorized | ToolOutcome | Deferral:
    """Check each act of one call in order; stop at the first refusal or deferral."""
    try:
        accesses = list(tool.accesses(args))
    except PathRefused as exc:
        return ToolOutcome(f"{call.name}: {exc}", True)
    start, decision = 0, None
    if resume_at is not None:
        start, decision = resume_at.cleared, resume_at.decision
        refused = _recheck(gate, call, accesses[:start])
        if refused is not None:
            return refused
        if start < len(accesses) and not _same_act(accesses[start], resume_at.request):
            decision = None
    for index in range(start, len(accesses)):
        access = accesses[index]

        def request(verdict: Verdict, access: Access = access) -> ApprovalRequest:
            return ApprovalRequest(
                id=secrets.token_hex(6),
                run_id=gate.run_id,
                step=gate.step,
                call_id=call.id,
                tool=call.name,
                arguments=dict(args.model_dump(mode="json")),
                act=access.act,
                target=verdict.target,
                argv=access.argv,
                diff=_preview(tool, args, gate.readable_quietly(access.target)),
                verdict=verdict,
            )

        clearance = await gate.authorize(access, request, decision)
        decision = None
        if isinstance(clearance, Refused):
            return ToolOutcome(f"{call.name}: {clearance.observation}", True)
        if isinstance(clearance, Deferred):
            return Deferral(clearance.request, index)
        assert isinstance(clearance, Cleared)
        if clearance.decision is not None and clearance.decision.modified is not None:
            return _rewritten(gate, call, tool, clearance.decision.modified)
    return Authorized(args)


def _same_act(access: Access, request: ApprovalRequest) -> bool:
    target = normalise_target(access.act, access.target)
    return (access.act, target, access.argv) == (request.act, request.target, request.argv)


def _recheck(gate: Gate, call: ToolCall, cleared: list[Access]) -> ToolOutcome | None:
    """Acts cleared before a deferral are refused if the policy now denies them."""
    for access in cleared:
        verdict = gate.verdict(access)
        if verdict.effect is Effect.DENY:
            gate.record(access, verdict, "refused", "policy")
            return ToolOutcome(f"{call.name}: refused by the policy: {verdict.describe()}", True)
    return None


def _rewritten(
    gate: Gate, call: ToolCall, tool: Tool[Any], modified: dict[str, Any]
) -> Authorized | ToolOutcome:
    """An approver's rewrite of a call: validated, and every act checked again.

    The approver wrote the new call, so an ask is taken as approved; a deny
    still refuses it.
    """
    checked = validated(tool, call.name, modified)
    if isinstance(checked, ToolOutcome):
        return ToolOutcome(f"the approver's rewrite is not a valid call: {checked.content}", True)
    _, args = checked
    try:
        accesses = tool.accesses(args)
    except PathRefused as exc:
        return ToolOutcome(f"{call.name}: the approver's rewrite: {exc}", True)
    for access in accesses:
        verdict = gate.verdict(access)
        if verdict.effect is Effect.DENY:
            gate.record(access, verdict, "refused", "policy")
            return ToolOutcome(
                f"{call.name}: the approver's rewrite is refused by the policy: "
                f"{verdict.describe()}",
                True,
            )
        gate.record(access, verdict, "approved", "approver's rewrite")
    return Authorized(args, rewritten=modified)


def _preview(tool: Tool[Any], args: Args, show_current: bool) -> str | None:
    try:
        return tool.preview(args, show_current=show_current)
    except Exception as exc:  # a preview that fails must not stop the approval
        return f"(no preview: {type(exc).__name__}: {exc})"
