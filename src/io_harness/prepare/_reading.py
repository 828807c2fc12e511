"""What a resume reads back: the contract, the policy and its gate, the decision awaited;
whether its conversation is whole."""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from pydantic import ValidationError

from io_harness._validation import loading
from io_harness.contract import TaskContract
from io_harness.errors import ConfigError, ResumeError
from io_harness.loop._deferral import stored_model
from io_harness.messages import Message, ToolResult
from io_harness.policy._approval import ApprovalRequest, Approver, Decision
from io_harness.policy._gate import Access, Gate, remembered_from_json
from io_harness.policy._policy import Policy
from io_harness.policy._rules import Effect
from io_harness.prepare._answers import check_fits, not_awaiting, unanswered
from io_harness.pricing import PriceTable
from io_harness.store._records import StoredRun

__all__ = ["check_conversation", "decision_for", "stored_contract", "stored_gate", "stored_prices"]


def check_conversation(stored: StoredRun) -> None:
    """Refuse to go on with a conversation its committed steps disagree with.

    A run's messages are its task, then for each committed step the model's
    answer and, when it asked for calls, their results. A store that lost some
    (damaged, or partly restored) would have the model called without its goal
    or its past; a :class:`ResumeError` names what is missing instead.
    """
    missing = conversation_gap(stored.messages, stored.steps)
    if missing is not None:
        raise ResumeError(
            f"run {stored.id!r} cannot be resumed: its {stored.steps} committed steps and "
            f"its stored conversation disagree ({missing}); the store's messages rows are "
            "damaged or were partly restored"
        )


def conversation_gap(messages: Sequence[Message], steps: int) -> str | None:
    """What ``messages`` lack to be the conversation of ``steps`` committed steps."""
    if not messages:
        return "it holds no messages: the task and every answer are missing"
    if messages[0].role != "user":
        return "the task message it begins with is missing"
    answers = [at for at, message in enumerate(messages) if message.role == "assistant"]
    if len(answers) != steps:
        return f"it holds the model's answers of {len(answers)} steps, not {steps}"
    for step, at in enumerate(answers, start=1):
        asked = [c.id for c in messages[at].tool_calls]
        after = messages[at + 1] if at + 1 < len(messages) else None
        given = (
            {b.tool_use_id for b in after.content if isinstance(b, ToolResult)}
            if after is not None and after.role == "tool"
            else set()
        )
        if asked and not set(asked) <= given:
            lost = ", ".join(c for c in asked if c not in given)
            return f"the results of step {step}'s calls {lost} are missing"
    return None


def stored_contract(stored: StoredRun) -> TaskContract:
    """The contract a run was stored with; one this version cannot read is a ResumeError."""
    try:
        with loading():
            return TaskContract.model_validate_json(stored.contract_json)
    except ValidationError as exc:
        raise ResumeError(
            f"run {stored.id!r} holds a contract this version cannot read: {exc}"
        ) from None


def stored_prices(stored: StoredRun) -> PriceTable | None:
    """The price table the run was started with, if it had one."""
    if stored.prices_json is None:
        return None
    try:
        return PriceTable.from_json(stored.prices_json)
    except ConfigError as exc:
        raise ResumeError(
            f"run {stored.id!r} holds prices this version cannot read: {exc}"
        ) from None


def stored_gate(
    stored: StoredRun,
    contract: TaskContract,
    approver: Approver | None,
    policy: Policy | None,
    replace_policy: bool,
) -> tuple[Gate, str | None]:
    """The gate of the run's stored policy, or of an explicitly replacing one.

    The second item is the replacing policy's JSON, to be stored with the run.
    """
    try:
        with loading():
            kept = (
                Policy.model_validate_json(stored.policy_json)
                if stored.policy_json is not None
                else Policy.permissive()  # stored before policies existed: it ran unchecked
            )
            remembered = remembered_from_json(stored.remembered_json)
    except ValueError as exc:  # pydantic's ValidationError and json's errors alike
        raise ResumeError(
            f"run {stored.id!r} holds a policy this version cannot read: {exc}"
        ) from None
    replaced = None
    if policy is not None and policy != kept:
        if not replace_policy:
            raise ConfigError(
                f"run {stored.id!r} was started under a different policy; pass "
                "replace_policy=True to resume it under this one (ioh: --replace-policy)"
            )
        kept, replaced = policy, policy.model_dump_json()
    gate = Gate(kept, approver, goal=contract.goal, run_id=stored.id, remembered=remembered)
    return gate, replaced


def decision_for(
    stored: StoredRun, gate: Gate, decision: Decision | None, answers: bool = False
) -> Decision | None:
    """The decision on the act the run awaits: given now, stored before, or the approver's.

    None is needed when the policy no longer asks about the act (it was replaced), and for
    a question someone here answers (``answers``) or that the wall budget has passed.
    """
    pending = stored.pending
    if pending is None:
        if decision is not None and decision.kind == "answer":
            raise not_awaiting(stored, decision)
        if decision is not None:
            raise ConfigError(f"run {stored.id!r} is not awaiting approval; it takes no decision")
        return None
    request = stored_model(ApprovalRequest, pending.request_json, "a request", stored.id)
    if decision is not None:
        check_fits(stored.id, request, decision)
        if pending.status == "decided":
            raise ConfigError(
                f"the action run {stored.id!r} awaits was already decided "
                f"({pending.decision_json}); resume without a decision to perform it"
            )
        if pending.status == "performing":
            raise ConfigError(
                f"run {stored.id!r} was performing its approved action when it stopped; "
                "it takes no decision (resume without one reports what is known)"
            )
        return decision if decision.by else decision.model_copy(update={"by": "resume()"})
    if pending.decision_json is not None:
        return stored_model(Decision, pending.decision_json, "a decision", stored.id)
    if request.question is not None:
        unanswered(stored, request, answers, stored_contract(stored).budget.max_wall_seconds)
        return None
    asks = gate.verdict(Access(request.act, request.target)).effect is Effect.ASK
    if gate.approver is None and asks:
        waits = (
            f"run {stored.id!r} awaits a decision on {request.describe()} (request {request.id})"
        )
        run = shlex.quote(stored.id)
        raise ConfigError(
            f"{waits}; pass decision= or an approver (ioh approve / ioh deny)",
            shell=f"{waits}; decide it with ioh approve {run}{{store}} or "
            f"ioh deny {run}{{store}} --reason TEXT, or resume with --approve ask|deny|approve-all",
        )
    return None
