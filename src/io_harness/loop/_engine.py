"""The step loop. Running and resuming are one path: it always starts from stored state.

One step, as data: check the budgets → assemble the request (the compacted
view of the conversation, a role's composed tools) → compact first when it
would pass its share of the context window → call the provider (with
retries) → dispatch each tool call (a sub-agent's spawn starts it; the turn
waits for its children) → check the criterion when a file changed or the
turn ended → commit everything the step produced in one transaction → hand
its events to the observer.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Literal

from io_harness._mcp import McpSessions
from io_harness.compaction._pass import (
    Compaction,
    Edit,
    View,
    apply_pass,
    compactor_request,
    estimate_tokens,
    protected,
)
from io_harness.contract import TaskContract
from io_harness.errors import ProviderError, RefusedError
from io_harness.loop._calls import ProviderCaller, Unanswered
from io_harness.loop._context import failing_check_message
from io_harness.loop._deferral import Deferrals, Resumption, stored_model
from io_harness.loop._effects import FILE_TOOLS, acts_on_the_world, intent_for, taken_effect
from io_harness.loop._events import LIVE_EVENTS, emit, event_row, provider_calls, run_started
from io_harness.loop._outcome import RunOutcome, RunResult
from io_harness.loop._progress import DoneCall, Intent, StepProgress
from io_harness.loop._sandboxing import RunSandbox, event_rows
from io_harness.messages import (
    CompletionRequest,
    CompletionResponse,
    Message,
    ToolCall,
    ToolSpec,
    Usage,
    storable,
)
from io_harness.observe import (
    Observer,
    RunEvent,
    RunFinished,
    RunStopped,
    StepFinished,
    ToolCalled,
    ToolStarted,
    Trigger,
    Verified,
)
from io_harness.policy._approval import ApprovalRequest, Decision
from io_harness.policy._gate import Gate, GateScope, canonical_argv
from io_harness.policy._rules import Effect
from io_harness.pricing import PriceTable
from io_harness.providers import Provider
from io_harness.roles import Composition
from io_harness.roles._run import RunRole
from io_harness.store import Store
from io_harness.store._records import (
    ApprovalRow,
    CompactionRow,
    Finish,
    McpEventRow,
    StepRecord,
    StoredRun,
    VerificationRow,
)
from io_harness.tools import RunTools
from io_harness.tools._base import ToolContext, ToolOutcome
from io_harness.tools._gated import Deferral, ResumePoint
from io_harness.verify import VerificationResult

if TYPE_CHECKING:
    from io_harness.trees import AgentNode

__all__ = ["MAX_OUTPUT_TOKENS", "Engine"]

MAX_OUTPUT_TOKENS = 8192
_CHARS_PER_TOKEN = 4
_CUT_OFF_CALL = (
    "this tool call was cut off by the output token limit (finish reason: length) before "
    "its arguments were complete, so nothing ran; send it again with less in it (for "
    "example, write a large file in smaller edits)"
)


class Engine:
    """Drives one run from its stored state to an outcome."""

    def __init__(
        self,
        contract: TaskContract,
        provider: Provider,
        store: Store,
        toolbox: RunTools,
        stored: StoredRun,
        observer: Observer | None,
        prices: PriceTable | None,
        gate: Gate,
        chosen: RunSandbox,
        mcp: McpSessions | None = None,
        node: AgentNode | None = None,
        role: RunRole | None = None,
        compaction: Compaction | None = None,
        window: int | None = None,
    ) -> None:
        self.gate = gate
        self.compaction = compaction
        self.window = window
        """The model's context window in tokens, when compaction needs it."""
        self.view = View(
            Edit("summary" if c.kind == "summary" else "delete", c.step, c.message, c.text)
            for c in stored.compactions
        )
        self.role = role
        """The role the run works under: its tools composed per request, its calls limited."""
        self.composition: Composition | None = None
        self.mcp = mcp
        """The run's MCP sessions when it owns them (closed at its end); a sub-agent's are its
        root's, offered among its tools but not closed by it."""
        self.node = node
        """Where the run sits in a sub-agent tree, when it is an agent of one."""
        self.place = stored.tree
        self.told: list[RunEvent] = []
        """Events for the observer that are not stored (model calls), told after the next commit."""
        self.journal = stored.journal_json
        self.journaling = False
        """The step in flight is journaled: each call's intent is stored before it acts."""
        self.cut_short: Intent | None = None
        """The intent of the call a crash cut short, read back with a journaled step."""
        self.stored_intent: str | None = None
        """The call whose intent went into the store with the step's answer."""
        self.chosen = chosen
        self.deferrals = Deferrals(stored.id, gate)
        self.finishing_deferred = False
        self.contract = contract
        self.provider = provider
        self.store = store
        self.toolbox = toolbox
        self.observer = observer
        self.run_id = stored.id
        self.system = stored.system_prompt
        self.tools: tuple[ToolSpec, ...] = toolbox.specs
        self.messages: list[Message] = list(stored.messages)
        self.steps = stored.steps
        self.usage = stored.usage
        self.cost_micros = stored.cost_micros
        self.unpriced_calls = stored.unpriced_calls
        self.prices = prices
        self.last_input_tokens: int | None = None
        budget = contract.budget
        self.wall_end = (
            stored.started_at + budget.max_wall_seconds
            if budget.max_wall_seconds is not None
            else None
        )
        self.caller = ProviderCaller(
            provider, self.run_id, budget.max_retries, self.wall_end, self._emit, prices
        )
        self.last_error: ProviderError | None = None
        self.check_pending = False
        self.verification = (
            VerificationResult.model_validate_json(stored.verification_json)
            if stored.verification_json
            else None
        )

    # -- the loop ----------------------------------------------------------------

    async def drive(self, *, resumed: bool, resumption: Resumption | None = None) -> RunResult:
        """Take steps until an outcome; every step is committed before the next begins.

        A new run's ``RunStarted`` was stored with the run; a resumed run's is
        stored with its first record. A resumed run that was awaiting approval
        first finishes the step the deferral interrupted, whatever the budgets
        say: its model call was made and paid for within them.
        """
        resumption = resumption or Resumption()
        started = run_started(
            self.run_id,
            self.steps,
            self.contract,
            self.provider,
            resumed,
            policy_replaced=resumption.policy_json is not None,
            place=self.place,
        )
        await self._emit([started])
        pending: list[RunEvent] = [started] if resumed else []
        # A process that died between a write and its step's commit left a change
        # nobody checked: a resumed run checks in its first step whatever the model
        # does, or, if the run ends before the model answers, as it ends.
        self.check_pending = resumed
        deferred = resumption.pending
        sandbox_json = self.chosen.record_json() if resumed else None
        try:
            result = await self._steps(resumption, deferred, pending, sandbox_json)
        except BaseException as exc:
            await self._stopped("error", f"{type(exc).__name__}: {exc}")
            raise
        finally:
            if self.node is not None:
                self.node.abandon()
        if result.outcome is RunOutcome.AWAITING_APPROVAL:
            await self._stopped("awaiting_approval")
        return result

    async def _stopped(
        self, reason: Literal["awaiting_approval", "error"], error: str = ""
    ) -> None:
        """Tell the observer the loop let go of the run without finishing it."""
        if self.observer is not None:
            stopped = RunStopped(
                run_id=self.run_id,
                step=self.steps,
                reason=reason,
                error=error or None,
                at=time.time(),
            )
            await self._emit([stopped])

    async def _steps(
        self,
        resumption: Resumption,
        deferred: ApprovalRow | None,
        pending: list[RunEvent],
        sandbox_json: str | None,
    ) -> RunResult:
        while True:
            record = StepRecord(step=self.steps + 1, started_at=time.time())
            record.policy_json, resumption.policy_json = resumption.policy_json, None
            record.sandbox_json, sandbox_json = sandbox_json, None
            events, pending = pending, []
            with self.gate.stepping(record.step) as gate_scope:
                outcome = await self._drive_step(record, events, deferred, resumption.decision)
            deferred = None
            record.finished_at = time.time()
            record.events = [event_row(e) for e in events]
            self._take_gate_rows(record, gate_scope)
            self.store.commit_step(self.run_id, record)
            if record.counts_as_step:
                self.journal = None  # the store cleared it with the step
            self.journaling, self.stored_intent = False, None
            if outcome is not None and self.mcp is not None:
                # After the step is safe: a slow close (an HTTP server's goodbye) cannot
                # cost it. The close events join the trace on their own.
                await self.mcp.close()
                self.store.append_mcp_events(self.run_id, record.step, self._mcp_rows())
            await self._tell_committed()  # the model calls first, then what followed them
            await self._emit([e for e in events if not isinstance(e, LIVE_EVENTS)])
            if outcome is not None:
                return RunResult(
                    run_id=self.run_id,
                    outcome=outcome,
                    steps=self.steps,
                    usage=self.usage,
                    verification=self.verification,
                    error=self.last_error,
                    cost_micros=self.cost_micros,
                    unpriced_calls=self.unpriced_calls,
                    request=self.deferrals.awaiting,
                    remembered=tuple(self.gate.remembered),
                    sandbox=self.chosen.backend,
                )

    async def _drive_step(
        self,
        record: StepRecord,
        events: list[RunEvent],
        deferred: ApprovalRow | None,
        decision: Decision | None,
    ) -> RunOutcome | None:
        """One step's work, to its outcome (``None``: the run goes on): the deferred act a
        resume performs, the journaled step a crash cut short, or a new model call."""
        if deferred is not None:
            progress, resume_at = self.deferrals.start(record, deferred, decision)
            # The step was begun within the budgets; its check gets its own timeout
            # even when the decision came after the wall budget ran out.
            self.finishing_deferred = True
            outcome = await self._act(record, events, progress, resume_at)
            self.finishing_deferred = False
        elif self.journal is not None:
            # The answer was stored before its calls ran (they spawn agents): finish
            # that step with it, rather than ask the model again.
            progress = stored_model(StepProgress, self.journal, "a journal", self.run_id)
            self.journal, self.journaling = None, True
            self.cut_short, progress.intent = progress.intent, None
            record.started_at = progress.started_at
            record.earlier_cost_micros = progress.cost_micros
            if self.node is not None:  # its children were still at work: drive them on
                await self.node.spawn_again(progress)
            outcome = await self._act(record, events, progress)
        else:
            outcome = self._budget_outcome()
            if outcome is None:
                outcome = await self._step(record, events)
        unchecked = self.check_pending and outcome not in _NO_LATE_CHECK
        if unchecked and await self._verify(record, events, "resumed"):
            outcome = RunOutcome.SUCCESS
        if outcome is not None and outcome is not RunOutcome.AWAITING_APPROVAL:
            events.append(self._finish(record, outcome))
        return outcome

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

    def _budget_outcome(self) -> RunOutcome | None:
        budget = self.contract.budget
        if self.steps >= budget.max_steps:
            return RunOutcome.STEP_CAP_REACHED
        if budget.max_tokens is not None and self.usage.total_tokens >= budget.max_tokens:
            return RunOutcome.TOKEN_BUDGET_EXCEEDED
        max_cost = budget.max_cost_micros
        if max_cost is not None and self.cost_micros >= max_cost:
            return RunOutcome.COST_BUDGET_EXCEEDED
        if self.wall_end is not None and time.time() >= self.wall_end:
            return RunOutcome.TIME_BUDGET_EXCEEDED
        return self.node.exhausted() if self.node is not None else None

    async def _step(self, record: StepRecord, events: list[RunEvent]) -> RunOutcome | None:
        if self.mcp is not None and await self.mcp.refresh():
            # A server announced a change (or was restarted): offer its tools as they are now.
            self.toolbox = self.toolbox.with_kind("mcp", self.mcp.tools())
            self.tools = self.toolbox.specs
        request = self._request()
        if self._past_share(request):
            await self._compact(record, events)
            request = self._request()
        if not self._can_afford(request):
            return RunOutcome.COST_BUDGET_EXCEEDED
        answer = await self._charged_call(request, record, events)
        if _overflowed(answer) and self.compaction is not None:
            # The provider says it does not fit: compact once, then try once more.
            await self._compact(record, events)
            answer = await self._charged_call(self._request(), record, events)
            if _overflowed(answer):
                assert isinstance(answer, Unanswered)
                self.last_error = answer.error
                return RunOutcome.CONTEXT_EXHAUSTED
        if isinstance(answer, Unanswered):
            self.last_error = answer.error
            return answer.outcome
        self.last_input_tokens = answer.usage.input_tokens
        progress = StepProgress(
            assistant=Message(role="assistant", content=answer.content),
            usage=answer.usage,
            finish_reason=answer.finish_reason,
            provider=record.attempts[-1].provider,
            cost_micros=record.cost_micros,
            unpriced=bool(record.unpriced_calls),
            started_at=record.started_at,
        )
        if self._acts(progress):
            self._journal(record, progress)
            await self._tell_committed()  # its attempts are stored now
        return await self._act(record, events, progress)

    async def _tell_committed(self) -> None:
        """Tell the observer the model calls a commit just stored."""
        if self.told:
            told, self.told = self.told, []
            await self._emit(told)

    def _acts(self, progress: StepProgress) -> bool:
        """Whether the answer's calls act (spawn, write, run): then the step is journaled."""
        return any(acts_on_the_world(self.toolbox, c) for c in progress.assistant.tool_calls)

    def _request(self) -> CompletionRequest:
        """The next model call: the conversation as the model sees it (its compacted view),
        and the tools (a role's composed anew)."""
        messages = self._viewed()
        tools = self.tools
        if self.role is not None:
            self.composition = self.role.compose(messages)
            tools = self.composition.specs
        return CompletionRequest.model_construct(
            model=self.provider.model,
            system=self.system,
            messages=messages,
            tools=tools,
            max_tokens=MAX_OUTPUT_TOKENS,
            temperature=None,
        )

    def _viewed(self) -> tuple[Message, ...]:
        """The conversation as the model is sent it: the transcript under the run's edits."""
        return tuple(self.view.apply(self.messages) if self.view.edits else self.messages)

    def _taken_effect(self, call: ToolCall) -> ToolOutcome | None:
        """For the call that was acting when a crash cut its step short: what it did."""
        intent = self.cut_short
        if intent is None or intent.call_id != call.id:
            return None
        self.cut_short = None
        return taken_effect(intent, call, self.contract.root)

    def _store_intent(self, call: ToolCall, progress: StepProgress, step: int) -> None:
        """Store, with the calls done so far, what ``call`` is about to change."""
        if call.id == self.stored_intent or not acts_on_the_world(self.toolbox, call):
            return  # stored with the answer already, or it only reads
        progress.intent = intent_for(self.toolbox, call, self.contract.root)
        self.store.journal_step(self.run_id, step, progress.model_dump_json())
        progress.intent = None

    async def _call(
        self,
        call: ToolCall,
        progress: StepProgress,
        resume_at: ResumePoint | None,
        step: int,
    ) -> ToolOutcome | Deferral:
        """One call of the answer: cut off, reported after a crash, refused by the role, or run."""
        if progress.finish_reason == "length" and isinstance(call.arguments, str):
            return ToolOutcome(_CUT_OFF_CALL, is_error=True)
        if resume_at is not None and resume_at.interrupted:
            return self.deferrals.interrupted_outcome(call.name)
        refused = self._refusal(call.name)
        if refused is not None:
            return refused
        marks: list[Callable[[], None]] = []
        if resume_at is not None:
            marks.append(self.deferrals.mark_performing(self.store, resume_at.request))
        if self.journaling:
            marks.append(lambda: self._store_intent(call, progress, step))

        def before_invoke() -> None:
            for mark in marks:
                mark()

        context = ToolContext(self.run_id, step, call.id)
        return await self.toolbox.dispatch(
            call, gate=self.gate, context=context, resume_at=resume_at, before_invoke=before_invoke
        )

    def _refusal(self, name: str) -> ToolOutcome | None:
        """The in-band refusal of a call the run's role may not make, if it may not."""
        if self.role is None:
            return None
        if self.composition is None:  # a step finished on resume: composed as it was then
            self.composition = self.role.compose(self._viewed())
        said = self.composition.refusal(name, self.role.name)
        return ToolOutcome(f"{name}: {said}", is_error=True) if said is not None else None

    async def _charged_call(
        self,
        request: CompletionRequest,
        record: StepRecord,
        events: list[RunEvent],
        purpose: Literal["answer", "compaction"] = "answer",
    ) -> CompletionResponse | Unanswered:
        """One model call (its attempts into ``record``), its spend counted and drawn."""
        first = len(record.attempts)
        answer = await self.caller.call(request, record, events)
        made = record.attempts[first:]
        if self.observer is not None:
            self.told += provider_calls(self.run_id, record.step, made, request, answer, purpose)
        cost = sum(a.cost_micros or 0 for a in made)
        self.cost_micros += cost
        self.unpriced_calls += sum(1 for a in made if a.unpriced)
        if self.node is not None and made:
            self.node.draw(sum(a.usage.total_tokens for a in made), cost)
        return answer

    def _past_share(self, request: CompletionRequest) -> bool:
        """Whether ``request`` would pass the compaction's share of the context window."""
        if self.compaction is None or self.window is None:
            return False
        return estimate_tokens(request) > self.compaction.at_share * self.window

    async def _compact(self, record: StepRecord, events: list[RunEvent]) -> None:
        """One compaction pass: the model marks and summarises; the checked edits join the view.

        The edits are committed with the step (its answer's journal, or the
        step itself), beside the transcript, which is never rewritten.
        """
        assert self.compaction is not None
        guarded = protected(self.messages, self.view, self.compaction.keep_recent)
        request = compactor_request(
            self.provider.model,
            self.contract.goal,
            self.messages,
            self.view,
            guarded,
            MAX_OUTPUT_TOKENS,
        )
        answer = await self._charged_call(request, record, events, "compaction")
        if isinstance(answer, Unanswered):
            return  # the step's own call follows, and meets the same provider
        record.extra_usage = record.extra_usage + answer.usage
        self.usage = self.usage + answer.usage
        edits, _ = apply_pass(answer.tool_calls, self.messages, self.view, guarded, record.step)
        at = time.time()
        record.compactions += [CompactionRow(e.kind, e.step, e.message, e.text, at) for e in edits]
        self.view.add(edits)

    def _journal(self, record: StepRecord, progress: StepProgress) -> None:
        """Commit the answer (its attempts and draws with it) before its calls act.

        A step redone after a crash or a pause then finishes with this answer,
        so the model is not paid twice, its spawns find the children they
        made, and its calls that acted are not repeated (see ``_effects.py``).
        """
        self.journaling = True
        first = progress.assistant.tool_calls[0]
        if first.name in FILE_TOOLS:  # its intent rides with the answer: one commit less
            progress.intent = intent_for(self.toolbox, first, self.contract.root)
            self.stored_intent = first.id
        entry = StepRecord(
            step=record.step,
            started_at=record.started_at,
            finished_at=time.time(),
            attempts=record.attempts,
            tree_events=self.node.take_rows() if self.node is not None else [],
            journal_json=progress.model_dump_json(),
            compactions=record.compactions,
            extra_usage=record.extra_usage,
        )
        self.store.commit_step(self.run_id, entry)
        progress.intent = None
        record.earlier_cost_micros += entry.cost_micros
        record.attempts, record.compactions, record.extra_usage = [], [], Usage()

    async def _act(
        self,
        record: StepRecord,
        events: list[RunEvent],
        progress: StepProgress,
        resume_at: ResumePoint | None = None,
    ) -> RunOutcome | None:
        """Run the answer's tool calls from where ``progress`` is, then check and close the step.

        ``resume_at`` continues the first call at its deferred act, on a resume.
        """
        step = record.step
        calls = progress.assistant.tool_calls
        while len(progress.done) < len(calls):
            call = calls[len(progress.done)]
            begun = time.time()
            if self.observer is not None:
                await self._tool_started(step, call, begun)
            done = self._taken_effect(call) or await self._call(
                call, progress, resume_at, record.step
            )
            if isinstance(done, Deferral):
                if await self._children_paused(progress):
                    return RunOutcome.AWAITING_APPROVAL
                progress.cleared = list(done.cleared)
                return self.deferrals.defer(record, events, progress, done.request)
            record.sandbox_events.extend(event_rows(call.id, done.events))
            self.deferrals.resolved(record)
            resume_at, progress.cleared = None, []
            arguments = call.arguments if done.arguments is None else done.arguments
            kind = self.toolbox.kind_of(call.name)
            result = storable(done.content)  # a tool's text may hold a lone surrogate
            progress.done.append(
                DoneCall(
                    call_id=call.id,
                    name=call.name,
                    arguments_json=json.dumps(arguments),
                    result=result,
                    is_error=done.is_error,
                    changed=done.changed,
                    kind=kind,
                    duration=done.duration,
                    error=storable(done.error) if done.error is not None else None,
                )
            )
            events.append(
                ToolCalled(
                    run_id=self.run_id,
                    step=step,
                    call_id=call.id,
                    name=call.name,
                    arguments=arguments,
                    result=result,
                    is_error=done.is_error,
                    changed=done.changed,
                    tool_kind=kind,
                    started_at=begun,
                    duration=time.time() - begun,
                    error=progress.done[-1].error,
                )
            )
        if await self._children_paused(progress):
            return RunOutcome.AWAITING_APPROVAL
        record.messages.append(progress.assistant)
        record.usage = progress.usage
        record.tool_calls = [d.row() for d in progress.done]
        if progress.done:
            results = tuple(d.result_block() for d in progress.done)
            record.messages.append(Message(role="tool", content=results))
        outcome: RunOutcome | None = None
        trigger: Trigger | None = None
        if any(d.changed for d in progress.done):
            trigger = "file_changed"
        elif not progress.done:
            trigger = "turn_ended"
        elif self.check_pending:
            trigger = "resumed"
        if trigger is not None:
            passed = await self._verify(record, events, trigger)
            if passed:
                outcome = RunOutcome.SUCCESS
        self.messages.extend(record.messages)
        self.steps = step
        self.usage = self.usage + record.usage
        events.append(
            StepFinished(
                run_id=self.run_id,
                step=step,
                usage=record.usage,
                total_usage=self.usage,
                tool_calls=len(progress.done),
                text=progress.assistant.text,
                provider=progress.provider,
                cost_micros=None if progress.unpriced else record.step_cost_micros,
                total_cost_micros=self.cost_micros,
            )
        )
        return outcome or self._budget_outcome()

    async def _tool_started(self, step: int, call: ToolCall, at: float) -> None:
        """Tell the observer, as it happens, that a call begins (a span's true start)."""
        started = ToolStarted(run_id=self.run_id, step=step, call_id=call.id, name=call.name, at=at)
        await self._emit([started])

    async def _children_paused(self, progress: StepProgress) -> bool:
        """Wait for this turn's sub-agents and put their results in ``progress``.

        When one paused for approval, so does this agent: its step stays
        uncommitted (its answer is in the journal) and the run reports the
        child's request.
        """
        if self.node is None:
            return False
        settled = await self.node.settle(progress.done)
        if isinstance(settled, ApprovalRequest):
            self.deferrals.awaiting = settled
            return True
        progress.done = settled
        return False

    def _can_afford(self, request: CompletionRequest) -> bool:
        """Whether the cost budget can cover the least the next call will cost.

        The next prompt holds the last one, so it costs at least the last call's
        input tokens (at first, the prompt's characters / 4) at the cheapest
        input rate of the first provider to be asked.
        """
        max_cost = self.contract.budget.max_cost_micros
        if max_cost is None or self.prices is None:
            return True
        price = self.prices.price_for(self.caller.members[0].model)
        if price is None:
            return True
        tokens = self.last_input_tokens
        if tokens is None:
            tokens = len(request.model_dump_json()) // _CHARS_PER_TOKEN
        return self.cost_micros + price.input_floor_micros(tokens) <= max_cost

    async def _verify(self, record: StepRecord, events: list[RunEvent], trigger: Trigger) -> bool:
        deadline = None
        if self.wall_end is not None and not self.finishing_deferred:
            deadline = time.monotonic() + (self.wall_end - time.time())
        self.check_pending = False
        started, begun = time.monotonic(), time.time()
        criterion = self.contract.verify
        refused = [
            verdict
            for argv in criterion.commands()
            if (verdict := self.gate.check_outright(canonical_argv(argv))).effect
            is not Effect.ALLOW
        ]
        subject = self.contract.subject(deadline, self.chosen.sandbox)
        try:
            if refused:  # a remembered deny since the run began: the check fails closed
                raise RefusedError(f"the policy refuses the check: {refused[0].describe()}")
            result = await criterion.check(subject)
        except Exception as exc:  # a check that breaks fails; it never passes or crashes
            result = VerificationResult(
                passed=False,
                criterion=criterion.describe(),
                output=f"the check could not run: {type(exc).__name__}: {exc}",
            )
        record.sandbox_events.extend(event_rows("", subject.events))
        result_json = result.model_dump_json()
        checked = VerificationRow(
            trigger=trigger,
            passed=result.passed,
            criterion=result.criterion,
            summary=result.summary,
            result_json=result_json,
            duration=time.monotonic() - started,
        )
        record.verifications.append(checked)
        self.verification = result
        events.append(
            Verified(
                run_id=self.run_id,
                step=record.step,
                trigger=trigger,
                passed=result.passed,
                criterion=result.criterion,
                summary=result.summary,
                output=result.output,
                started_at=begun,
                duration=checked.duration,
            )
        )
        if not result.passed and trigger == "turn_ended":
            record.messages.append(failing_check_message(result))
        return result.passed

    # -- ending and telling --------------------------------------------------------

    def _finish(self, record: StepRecord, outcome: RunOutcome) -> RunFinished:
        record.finish = finish = Finish(
            outcome=outcome.value,
            finished_at=time.time(),
            error_json=json.dumps(self.last_error.to_dict()) if self.last_error else None,
        )
        return RunFinished(
            run_id=self.run_id,
            step=self.steps,
            outcome=outcome.value,
            steps=self.steps,
            usage=self.usage,
            error=str(self.last_error) if self.last_error is not None else None,
            cost_micros=self.cost_micros,
            unpriced_calls=self.unpriced_calls,
            finished_at=finish.finished_at,
        )

    async def _emit(self, events: Sequence[RunEvent]) -> None:
        await emit(self.observer, events)


def _overflowed(answer: CompletionResponse | Unanswered) -> bool:
    """Whether a call failed because the prompt does not fit the context window."""
    error = answer.error if isinstance(answer, Unanswered) else None
    return error is not None and error.kind == "context_overflow"


_NO_LATE_CHECK = (None, RunOutcome.SUCCESS, RunOutcome.AWAITING_APPROVAL)
"""Outcomes after which a resumed run's pending check is not made at the end."""
