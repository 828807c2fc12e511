"""Deferred actions of one run: the step a deferral stores, and its completion on resume."""

from __future__ import annotations

import time

from io_harness.loop._outcome import RunOutcome
from io_harness.loop._progress import StepProgress
from io_harness.observe import AwaitingApproval, RunEvent
from io_harness.policy._approval import ApprovalRequest, Decision
from io_harness.store._records import ApprovalRow, StepRecord

__all__ = ["Deferrals", "Resumption"]


class Resumption:
    """How a resumed run continues: a deferred action and its decision, a replaced policy."""

    def __init__(
        self,
        pending: ApprovalRow | None = None,
        decision: Decision | None = None,
        policy_json: str | None = None,
    ) -> None:
        self.pending = pending
        self.decision = decision
        self.policy_json = policy_json


class Deferrals:
    """Which deferred action a run is completing, and which one it stopped to await."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.resuming: tuple[ApprovalRequest, ApprovalRow] | None = None
        self.awaiting: ApprovalRequest | None = None

    def start(self, record: StepRecord, deferred: ApprovalRow) -> StepProgress:
        """The interrupted step, to be finished in ``record``, deferred call first."""
        progress = StepProgress.model_validate_json(deferred.progress_json)
        record.started_at = progress.started_at
        record.earlier_cost_micros = progress.cost_micros
        self.resuming = (ApprovalRequest.model_validate_json(deferred.request_json), deferred)
        return progress

    def resolved(self, record: StepRecord, decision: Decision | None) -> None:
        """The deferred call has run or been refused: ``record`` marks its approval done."""
        if self.resuming is None:
            return
        request, row = self.resuming
        self.resuming = None
        if decision is None and row.decision_json is None:
            # The policy stopped asking (it was replaced, or a remembered rule answers).
            decision = Decision.approve(by="nobody: the policy no longer asked")
        record.resolves = ApprovalRow(
            id=request.id,
            run_id=self.run_id,
            step=record.step,
            status="done",
            request_json=row.request_json,
            progress_json=row.progress_json,
            decision_json=decision.model_dump_json() if decision else row.decision_json,
            created_at=row.created_at,
            decided_at=row.decided_at or time.time(),
        )

    def defer(
        self,
        record: StepRecord,
        events: list[RunEvent],
        progress: StepProgress,
        request: ApprovalRequest,
    ) -> RunOutcome:
        """Store the interrupted step with ``request``; the run stops awaiting a decision."""
        if self.resuming is not None and self.resuming[0].call_id == request.call_id:
            # The same call deferred again keeps its id: one request, one decision.
            request = request.model_copy(update={"id": self.resuming[0].id})
            self.resuming = None
        record.defers = ApprovalRow(
            id=request.id,
            run_id=self.run_id,
            step=record.step,
            status="pending",
            request_json=request.model_dump_json(),
            progress_json=progress.model_dump_json(),
            decision_json=None,
            created_at=time.time(),
        )
        self.awaiting = request
        events.append(
            AwaitingApproval(
                run_id=self.run_id,
                step=record.step,
                request_id=request.id,
                act=request.act.value,
                target=request.target,
                tool=request.tool,
                rule=str(request.verdict.rule) if request.verdict.rule else None,
                layer=request.verdict.layer,
            )
        )
        return RunOutcome.AWAITING_APPROVAL
