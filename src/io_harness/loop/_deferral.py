"""Deferred actions of one run: the step a deferral stores, and its completion on resume."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from pydantic import BaseModel

from io_harness.errors import StorageError
from io_harness.loop._outcome import RunOutcome
from io_harness.loop._progress import StepProgress
from io_harness.observe import AwaitingApproval, RunEvent
from io_harness.policy._approval import ApprovalRequest, Decision
from io_harness.policy._gate import Access, Gate
from io_harness.store import Store
from io_harness.store._records import ApprovalRow, StepRecord
from io_harness.tools._base import ToolOutcome
from io_harness.tools._gated import ResumePoint

__all__ = ["Deferrals", "Resumption", "awaiting_outcome", "stored_model"]

M = TypeVar("M", bound=BaseModel)


def stored_model(cls: type[M], text: str | None, what: str, run_id: str) -> M:
    """A model the store holds for a run; a row that does not load is a StorageError."""
    try:
        return cls.model_validate_json(text or "")
    except ValueError as exc:
        raise StorageError(f"run {run_id!r} holds {what} that does not load: {exc}") from None


@dataclass
class Resumption:
    """How a resumed run continues: a deferred action and its decision, a replaced policy."""

    pending: ApprovalRow | None = None
    decision: Decision | None = None
    policy_json: str | None = None


class Deferrals:
    """Which deferred action a run is completing, and which one it stopped to await."""

    def __init__(self, run_id: str, gate: Gate) -> None:
        self.run_id = run_id
        self.gate = gate
        self.resuming: tuple[ApprovalRequest, ApprovalRow] | None = None
        self.awaiting: ApprovalRequest | None = None
        self.interrupted = False
        self.answer: Decision | None = None
        """What answered the question being resumed (``ask_user``), for its approval row."""

    def start(
        self, record: StepRecord, deferred: ApprovalRow, decision: Decision | None
    ) -> tuple[StepProgress, ResumePoint]:
        """The interrupted step, to be finished in ``record``, and where its call goes on."""
        progress = stored_model(StepProgress, deferred.progress_json, "a step", self.run_id)
        request = stored_model(ApprovalRequest, deferred.request_json, "a request", self.run_id)
        record.started_at = progress.started_at
        record.earlier_cost_micros = progress.cost_micros
        self.resuming = (request, deferred)
        self.interrupted = deferred.status == "performing"
        cleared = tuple((act, target) for act, target in progress.cleared)
        return progress, ResumePoint(request, cleared, decision, self.interrupted)

    def mark_performing(self, store: Store, request: ApprovalRequest) -> Callable[[], None]:
        """What runs just before the approved act: its mark, committed on its own."""

        assert self.resuming is not None
        loaded = self.resuming[1]

        def mark() -> None:
            decided = self.gate.decision_on(request.call_id, request.act, request.target)
            decision = decided or Decision.approve(by="nobody: the policy no longer asked")
            store.mark_performing(loaded, decision)

        return mark

    def interrupted_outcome(self, tool: str) -> ToolOutcome:
        """The deferred act a crashed process was performing: reported, not repeated.

        Its approval is a trace row again (the crashed step's rows were lost
        with it), and the rules the decision remembered are remembered.
        """
        assert self.resuming is not None
        request, row = self.resuming
        decision = stored_model(Decision, row.decision_json, "a decision", self.run_id)
        access = Access(request.act, request.target, request.argv)
        with self.gate.calling(request.call_id):
            self.gate.record(
                access,
                request.verdict,
                "approved",
                decision.by or "resume()",
                "not repeated: the act was being performed when the harness stopped",
            )
        self.gate.remember(decision.remember)
        return ToolOutcome(
            f"{tool}: the approved {request.describe()} was being performed when the harness "
            "stopped, so whether it took effect is not known; it was not repeated. Check its "
            "result (read the file, for example) before doing it again.",
            is_error=True,
        )

    def resolved(self, record: StepRecord) -> None:
        """The deferred call has run or been refused: ``record`` marks its approval done.

        The approval keeps what was decided on its act: the decision given, the
        approver's, or the policy's verdict when that no longer asked.
        """
        if self.resuming is None:
            return
        request, row = self.resuming
        self.resuming = None
        decided = self.gate.decision_on(request.call_id, request.act, request.target)
        if request.question is not None:
            decided, self.answer = self.answer, None
        if self.interrupted and row.decision_json is not None:
            decided = stored_model(Decision, row.decision_json, "a decision", self.run_id)
        if decided is None:
            decided = Decision.deny("not performed: the call stopped before this act", by="harness")
        record.resolves = ApprovalRow(
            id=request.id,
            run_id=self.run_id,
            step=record.step,
            status="done",
            request_json=row.request_json,
            progress_json=row.progress_json,
            decision_json=decided.model_dump_json(),
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
        """Store the interrupted step with ``request``; the run stops awaiting a decision.

        The same act deferred again keeps its request id (one request, one
        decision); a later act of the same call is a new request, and the
        earlier one is done.
        """
        if self.resuming is not None:
            earlier = self.resuming[0]
            same = (earlier.call_id, earlier.act, earlier.target, earlier.argv) == (
                request.call_id,
                request.act,
                request.target,
                request.argv,
            )
            if same:
                request = request.model_copy(update={"id": earlier.id})
                self.resuming = None
            else:
                self.resolved(record)
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
                act="ask" if request.question is not None else request.act.value,
                target=request.question if request.question is not None else request.target,
                tool=request.tool,
                rule=str(request.verdict.rule) if request.verdict.rule else None,
                layer=request.verdict.layer,
            )
        )
        return awaiting_outcome(request)


def awaiting_outcome(request: ApprovalRequest) -> RunOutcome:
    """What a run stopped for ``request`` awaits: an answer to a question, or a decision."""
    if request.question is not None:
        return RunOutcome.AWAITING_ANSWER
    return RunOutcome.AWAITING_APPROVAL
