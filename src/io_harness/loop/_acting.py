"""A step's second phase: the answer's tool calls, in order, then the step's close.

Each call is cut off (its arguments did not fit), reported (a crash cut it
short, or the deferred act it was performing), refused (outside the role's
tools) or dispatched through the gate; a deferral stops the step, stored
part-way. When every call has an observation (and the turn's sub-agents have
ended), the step's messages are set down, the criterion is checked when a
file changed or the turn ended, and the run's state takes the step in.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from io_harness.loop._asking import ask
from io_harness.loop._checking import verify
from io_harness.loop._deferral import awaiting_outcome
from io_harness.loop._effects import acts_on_the_world, intent_for, taken_effect
from io_harness.loop._outcome import RunOutcome
from io_harness.loop._progress import DoneCall, StepProgress
from io_harness.loop._sandboxing import event_rows
from io_harness.loop._state import StepContext
from io_harness.messages import Message, ToolCall, storable
from io_harness.observe import StepFinished, ToolCalled, ToolStarted, Trigger
from io_harness.policy._approval import ApprovalRequest
from io_harness.tools._ask import ASK_USER
from io_harness.tools._base import ToolContext, ToolOutcome
from io_harness.tools._gated import Deferral, ResumePoint

if TYPE_CHECKING:
    from io_harness.loop._engine import Engine

__all__ = ["act"]

_CUT_OFF_CALL = (
    "this tool call was cut off by the output token limit (finish reason: length) before "
    "its arguments were complete, so nothing ran; send it again with less in it (for "
    "example, write a large file in smaller edits)"
)


async def act(
    engine: Engine,
    ctx: StepContext,
    progress: StepProgress,
    resume_at: ResumePoint | None = None,
) -> RunOutcome | None:
    """Run the answer's tool calls from where ``progress`` is, then check and close the step.

    ``resume_at`` continues the first call at its deferred act, on a resume.
    """
    calls = progress.assistant.tool_calls
    while len(progress.done) < len(calls):
        call = calls[len(progress.done)]
        begun = time.time()
        if engine.kit.observer is not None:
            started = ToolStarted(
                run_id=engine.run_id, step=ctx.step, call_id=call.id, name=call.name, at=begun
            )
            await engine.emit([started])
        done = _taken_effect(engine, ctx, call) or await _call(
            engine, ctx, call, progress, resume_at
        )
        if isinstance(done, Deferral):
            if await _children_paused(engine, progress):
                return _paused(engine)
            progress.cleared = list(done.cleared)
            return engine.deferrals.defer(ctx.record, ctx.events, progress, done.request)
        ctx.record.sandbox_events.extend(event_rows(call.id, done.events))
        engine.deferrals.resolved(ctx.record)
        resume_at, progress.cleared = None, []
        ctx.events.append(_done(engine, ctx, call, done, progress, begun))
    if await _children_paused(engine, progress):
        return _paused(engine)
    return await _close(engine, ctx, progress)


def _paused(engine: Engine) -> RunOutcome:
    """The outcome of an agent paused by a sub-agent's request (an act or a question)."""
    assert engine.deferrals.awaiting is not None
    return awaiting_outcome(engine.deferrals.awaiting)


def _done(
    engine: Engine,
    ctx: StepContext,
    call: ToolCall,
    done: ToolOutcome,
    progress: StepProgress,
    begun: float,
) -> ToolCalled:
    """Set down a call's observation in ``progress``; the event that tells it."""
    arguments = call.arguments if done.arguments is None else done.arguments
    kind = engine.toolbox.kind_of(call.name)
    result = storable(done.content)  # a tool's text may hold a lone surrogate
    error = storable(done.error) if done.error is not None else None
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
            error=error,
        )
    )
    return ToolCalled(
        run_id=engine.run_id,
        step=ctx.step,
        call_id=call.id,
        name=call.name,
        arguments=arguments,
        result=result,
        is_error=done.is_error,
        changed=done.changed,
        tool_kind=kind,
        started_at=begun,
        duration=time.time() - begun,
        error=error,
    )


