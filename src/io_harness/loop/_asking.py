"""The model's question to the person (``ask_user``): answered at once, or deferred.

A question is a deferred request like an act the policy asks about: the same
``approvals`` row (its request holds the question), the same part-way step,
the same resume. Its decision is an answer, which is the call's result.
"""

from __future__ import annotations

import secrets
import time
import warnings
from typing import TYPE_CHECKING

from io_harness.messages import ToolCall
from io_harness.policy._approval import ApprovalContext, ApprovalRequest, Decision
from io_harness.policy._rules import Act, Effect, Verdict
from io_harness.tools._ask import ASK_USER, AskArgs, Question, answer_problem
from io_harness.tools._base import ToolOutcome, validated
from io_harness.tools._gated import Deferral, ResumePoint

if TYPE_CHECKING:
    from io_harness.loop._engine import Engine

__all__ = ["ask", "question_request"]


def question_request(
    run_id: str, step: int, call_id: str, args: AskArgs, request_id: str | None = None
) -> ApprovalRequest:
    """The stored request of a question: no act is performed, the person is asked."""
    verdict = Verdict(act=Act.EXEC, target=ASK_USER, effect=Effect.ASK, layer="question")
    return ApprovalRequest(
        id=request_id or secrets.token_hex(6),
        run_id=run_id,
        step=step,
        call_id=call_id,
        tool=ASK_USER,
        arguments=dict(args.model_dump(mode="json")),
        act=Act.EXEC,
        target=ASK_USER,
        verdict=verdict,
        question=args.question,
        choices=tuple(args.choices) if args.choices else None,
    )


async def ask(
    engine: Engine, step: int, call: ToolCall, resume_at: ResumePoint | None
) -> ToolOutcome | Deferral:
    """The call's answer: given on resume, the answerer's or the approver's now; else the
    question deferred. Past the wall budget, an unanswered question is answered by nobody."""
    checked = validated(engine.toolbox[ASK_USER], call.name, call.arguments)
    if isinstance(checked, ToolOutcome):
        return checked
    args = checked[1]
    assert isinstance(args, AskArgs)
    deferrals = engine.deferrals
    if resume_at is not None:
        request = resume_at.request
        given = resume_at.decision
        if given is not None and given.kind == "answer":
            return _answered(engine, given)
        if given is not None and given.kind == "deny":
            return _declined(engine, given)
        if engine.wall_end is not None and time.time() >= engine.wall_end:
            deferrals.answer = Decision.deny("no answer within the time budget", by="harness")
            return ToolOutcome(
                f"{ASK_USER}: no answer came before the run's time budget ran out", True
            )
    else:
        request = question_request(engine.run_id, step, call.id, args)
    decision = await _at_once(engine, request)
    if decision is not None and decision.kind == "answer":
        return _answered(engine, decision)
    if decision is not None and decision.kind == "deny":
        return _declined(engine, decision)
    return Deferral(request, ())


def _declined(engine: Engine, decision: Decision) -> ToolOutcome:
    engine.deferrals.answer = decision
    said = decision.reason or "no reason given"
    return ToolOutcome(f"{ASK_USER}: the person would not answer: {said}", True)


def _answered(engine: Engine, decision: Decision) -> ToolOutcome:
    engine.deferrals.answer = decision
    return ToolOutcome(decision.answer or "", duration=0.0)


async def _at_once(engine: Engine, request: ApprovalRequest) -> Decision | None:
    """The harness's answerer's answer, else its approver's decision, if either gives one."""
    answerer = engine.kit.answerer
    if answerer is not None:
        question = Question(
            request.run_id, request.step, request.call_id, request.question or "", request.choices
        )
        try:
            text = await answerer(question)
        except Exception as exc:  # an answerer that fails defers, as nobody answered
            warnings.warn(
                f"the answerer raised {exc!r}; the question waits", RuntimeWarning, stacklevel=2
            )
            return None
        problem = answer_problem(text, request.choices) if text is not None else None
        if problem is not None:
            warnings.warn(
                f"the answerer's answer: {problem}; the question waits",
                RuntimeWarning,
                stacklevel=2,
            )
            return None
        if text is not None:
            return Decision.answered(text, by=type(answerer).__name__)
    approver = engine.gate.approver
    if approver is None:
        return None
    context = ApprovalContext(engine.contract.goal, engine.run_id, request.step, request.verdict)
    try:
        decision = await approver.decide(request, context)
    except Exception:
        return None
    if not isinstance(decision, Decision) or decision.kind not in ("answer", "deny"):
        return None
    if decision.kind == "answer" and answer_problem(decision.answer, request.choices):
        return None
    return decision.model_copy(update={"by": decision.by or type(approver).__name__})
