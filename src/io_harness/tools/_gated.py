"""A tool call through the gate: each of its acts checked, asked, deferred or refused."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any

from io_harness.messages import ToolCall
from io_harness.policy._approval import ApprovalRequest, Decision
from io_harness.policy._gate import Access, Cleared, Deferred, Gate, Refused
from io_harness.policy._rules import Effect, Verdict, normalise_target
from io_harness.tools._base import Args, HarnessTool, ToolOutcome, validated
from io_harness.tools._workspace import PathRefused

__all__ = ["Authorized", "Deferral", "ResumePoint", "authorize_call"]


ActKey = tuple[str, str]
"""An act as (act, canonical target): what a deferral remembers of the acts it cleared."""


@dataclass(frozen=True, slots=True)
class Deferral:
    """A call stopped at an act the approver will decide later.

    ``cleared`` holds the acts of the call already allowed, in order; the next
    resume goes on at the one ``request`` asks about.
    """

    request: ApprovalRequest
    cleared: tuple[ActKey, ...]


@dataclass(frozen=True, slots=True)
class ResumePoint:
    """Where a deferred call goes on: after ``cleared`` acts, with the decision on the next.

    The decision holds only for the act ``request`` showed: if the call's act
    now has another target (a symlink changed meanwhile), it is asked again.
    """

    request: ApprovalRequest
    cleared: tuple[ActKey, ...]
    decision: Decision | None
    interrupted: bool = False
    """A process died while performing the approved act: it is not performed again."""


@dataclass(frozen=True, slots=True)
class Authorized:
    """Every act of the call is cleared; ``rewritten`` holds an approver's new arguments."""

    args: Args
    rewritten: dict[str, Any] | None = None


async def authorize_call(
    gate: Gate, call: ToolCall, tool: HarnessTool[Any], args: Args, resume_at: ResumePoint | None
) -> Authorized | ToolOutcome | Deferral:
    """Check each act of one call in order; stop at the first refusal or deferral."""
    try:
        accesses = list(tool.accesses(args))
    except PathRefused as exc:
        return ToolOutcome(f"{call.name}: {exc}", True)
    cleared = resume_at.cleared if resume_at is not None else ()
    for index, access in enumerate(accesses):
        if index < len(cleared) and _key(access) == cleared[index]:
            # Cleared before the deferral and unchanged: only a deny now refuses it.
            verdict = gate.verdict(access)
            if verdict.effect is Effect.DENY:
                gate.record(access, verdict, "refused", "policy")
                return ToolOutcome(
                    f"{call.name}: refused by the policy: {verdict.describe()}", True
                )
            continue
        decision, request_id = None, secrets.token_hex(6)
        if resume_at is not None and index == len(cleared) and _same_act(access, resume_at.request):
            # The act the decision was given for: the same request, answered.
            decision, request_id = resume_at.decision, resume_at.request.id

        def request(
            verdict: Verdict, access: Access = access, request_id: str = request_id
        ) -> ApprovalRequest:
            return ApprovalRequest(
                id=request_id,
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
        if isinstance(clearance, Refused):
            return ToolOutcome(f"{call.name}: {clearance.observation}", True)
        if isinstance(clearance, Deferred):
            return Deferral(clearance.request, tuple(_key(a) for a in accesses[:index]))
        assert isinstance(clearance, Cleared)
        if clearance.decision is not None and clearance.decision.modified is not None:
            return _rewritten(gate, call, tool, clearance.decision.modified)
    return Authorized(args)


def _key(access: Access) -> ActKey:
    return (access.act.value, normalise_target(access.act, access.target))


def _same_act(access: Access, request: ApprovalRequest) -> bool:
    target = normalise_target(access.act, access.target)
    return (access.act, target, access.argv) == (request.act, request.target, request.argv)


def _rewritten(
    gate: Gate, call: ToolCall, tool: HarnessTool[Any], modified: dict[str, Any]
) -> Authorized | ToolOutcome:
    """An approver's rewrite of a call: validated, and every act checked again.

    The approver wrote the new call, so an ask is taken as approved; a deny
    still refuses it.
    """
    checked = validated(tool, call.name, modified)
    if isinstance(checked, ToolOutcome):
        return ToolOutcome(f"the approver's rewrite is not a valid call: {checked.content}", True)
    _, args = checked
    problem = tool.arguments_problem(args)
    if problem is not None:
        return ToolOutcome(f"the approver's rewrite is not a valid call: {problem}", True)
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


def _preview(tool: HarnessTool[Any], args: Args, show_current: bool) -> str | None:
    try:
        return tool.preview(args, show_current=show_current)
    except Exception as exc:  # a preview that fails must not stop the approval
        return f"(no preview: {type(exc).__name__}: {exc})"