async def _close(engine: Engine, ctx: StepContext, progress: StepProgress) -> RunOutcome | None:
    """The step's messages set down, its check made, its state taken in; its outcome."""
    record, state = ctx.record, engine.state
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
    elif state.check_pending:
        trigger = "resumed"
    if trigger is not None and await verify(engine, ctx, trigger):
        outcome = RunOutcome.SUCCESS
    state.committed(record)
    ctx.events.append(
        StepFinished(
            run_id=engine.run_id,
            step=ctx.step,
            usage=record.usage,
            total_usage=state.usage,
            tool_calls=len(progress.done),
            text=progress.assistant.text,
            provider=progress.provider,
            cost_micros=None if progress.unpriced else record.step_cost_micros,
            total_cost_micros=state.cost_micros,
        )
    )
    return outcome or engine.budget_outcome()


def _taken_effect(engine: Engine, ctx: StepContext, call: ToolCall) -> ToolOutcome | None:
    """For the call that was acting when a crash cut its step short: what it did."""
    intent = ctx.cut_short
    if intent is None or intent.call_id != call.id:
        return None
    ctx.cut_short = None
    return taken_effect(intent, call, engine.contract.root)


async def _call(
    engine: Engine,
    ctx: StepContext,
    call: ToolCall,
    progress: StepProgress,
    resume_at: ResumePoint | None,
) -> ToolOutcome | Deferral:
    """One call of the answer: cut off, reported after a crash, refused by the role, or run."""
    if progress.finish_reason == "length" and isinstance(call.arguments, str):
        return ToolOutcome(_CUT_OFF_CALL, is_error=True)
    if resume_at is not None and resume_at.interrupted:
        return engine.deferrals.interrupted_outcome(call.name)
    refused = _refusal(engine, ctx, call.name)
    if refused is not None:
        return refused
    if call.name == ASK_USER and ASK_USER in engine.toolbox.names:
        return await ask(engine, ctx.step, call, resume_at)
    marks: list[Callable[[], None]] = []
    if resume_at is not None:
        marks.append(engine.deferrals.mark_performing(engine.kit.store, resume_at.request))
    if ctx.journaling:
        marks.append(lambda: _store_intent(engine, ctx, call, progress))

    def before_invoke() -> None:
        for mark in marks:
            mark()

    context = ToolContext(engine.run_id, ctx.step, call.id)
    return await engine.toolbox.dispatch(
        call, gate=engine.gate, context=context, resume_at=resume_at, before_invoke=before_invoke
    )


def _refusal(engine: Engine, ctx: StepContext, name: str) -> ToolOutcome | None:
    """The in-band refusal of a call the run's role may not make, if it may not."""
    role = engine.role
    if role is None:
        return None
    if ctx.composition is None:  # a step finished on resume: composed as it was then
        ctx.composition = role.compose(engine.state.viewed())
    said = ctx.composition.refusal(name, role.name)
    return ToolOutcome(f"{name}: {said}", is_error=True) if said is not None else None


def _store_intent(engine: Engine, ctx: StepContext, call: ToolCall, progress: StepProgress) -> None:
    """Store, with the calls done so far, what ``call`` is about to change."""
    if call.id == ctx.stored_intent or not acts_on_the_world(engine.toolbox, call):
        return  # stored with the answer already, or it only reads
    progress.intent = intent_for(engine.toolbox, call, engine.contract.root)
    engine.kit.store.journal_step(engine.run_id, ctx.step, progress.model_dump_json())
    progress.intent = None


async def _children_paused(engine: Engine, progress: StepProgress) -> bool:
    """Wait for this turn's sub-agents and put their results in ``progress``.

    When one paused for approval, so does this agent: its step stays
    uncommitted (its answer is in the journal) and the run reports the
    child's request.
    """
    if engine.node is None:
        return False
    settled = await engine.node.settle(progress.done)
    if isinstance(settled, ApprovalRequest):
        engine.deferrals.awaiting = settled
        return True
    progress.done = settled
    return False
