"""The step loop. Running and resuming are one path: it always starts from stored state.

One step, as data: check the budgets → assemble the request (the compacted
view of the conversation, a role's composed tools) → compact first when it
would pass its share of the context window → call the provider (with
retries) → dispatch each tool call (a sub-agent's spawn starts it; the turn
waits for its children) → check the criterion when a file changed or the
turn ended → commit everything the step produced in one transaction → hand
its events to the observer.

The engine's fixed parts are the :class:`~io_harness.prepare.PreparedRun`
it is given; what changes is the run's :class:`RunState` and each step's
:class:`StepContext`. The phases of a step are modules of their own: the
model's answer (``_answer.py``), its calls and the step's close
(``_acting.py``), the criterion's check (``_checking.py``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from io_harness.loop._acting import act
from io_harness.loop._answer import answer
from io_harness.loop._calls import ProviderCaller
from io_harness.loop._checking import verify
from io_harness.loop._deferral import Deferrals, Resumption, stored_model
from io_harness.loop._events import LIVE_EVENTS, emit, event_row, run_started
from io_harness.loop._outcome import RunOutcome, RunResult
from io_harness.loop._progress import StepProgress
from io_harness.loop._state import RunState, StepContext
from io_harness.observe import RunEvent, RunFinished, RunStopped
from io_harness.policy._approval import Decision
from io_harness.policy._gate import GateScope
from io_harness.store._records import ApprovalRow, Finish, McpEventRow, StepRecord

if TYPE_CHECKING:
    from io_harness.prepare import PreparedRun

__all__ = ["MAX_OUTPUT_TOKENS", "Engine"]

MAX_OUTPUT_TOKENS = 8192


class Engine:
    """Drives one prepared run from its stored state to an outcome."""

    def __init__(self, prepared: PreparedRun) -> None:
        self.prepared = prepared
        kit = prepared.kit
        self.kit = kit
        self.gate = prepared.gate
        self.contract = prepared.contract
        self.node = prepared.node
        self.role = prepared.role
        self.run_id = prepared.stored.id
        self.state = RunState.load(prepared.stored)
        self.toolbox = prepared.tools
        """The run's tools; an MCP server's change of its tools changes them."""
        self.mcp = kit.sessions if prepared.owns_sessions else None
        """The run's MCP sessions when it owns them (closed at its end); a sub-agent's are its
        root's, offered among its tools but not closed by it."""
        self.told: list[RunEvent] = []
        """Events for the observer that are not stored (model calls), told after the next commit."""
        self.deferrals = Deferrals(self.run_id, self.gate)
        budget = self.contract.budget
        started_at = prepared.stored.started_at
        wall = budget.max_wall_seconds
        self.wall_end = started_at + wall if wall is not None else None
        self.caller = ProviderCaller(
            kit.provider,
            self.run_id,
            budget.max_retries,
            self.wall_end,
            self.emit,
            kit.prices,
            retry=kit.retry,
        )

    # -- the loop ----------------------------------------------------------------

    async def drive(self) -> RunResult:
        """Take steps until an outcome; every step is committed before the next begins.

        A new run's ``RunStarted`` was stored with the run; a resumed run's is
        stored with its first record. A resumed run that was awaiting approval
        first finishes the step the deferral interrupted, whatever the budgets
        say: its model call was made and paid for within them.
        """
        resumed, resumption = self.prepared.resumed, self.prepared.resumption
        started = run_started(
            self.run_id,
            self.state.steps,
            self.contract,
            self.kit.provider,
            resumed,
            policy_replaced=resumption.policy_json is not None,
            place=self.prepared.stored.tree,
        )
        await self.emit([started])
        # A process that died between a write and its step's commit left a change
        # nobody checked: a resumed run checks in its first step whatever the model
        # does, or, if the run ends before the model answers, as it ends.
        self.state.check_pending = resumed
        sandbox_json = self.kit.chosen.record_json() if resumed else None
        try:
            result = await self._steps(resumption, [started] if resumed else [], sandbox_json)
        except BaseException as exc:
            await self._stopped("error", f"{type(exc).__name__}: {exc}")
            raise
        finally:
            if self.node is not None:
                self.node.abandon()
        if result.outcome is RunOutcome.AWAITING_APPROVAL:
            await self._stopped("awaiting_approval")
        elif result.outcome is RunOutcome.AWAITING_ANSWER:
            await self._stopped("awaiting_answer")
        return result

    async def _stopped(
        self, reason: Literal["awaiting_approval", "awaiting_answer", "error"], error: str = ""
    ) -> None:
        """Tell the observer the loop let go of the run without finishing it."""
        if self.kit.observer is not None:
            stopped = RunStopped(
                run_id=self.run_id,
                step=self.state.steps,
                reason=reason,
                error=error or None,
                at=time.time(),
            )
            await self.emit([stopped])

    async def _steps(
        self, resumption: Resumption, pending: list[RunEvent], sandbox_json: str | None
    ) -> RunResult:
        deferred = resumption.pending
        # The step a continued run goes on with may hold the stopped run's last attempts.
        numbered_on = self.state.steps + 1 if self.prepared.continued else None
        while True:
            ctx = StepContext(StepRecord(step=self.state.steps + 1, started_at=time.time()))
            record = ctx.record
            record.numbered_on = record.step == numbered_on
            record.policy_json, resumption.policy_json = resumption.policy_json, None
            record.sandbox_json, sandbox_json = sandbox_json, None
            ctx.events, pending = pending, []
            with self.gate.stepping(record.step) as gate_scope:
                outcome = await self._drive_step(ctx, deferred, resumption.decision)
            deferred = None
            await self._commit(ctx, gate_scope, ended=outcome is not None)
            if outcome is not None:
                return self.state.result(
                    outcome,
                    request=self.deferrals.awaiting,
                    remembered=tuple(self.gate.remembered),
                    sandbox=self.kit.chosen.backend,
                )

    async def _commit(self, ctx: StepContext, gate_scope: GateScope, *, ended: bool) -> None:
        """Commit the step in one transaction, then tell the observer what it did."""
        record = ctx.record
        record.finished_at = time.time()
        record.events = [event_row(e) for e in ctx.events]
        self._take_gate_rows(record, gate_scope)
        self.kit.store.commit_step(self.run_id, record)
        if record.counts_as_step:
            self.state.journal = None  # the store cleared it with the step
        if ended and self.mcp is not None:
            # After the step is safe: a slow close (an HTTP server's goodbye) cannot
            # cost it. The close events join the trace on their own.
            await self.mcp.close()
            self.kit.store.append_mcp_events(self.run_id, record.step, self._mcp_rows())
        await self.tell_committed()  # the model calls first, then what followed them
        await self.emit([e for e in ctx.events if not isinstance(e, LIVE_EVENTS)])

    async def _drive_step(
        self, ctx: StepContext, deferred: ApprovalRow | None, decision: Decision | None
    ) -> RunOutcome | None:
        """One step's work, to its outcome (``None``: the run goes on): the deferred act a
        resume performs, the journaled step a crash cut short, or a new model call."""
        if deferred is not None:
            progress, resume_at = self.deferrals.start(ctx.record, deferred, decision)
            # The step was begun within the budgets; its check gets its own timeout
            # even when the decision came after the wall budget ran out.
            ctx.finishing_deferred = True
            outcome = await act(self, ctx, progress, resume_at)
            ctx.finishing_deferred = False
        elif self.state.journal is not None:
            outcome = await act(self, ctx, await self._journaled(ctx))
        else:
            outcome = self.budget_outcome()
            if outcome is None:
                answered = await answer(self, ctx)
                outcome = (
                    await act(self, ctx, answered)
                    if isinstance(answered, StepProgress)
                    else answered
                )
        unchecked = self.state.check_pending and outcome not in _NO_LATE_CHECK
        if unchecked and await verify(self, ctx, "resumed"):
            outcome = RunOutcome.SUCCESS
        if outcome is not None and not outcome.awaits:
            ctx.events.append(self._finish(ctx.record, outcome))
        return outcome

    async def _journaled(self, ctx: StepContext) -> StepProgress:
        """The step a crash cut short, read back from its journal: its answer was stored
        before its calls ran (they spawn agents), so it is finished with it rather than
        the model asked again."""
        assert self.state.journal is not None
        progress = stored_model(StepProgress, self.state.journal, "a journal", self.run_id)
        self.state.journal, ctx.journaling = None, True
        ctx.cut_short, progress.intent = progress.intent, None
        ctx.record.started_at = progress.started_at
        ctx.record.earlier_cost_micros = progress.cost_micros
        if self.node is not None:  # its children were still at work: drive them on
            await self.node.spawn_again(progress)
        return progress

    def _take_gate_rows(self, record: StepRecord, scope: GateScope) -> None:
        record.permissions = scope.rows
        if self.node is not None:
            record.tree_events += self.node.take_rows()
        record.mcp_events = self._mcp_rows()
        record.remembered_json = self.gate.take_remembered_change()

    def _mcp_rows(self) -> list[McpEventRow]:
        """What the run's MCP servers did since the last time asked, as rows."""
        if self.mcp is None:
            return []
        return [
            McpEventRow(
                server=e.server,
                kind=e.kind,
                detail_json=json.dumps(dict(e.detail), default=str),
                at=e.at,
            )
            for e in self.mcp.take_events()
        ]

    def budget_outcome(self) -> RunOutcome | None:
        """The budget the run has spent, if one is: it ends with that outcome."""
        budget, state = self.contract.budget, self.state
        if state.steps >= budget.max_steps:
            return RunOutcome.STEP_CAP_REACHED
        if budget.max_tokens is not None and state.usage.total_tokens >= budget.max_tokens:
            return RunOutcome.TOKEN_BUDGET_EXCEEDED
        max_cost = budget.max_cost_micros
        if max_cost is not None and state.cost_micros >= max_cost:
            return RunOutcome.COST_BUDGET_EXCEEDED
        if self.wall_end is not None and time.time() >= self.wall_end:
            return RunOutcome.TIME_BUDGET_EXCEEDED
        return self.node.exhausted() if self.node is not None else None

    # -- ending and telling --------------------------------------------------------

    def _finish(self, record: StepRecord, outcome: RunOutcome) -> RunFinished:
        state = self.state
        error = state.last_error
        record.finish = finish = Finish(
            outcome=outcome.value,
            finished_at=time.time(),
            error_json=json.dumps(error.to_dict()) if error else None,
        )
        return RunFinished(
            run_id=self.run_id,
            step=state.steps,
            outcome=outcome.value,
            steps=state.steps,
            usage=state.usage,
            error=str(error) if error is not None else None,
            cost_micros=state.cost_micros,
            unpriced_calls=state.unpriced_calls,
            finished_at=finish.finished_at,
        )

    async def tell_committed(self) -> None:
        """Tell the observer the model calls a commit just stored."""
        if self.told:
            told, self.told = self.told, []
            await self.emit(told)

    async def emit(self, events: Sequence[RunEvent]) -> None:
        """Hand ``events`` to the observer (its errors are warnings, never the run's)."""
        await emit(self.kit.observer, events)


_NO_LATE_CHECK = (
    None,
    RunOutcome.SUCCESS,
    RunOutcome.AWAITING_APPROVAL,
    RunOutcome.AWAITING_ANSWER,
)
"""Outcomes after which a resumed run's pending check is not made at the end."""
